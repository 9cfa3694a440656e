// PgStore: a worker's liveness after registration (pg_store_open.cc,
// Register): the renewals of its claims on its liveness session, and what
// happens when that session is lost (docs/POSTGRES.md, "Liveness").
//
// A lost liveness session stops the worker's claiming at once. It is taken
// back (a new session, the same lock key) only when the server restarted
// (its postmaster start time changed: every session ended at once, none
// of them was ended to stop this worker) or this side ended the session
// (no answer in time: a renewal that waited behind the run's row, a
// half-open link), and nobody acted on the worker's death meanwhile: no
// transaction put back a claim of it, none of its claims lapsed, the run
// was not archived. Otherwise the worker is gone for good: it claims
// nothing more and its claims lapse (its completions still land while
// their fence holds).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "queue/pg/pg_store.h"
#include "queue/pg/pg_txn.h"

namespace wizq {
int64_t PgStore::MonoMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

// A claim holds until the store's now() at its last renewal (or its
// claim) plus the lease; that now() is no earlier than when the renewal
// began here. The margin covers killing what runs and clocks that tick at
// slightly different rates; with renewals every third of the lease, an
// outage of the store up to about half the lease ends nothing.
int64_t PgStore::LocalDeadlineMs() const {
  const int64_t proof = proof_mono_ms_.load();
  if (worker_id_.empty() || proof == 0) return 0;
  return proof + worker_lease_ms_ - worker_lease_ms_ / 5;
}

// Renewed every third of the lease; while the liveness session is lost
// (the claims' clock runs), it is sought again every quarter second.
void PgStore::RenewLoop() {
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stop_) {
    const int64_t third = worker_lease_ms_ / 3;
    const int64_t period = live_lost_ ? std::min<int64_t>(250, third) : third;
    stop_cv_.wait_for(lock, std::chrono::milliseconds(period));
    if (stop_) return;
    lock.unlock();
    RenewClaims().IgnoreError();  // a failure is tried again next period
    lock.lock();
    if (live_gone_) return;
  }
}

// The worker's claims (not the leased ones, which their agents renew) hold
// for worker_lease_ms. The run's row is not locked: a transaction frozen
// while it holds it (a frozen machine, a cut link) stalls the run's
// transactions for up to kPgRunIdleInTransactionMs, never the renewals of
// the others. A rescue locks what it puts back and judges it again
// (PgStore::Reclaim), so a renewal and a rescue of one claim serialise on
// its row. Called by the renewer (RenewClaims()), and by a transaction or
// read that found its own session lost (PgStore::OnSession, with mu_).
Status PgStore::RenewClaims() {
  Tokens unconfirmed;
  Status s = RenewClaims(&unconfirmed);
  // Outside live_mu_ (a transaction that holds mu_ may wait for it), and
  // never waiting for mu_ (Close holds it while it joins this thread): a
  // transaction under way finds the lost claims itself (FindLost).
  if (!unconfirmed.empty()) {
    std::unique_lock<std::mutex> g(mu_, std::try_to_lock);
    if (g.owns_lock()) ConfirmLost(unconfirmed);
  }
  return s;
}

Status PgStore::RenewClaims(Tokens* unconfirmed) {
  std::lock_guard<std::mutex> g(live_mu_);
  if (live_ == nullptr) return Status::OK();  // closed
  if (live_gone_) return Status::IOError("the liveness session was lost");
  Status s;
  if (!live_->lost()) {
    // A transaction of this worker still under way may commit claims this
    // renewal does not see: they hold from when it got the run's row, so
    // the proof does (one still waiting for the row claimed nothing yet).
    const int64_t now = MonoMs();
    const int64_t inflight = txn_began_ms_.load();
    const int64_t began = inflight > 0 ? std::min(inflight, now) : now;
    const Tokens known = WorkerClaims();
    Tokens renewed;
    PgTxn txn(live_.get());
    s = txn.Begin();
    if (s.ok()) s = Renew(live_.get(), &renewed);
    if (s.ok()) s = txn.Commit();
    if (s.ok()) NoteRenewal(began, known, renewed, unconfirmed);
  }
  if (!live_->lost()) return s;
  if (!live_lost_.load()) live_lost_at_ms_ = MonoMs();
  live_lost_ = true;
  return Relive(unconfirmed);
}

// Inside a transaction of `c`: every claim of this worker holds
// worker_lease_ms more (*renewed: which, with their tokens); notes the
// run's next seq (read first: a put-back committed meanwhile is after it)
// and the server's start time, as of this proof of life.
Status PgStore::Renew(PgConn* c, Tokens* renewed) {
  std::vector<PgResult> r;
  const PgStatement extend = ExtendStatement(nullptr);
  WIZQ_RETURN_IF_ERROR(c->ExecPipeline(
      {{Sql("SELECT next_seq, pg_postmaster_start_time()::text AS up "
            "FROM {s}.runs WHERE run = $1"),
        {run_}},
       {extend.sql + " RETURNING task_id, claim_token", extend.params}},
      &r));
  if (r[0].rows() == 0) return Status::NotFound("the run left the store");
  for (int i = 0; i < r[1].rows(); i++) {
    (*renewed)[r[1].GetInt(i, "task_id")] = r[1].Get(i, "claim_token");
  }
  live_seq_ = r[0].GetInt(0, "next_seq");
  server_up_ = r[0].Get(0, "up");
  return Status::OK();
}

// Every claim of this worker (among `ids`, when given: its transactions
// know what they hold, and renew only that) holds worker_lease_ms more.
PgStatement PgStore::ExtendStatement(const std::vector<int64_t>* ids) const {
  const std::string sql =
      "UPDATE {s}.tasks SET claim_until_ms = " + std::string(kPgNowMsSql) +
      " + $3 WHERE run = $1 AND state = 1 AND claimed_by = $2 AND "
      "lease_token IS NULL";
  if (ids == nullptr) return {Sql(sql), {run_, worker_id_, worker_lease_ms_}};
  return {Sql(sql + " AND task_id = ANY($4::bigint[])"),
          {run_, worker_id_, worker_lease_ms_, PgIntArray(*ids)}};
}

// What a proof of life proves (SPEC §14, the local deadline): that every
// claim the worker held when it began still holds a lease from then. A
// claim it did not renew was given to another (it lapsed: its worker was
// frozen or cut off past the local deadline), or was ended by a
// transaction of this worker that committed meanwhile. Until the worker
// knows which (ConfirmLost, FindLost) and has taken the lost ones
// (TakeLostClaims), no proof counts: the local deadline, passed already
// for a lost claim, stays passed, so that its attempt never starts.
PgStore::Tokens PgStore::WorkerClaims() {
  std::lock_guard<std::mutex> g(claims_mu_);
  Tokens out;
  for (const auto& [id, h] : held_) {
    if (!h.leased) out[id] = h.token;
  }
  return out;
}

void PgStore::NoteRenewal(int64_t began, const Tokens& known,
                          const Tokens& renewed, Tokens* unconfirmed) {
  std::lock_guard<std::mutex> g(claims_mu_);
  for (const auto& [id, token] : known) {
    auto r = renewed.find(id);
    if (r != renewed.end() && r->second == token) continue;
    auto h = held_.find(id);
    if (h != held_.end() && h->second.token == token)
      (*unconfirmed)[id] = token;
  }
  if (unconfirmed->empty()) NoteProof(began);
}

void PgStore::NoteProof(int64_t began) {
  if (!lost_.empty()) return;
  int64_t was = proof_mono_ms_.load();
  while (was < began && !proof_mono_ms_.compare_exchange_weak(was, began)) {
  }
}

// With mu_ (held by the caller), every transaction of this worker that
// ended a claim has forgotten it: a claim the renewal did not renew and
// that is still held here was not this worker's when the renewal ran. (A
// transaction whose COMMIT stayed unknown forgot nothing: if it had ended
// the claim, losing it ends nothing more.)
void PgStore::ConfirmLost(const Tokens& unconfirmed) {
  std::lock_guard<std::mutex> c(claims_mu_);
  for (const auto& [id, token] : unconfirmed) {
    auto h = held_.find(id);
    if (h != held_.end() && h->second.token == token) Lose(id);
  }
}

void PgStore::FindLost(const PgWork& w) {
  std::lock_guard<std::mutex> g(claims_mu_);
  std::vector<int64_t> lost;
  for (const auto& [id, h] : held_) {
    const PgTask* row = w.Cached(id);
    if (!h.leased && (row == nullptr || !HeldByMe(*row))) lost.push_back(id);
  }
  for (int64_t id : lost) Lose(id);
}

void PgStore::Lose(int64_t id) {
  held_.erase(id);
  lost_.push_back(id);
}

Status PgStore::Liveness() const {
  if (!live_gone_.load()) return Status::OK();
  return Status::IOError(
      "this worker lost its liveness session with the "
      "store (" +
      gone_why_ + "): it claims nothing more (run wizq again to go on)");
}

void PgStore::AddUntakenLost(std::vector<int64_t>* ids) {
  std::lock_guard<std::mutex> g(claims_mu_);
  ids->insert(ids->end(), lost_.begin(), lost_.end());
}

void PgStore::TakeLostClaims(std::vector<int64_t>* ids) {
  std::lock_guard<std::mutex> g(claims_mu_);
  ids->insert(ids->end(), lost_.begin(), lost_.end());
  lost_.clear();
}

// Takes the lost liveness back by the rule above, or marks it gone. An
// IOError while the server is unreachable: tried again next period.
Status PgStore::Relive(Tokens* unconfirmed) {
  const int64_t began = MonoMs();
  const Tokens known = WorkerClaims();
  std::unique_ptr<PgConn> c;
  WIZQ_RETURN_IF_ERROR(PgConn::Open(
      options_.location, SessionOptions(options_, "wizq worker"), &c));
  bool locked = false;
  WIZQ_RETURN_IF_ERROR(
      c->TryAdvisoryLock(kPgWorkerLockSpace, lock_key_, &locked));
  // A session this side ended (no answer in time: a slow server, a
  // half-open link) may hold the lock on the server a while: until its
  // backend notices (client_connection_check_interval, 1 s) or, behind a
  // half-open link, much longer.
  const bool ended_here = live_->ended_here();
  if (!locked && ended_here && began < live_lost_at_ms_ + kPgEndedHereMs) {
    return Status::IOError(
        "the liveness session this worker ended still holds its lock");
  }
  PgTxn txn(c.get());
  std::string why = "its lock key is held by another session";
  if (locked) {
    WIZQ_RETURN_IF_ERROR(txn.Begin());
    WIZQ_RETURN_IF_ERROR(WhyNotRelive(c.get(), ended_here, &why));
  }
  if (!why.empty()) {
    gone_why_ = why;
    live_gone_ = true;  // c ends, and with it the lock it may hold
    return Status::IOError("the liveness session was lost for good: " + why);
  }
  WIZQ_RETURN_IF_ERROR(c->Exec(
      Sql("INSERT INTO {s}.workers (worker_id, run, host, pid, backend_pid, "
          "lock_key, started_ms) VALUES ($1, $2, $3, $4, $5, $6, " +
          std::string(kPgNowMsSql) +
          ") ON CONFLICT (worker_id) DO UPDATE SET backend_pid = "
          "excluded.backend_pid"),
      {worker_id_, run_, host_key_, static_cast<int64_t>(getpid()),
       c->backend_pid(), lock_key_}));
  Tokens renewed;
  WIZQ_RETURN_IF_ERROR(Renew(c.get(), &renewed));
  WIZQ_RETURN_IF_ERROR(txn.Commit());
  live_ = std::move(c);
  live_lost_ = false;
  NoteRenewal(began, known, renewed, unconfirmed);
  return Status::OK();
}

// Inside Relive's transaction, with the lock key held: *why is "" if the
// liveness may be taken back, else why not. The run's row is locked
// first, so that no transaction that saw this worker dead is still under
// way (it held the row) and none starts before the commit. A session
// `ended_here` was not ended to stop this worker, restart or not.
Status PgStore::WhyNotRelive(PgConn* c, bool ended_here, std::string* why) {
  why->clear();
  PgResult r;
  WIZQ_RETURN_IF_ERROR(c->Exec(
      Sql("SELECT archived_at IS NOT NULL AS archived, "
          "pg_postmaster_start_time()::text AS up FROM {s}.runs WHERE run = "
          "$1 FOR UPDATE"),
      {run_}, &r));
  if (r.rows() == 0 || r.GetBool(0, "archived")) {
    *why = "the run was archived or removed meanwhile";
  } else if (!ended_here && r.Get(0, "up") == server_up_) {
    *why = "the server did not restart: the session was ended";
  }
  if (!why->empty()) return Status::OK();
  // Events name the worker in compact JSON: `"worker":"w1-ab"`, which a
  // string value (escaped) cannot spell.
  WIZQ_RETURN_IF_ERROR(c->Exec(
      Sql("SELECT EXISTS (SELECT 1 FROM {s}.events e WHERE e.run = $1 AND "
          "e.seq >= $3 AND e.kind IN ('task_reset', 'task_failed') AND "
          "strpos(e.body, '\"reason\":\"worker_lost\"') > 0 AND "
          "strpos(e.body, '\"worker\":' || to_json($2::text)::text) > 0) AS "
          "put_back, EXISTS (SELECT 1 FROM {s}.tasks t WHERE t.run = $1 AND "
          "t.state = 1 AND t.claimed_by = $2 AND t.lease_token IS NULL AND "
          "t.claim_until_ms < " +
          std::string(kPgNowMsSql) + ") AS lapsed"),
      {run_, worker_id_, live_seq_}, &r));
  if (r.GetBool(0, "put_back")) {
    *why = "a claim of this worker was put back as lost meanwhile";
  } else if (r.GetBool(0, "lapsed")) {
    *why = "a claim of this worker lapsed meanwhile";
  }
  return Status::OK();
}

}  // namespace wizq
