// PgStore: transactions (lock the run's row, reclaim, the caller's verbs,
// flush, NOTIFY, COMMIT; a COMMIT of unknown outcome re-read), closing,
// the worker's claim renewals and WhileCurrent.
#include "queue/pg/pg_store.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "queue/pg/pg_location.h"
#include "queue/pg/pg_migrate.h"
#include "queue/pg/pg_txn.h"
#include "util/crash_point.h"

namespace wizq {

PgStore::PgStore(const StoreOptions& options, std::unique_ptr<PgConn> conn)
    : options_(options), conn_(std::move(conn)) {
  schema_ = SchemaOf(options);
  quoted_ = conn_->QuoteIdentifier(schema_);
  if (options.worker_lease_ms > 0) worker_lease_ms_ = options.worker_lease_ms;
}

// Releases everything without writing, as a crash would; the liveness
// lock is let go explicitly first, so that the next process to look sees
// this worker gone at once (after a real crash the server notices the
// closed session by itself).
PgStore::~PgStore() {
  {
    std::lock_guard<std::mutex> g(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (live_ != nullptr && !live_->lost()) {
    // Best effort: if it fails the session is gone and so is the lock.
    live_->Exec("SELECT pg_advisory_unlock_all()").IgnoreError();
  }
}

std::string PgStore::DisplayLocation() const {
  return RedactPgLocation(options_.location) + " (schema " + schema_ + ")";
}

bool PgStore::HeldByMe(const PgTask& t) const {
  auto it = held_.find(t.t.id);
  return it != held_.end() && it->second.attempt == t.t.attempts &&
         it->second.token == t.claim_token;
}

// The main session is opened again after it was lost (it holds nothing a
// new one would lack: the worker's lock is on live_).
Status PgStore::EnsureConn() {
  if (conn_ != nullptr && !conn_->lost()) return Status::OK();
  return PgConn::Open(options_.location, SessionOptions(options_, "wizq"),
                      &conn_);
}

PgConnOptions PgStore::SessionOptions(const StoreOptions& o,
                                      const char* application) {
  PgConnOptions c;
  c.application_name = application;
  // Whoever holds the run's row stalls every transaction and renewal of
  // the run, whatever its own lease: an agent's, a `wizq answer`'s or a
  // worker's session left in a transaction (frozen, cut off) ends soon.
  c.idle_in_transaction_timeout_ms = kPgRunIdleInTransactionMs;
  // A worker's statement that gets no answer (a half-open connection)
  // ends its session after four fifths of its lease, so that it
  // reconnects or, for its liveness, stops claiming, before its claims
  // could lapse; but never before a transaction it may wait for (holding
  // the run's row on a stalled connection) was ended by the server.
  if (o.worker_lease_ms > 0) {
    c.answer_timeout_ms = static_cast<int>(std::clamp<int64_t>(
        std::max<int64_t>(o.worker_lease_ms * 4 / 5,
                          c.idle_in_transaction_timeout_ms + 2000),
        2000, kPgAnswerTimeoutMs));
  }
  return c;
}

// A session is found lost only when a statement fails on it (a restarted
// server, an ended backend): `fn`, which keeps nothing of a failed try, is
// then run once more on a new session. A session that was just opened and
// fails is not retried (the server is down).
Status PgStore::OnSession(const std::function<Status()>& fn) {
  const bool was_open = conn_ != nullptr && !conn_->lost();
  WIZQ_RETURN_IF_ERROR(EnsureConn());
  Status s = fn();
  if (s.ok() || !was_open || !conn_->lost()) return s;
  // The liveness session most likely went the same way (a restarted
  // server): settled now, before a claim relies on it.
  if (!worker_id_.empty()) {
    PgStore::Tokens unconfirmed;
    RenewClaims(&unconfirmed).IgnoreError();
    ConfirmLost(unconfirmed);  // the caller holds mu_
  }
  WIZQ_RETURN_IF_ERROR(EnsureConn().Annotate(s.message()));
  return fn();
}

// Before the caller's verbs run, a lost session is replaced: nothing of
// the transaction was kept (the server rolls back what a lost session
// began), and nothing of it was done in the caller's memory yet. Never
// inside one: a session lost later fails the transaction.
Status PgStore::Begin(int64_t run, PgRun* locked, int64_t* now_ms,
                      std::atomic<int64_t>* locked_mono,
                      std::vector<PgStatement> also,
                      std::vector<PgResult>* got) {
  return OnSession(
      [&] { return LockRun(run, locked, now_ms, locked_mono, also, got); });
}

// Two round trips: BEGIN and the row locked; then, once `locked_mono` is
// set, the database's clock and `also`. Every lease this transaction
// grants or renews is reckoned on this machine from `locked_mono`, which
// must come before the clock the store reckons it from (never after: a
// local deadline later than the store's would let an attempt outlive its
// lease). `also` goes after the clock for the same reason (a renewal).
Status PgStore::LockRun(int64_t run, PgRun* locked, int64_t* now_ms,
                        std::atomic<int64_t>* locked_mono,
                        std::vector<PgStatement> also,
                        std::vector<PgResult>* got) {
  std::vector<PgResult> results;
  WIZQ_RETURN_IF_ERROR(
      conn_->ExecPipeline({{std::string(PgConn::kBeginSql), {}},
                           {Sql(std::string("SELECT ") + kPgRunColumns +
                                " FROM {s}.runs r WHERE r.run = $1 FOR UPDATE"),
                            {run}}},
                          &results));
  const PgResult& r = results[1];
  if (r.rows() == 0) {
    return Status::NotFound("run " + std::to_string(run) +
                            " is no longer in the store");
  }
  PgRunFromRow(r, 0, locked);
  if (locked->archived) {
    return Status::Conflict("run " + locked->info.run_id +
                            " was archived since this process opened it (a "
                            "fresh run replaced it)");
  }
  if (locked_mono != nullptr) *locked_mono = MonoMs();
  std::vector<PgStatement> batch = {
      {"SELECT " + std::string(kPgNowMsSql) + " AS now", {}}};
  for (PgStatement& s : also) batch.push_back(std::move(s));
  WIZQ_RETURN_IF_ERROR(conn_->ExecPipeline(batch, &results));
  *now_ms = results[0].GetInt(0, "now");
  if (got != nullptr) {
    got->clear();
    for (size_t i = 1; i < results.size(); i++) {
      got->push_back(std::move(results[i]));
    }
  }
  return Status::OK();
}

// PostgreSQL costs a never-analyzed table of a few hundred rows from its
// pages, and every index of it alike: a generic plan made then (after a
// prepared statement's fifth run) may read an index by the run alone, and
// it is kept until the table is analyzed. A task's write by its key then
// walked every task of the run: 2.9 ms a write at 10^5 tasks instead of
// 30 us (docs/POSTGRES.md, "Plans and dead rows"). So a session that
// planned while the run was small makes its plans again, once, when the
// run is no longer small.
Status PgStore::RemakeSmallPlans(const PgRun& run) {
  if (run.next_task <= kPgSmallRunTasks) {
    conn_->set_plans_small(true);
    return Status::OK();
  }
  if (!conn_->plans_small()) return Status::OK();
  conn_->set_plans_small(false);
  return conn_->ForgetPrepared();
}

namespace {

// A serialization failure, a deadlock, a lock timeout: the server rolled
// the statement's transaction back, and the same transaction may succeed.
bool Retryable(PgErrorKind kind) {
  return kind == PgErrorKind::kRetryable ||
         kind == PgErrorKind::kLockNotAvailable;
}

}  // namespace

// A session lost while COMMIT was in flight leaves the outcome unknown:
// ResolveCommit finds it on a new session. Sets *again when the
// transaction is known not to have committed, which lets Transact run it
// once more.
Status PgStore::Commit(PgWork* w, int64_t give_up_ms, bool* again) {
  const int64_t last = w->run().next_seq - 1;
  std::vector<PgStatement> also;
  if (w->events_staged() > 0) {
    also.push_back(PgConn::NotifyStatement(
        schema_, std::to_string(w->run().run) + ":" + std::to_string(last)));
    // It writes: its id, to ask the server of its outcome if need be.
    also.push_back({"SELECT pg_current_xact_id()::text AS xid", {}});
  }
  std::vector<PgResult> got;
  Status s = w->Flush(std::move(also), &got, /*events=*/true);
  const std::string xid = s.ok() && w->events_staged() > 0
                              ? std::string(got.back().Get(0, "xid"))
                              : "";
  if (s.ok()) {
    CrashPoint("pg.before_commit");
    s = conn_->Commit([] { CrashPoint("pg.after_commit_sent"); });
    if (s.ok()) CrashPoint("pg.after_commit_ack");
  }
  if (s.ok() || conn_->last_error().kind != PgErrorKind::kCommitUnknown) {
    *again = !s.ok() && (Retryable(conn_->last_error().kind) ||
                         conn_->lost());  // COMMIT was not sent
    return s;
  }
  if (w->events_staged() == 0) return Status::OK();  // nothing to lose
#ifdef WIZQ_MUTANT_NO_OUTCOME_REREAD
  // Mutant (tests/machines/torture, make torture-mutants): run it again.
  (void)give_up_ms;
  (void)xid;
  *again = true;
  return s;
#else
  return ResolveCommit(*w, xid, give_up_ms, s, again);
#endif
}

// The old backend may still be committing (a slow WAL flush, a synchronous
// standby that has not answered): read now, the transaction's last event
// would be absent, and Transact would run it again beside the first. So
// first, on a new session (the server may be down for a while: sought
// again until `give_up_ms`), wait until the server says transaction `xid`
// has ended (pg_xact_status), then read that event back.
Status PgStore::ResolveCommit(const PgWork& w, const std::string& xid,
                              int64_t give_up_ms, const Status& lost,
                              bool* again) {
  for (int64_t pause = 100;; pause = std::min<int64_t>(2 * pause, 1000)) {
    Status s = EnsureConn();
    bool ended = false;
    if (s.ok()) {
      PgResult r;
      s = conn_->Exec("SELECT pg_xact_status($1::xid8) AS s", {xid}, &r);
      ended = s.ok() && (r.IsNull(0, 0) || r.Get(0, 0) != "in progress");
    }
    if (ended) break;
    if (MonoMs() + pause >= give_up_ms) {
      if (s.ok()) {
        s = Status::IOError(
            "the outcome of the transaction is unknown: the server was "
            "still committing it when this worker gave up waiting");
      }
      return s.Annotate(lost.message());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(pause));
  }
  PgResult r;
  WIZQ_RETURN_IF_ERROR(conn_->Exec(
      Sql("SELECT body FROM {s}.events WHERE run = $1 AND seq = $2"),
      {w.run().run, w.run().next_seq - 1}, &r));
  if (r.rows() == 1 && r.Get(0, "body") == w.last_line()) return Status::OK();
  *again = true;
  return Status::IOError(
      "the transaction did not commit (the session with the store was lost "
      "during COMMIT; nothing of it was kept)");
}

// A try that failed because its session was lost (the server restarted,
// the backend was ended, a connection dropped), or on a serialization
// failure, a deadlock or a lock timeout, kept nothing: it is run again on
// a new session, for at most a lease (a restart shorter than the lease
// re-runs nothing, SPEC §14). `fn` resets what it writes outside the
// transaction (queue/store.h).
Status PgStore::Transact(const std::function<Status(StoreTxn&)>& fn) {
  std::lock_guard<std::mutex> guard(mu_);
  WIZQ_RETURN_IF_ERROR(writable_);
  const int64_t give_up_ms = MonoMs() + worker_lease_ms_;
  for (int64_t pause = 100;; pause = std::min<int64_t>(2 * pause, 1000)) {
    bool again = false;
    const Status s = TryTransact(fn, give_up_ms, &again);
    if (s.ok() || !again || MonoMs() + pause >= give_up_ms) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause));
  }
}

Status PgStore::TryTransact(const std::function<Status(StoreTxn&)>& fn,
                            int64_t give_up_ms, bool* again) {
  PgRun run;
  int64_t now = 0;
  // Set once the run's row is held: a transaction waiting for it (behind
  // a frozen machine's session) holds back neither the renewals nor the
  // local deadline.
  struct Ended {
    std::atomic<int64_t>* began;
    ~Ended() { *began = 0; }
  } ended{&txn_began_ms_};
  // In the round trip that locks the run's row: a worker that holds its
  // liveness renews every claim of its own when its last proof of life is
  // a sixth of the lease old (first, before a row is read: what it claims
  // or starts holds a lease from now whatever its renewer's luck; not in
  // every transaction: a renewal writes each held row again, and most of
  // them are then written once more, ended); the rows it still holds by
  // those claims are read (a transaction mostly ends or starts them; one
  // it lost, or an agent's lease, is locked only if the transaction needs
  // it); the others' claims are read for Reclaim.
  const bool renews = !worker_id_.empty() && live() &&
                      MonoMs() - proof_mono_ms_.load() >= worker_lease_ms_ / 6;
  std::vector<int64_t> held;
  if (!worker_id_.empty()) {
    for (const auto& [id, h] : held_) held.push_back(id);
  }
  std::vector<PgStatement> also;
  if (renews && !held.empty()) also.push_back(ExtendStatement(&held));
  if (!held.empty()) {
    also.push_back(PgTaskRowsStatement(quoted_, run_, held, worker_id_));
  }
  also.push_back(ReclaimScan());
  std::vector<PgResult> got;
  Status s = Begin(run_, &run, &now, &txn_began_ms_, std::move(also), &got);
  if (s.ok()) s = RemakeSmallPlans(run);
  const int64_t began = txn_began_ms_.load();
  if (s.IsConflict()) writable_ = s;  // archived: it stays so
  bool committing = false;
  if (s.ok()) {
    PgWork w(conn_.get(), quoted_, &run, now);
    if (!held.empty()) {
      w.CacheRows(got[got.size() - 2]);
      // Whatever becomes of the transaction, a claim found lost stays lost.
      FindLost(w);
    }
    s = Reclaim(&w, &reclaimed_, &got.back());
    PgStoreTxn txn(this, &w, &reclaimed_, quoted_);
    if (s.ok()) s = fn(txn);
    if (s.ok()) s = w.error();
    committing = s.ok();
    if (committing) s = Commit(&w, give_up_ms, again);
    if (s.ok()) {
      std::lock_guard<std::mutex> g(claims_mu_);
      txn.Merge(&held_);
      // What it found lost stops the proof until taken (and is not claimed
      // again meanwhile: PgStoreTxn::ClaimBatch). A renewal counts only
      // when known to have committed: a transaction without events whose
      // COMMIT's outcome stayed unknown (Commit: nothing to read back; its
      // session is lost) may have been rolled back, renewal and all.
      if (renews && conn_ != nullptr && !conn_->lost()) NoteProof(began);
    }
  }
  if (s.ok()) return s;
  const bool lost = conn_ == nullptr || conn_->lost();
  // Commit decided for itself (a COMMIT whose outcome stayed unknown is
  // never run again); before it, a lost session kept nothing, nor did a
  // statement the server refused as retryable. An error of `fn`'s own is
  // its answer.
  if (!committing) {
    *again = lost || Retryable(conn_->last_error().kind);
  }
  if (!lost && conn_->in_transaction()) {
    // The session is fine: the transaction is dropped, nothing kept.
    conn_->Rollback().IgnoreError();
  }
  return s;
}

// One statement on the task's row, not the run's: a heartbeat does not
// wait behind the run's transactions (a frozen machine's session holds the
// row for up to kPgRunIdleInTransactionMs, and a cut link queues several),
// so an agent's lease outlives them. Not an event: the seq of the run's
// events needs its row. Renewed only under the conditions
// StoreTxn::ActAs checks (a lease lapsed but not yet put back is not
// renewed; nor is one of an archived run).
Status PgStore::RenewHeldLease(int64_t id, std::string_view token,
                               int64_t lease_ms, int64_t* expires_ms,
                               int64_t* from_mono_ms) {
  bool renewed = false;
  {
    std::lock_guard<std::mutex> guard(mu_);
    WIZQ_RETURN_IF_ERROR(writable_);
    WIZQ_RETURN_IF_ERROR(OnSession([&] {
      *from_mono_ms = MonoMs();  // the statement's clock is no earlier
      PgResult r;
      WIZQ_RETURN_IF_ERROR(conn_->Exec(
          Sql("WITH c AS (SELECT " + std::string(kPgNowMsSql) +
              " AS now) UPDATE {s}.tasks t SET lease_expires_ms = "
              "GREATEST(t.lease_expires_ms, c.now + $4), claim_until_ms = "
              "GREATEST(t.claim_until_ms, c.now + $4) FROM c WHERE t.run = "
              "$1 AND t.task_id = $2 AND t.state = 1 AND t.lease_token = $3 "
              "AND t.lease_expires_ms >= c.now AND (t.deadline_ms = 0 OR "
              "t.deadline_ms >= c.now) AND NOT EXISTS (SELECT 1 FROM "
              "{s}.runs r WHERE r.run = $1 AND r.archived_at IS NOT NULL) "
              "RETURNING t.lease_expires_ms"),
          {run_, id, std::string(token), lease_ms}, &r));
      renewed = r.rows() == 1;
      if (renewed) *expires_ms = r.GetInt(0, "lease_expires_ms");
      return Status::OK();
    }));
  }
  if (renewed) return Status::OK();
  Task t;
  Status s = GetTask(id, &t);
  if (s.IsNotFound()) {
    return Status::InvalidArgument("no task " + std::to_string(id) +
                                   " in this run");
  }
  WIZQ_RETURN_IF_ERROR(s);
  if (t.state != TaskState::kInProgress || t.lease_token != token) {
    return Status::Conflict(WhyNotHeld(t));
  }
  return Status::Conflict("lease lost: task " + std::to_string(id) +
                          ": its lease lapsed or its attempt timed out");
}

Status PgStore::Close() {
  std::lock_guard<std::mutex> guard(mu_);
  if (writable_.ok() && !worker_id_.empty()) {
    PgRun run;
    int64_t now = 0;
    Status s = Begin(run_, &run, &now);
    if (s.ok()) {
      PgWork w(conn_.get(), quoted_, &run, now);
      s = w.Stage(WorkerLeft{worker_id_});
      if (s.ok()) s = Commit(&w);
    }
    if (!s.ok() && conn_ != nullptr && !conn_->lost() &&
        conn_->in_transaction()) {
      conn_->Rollback().IgnoreError();  // the worker_left is not kept
    }
    if (!s.ok() && !s.IsConflict()) return s;  // archived: nothing to sign
  }
  writable_ = Status::InvalidArgument("the store was closed");
  {
    std::lock_guard<std::mutex> g(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (live_ == nullptr) return Status::OK();
  std::lock_guard<std::mutex> lg(live_mu_);
  Status s = live_->Exec(Sql("DELETE FROM {s}.workers WHERE worker_id = $1"),
                         {worker_id_});
  bool released = false;
  if (s.ok()) {
    s = live_->AdvisoryUnlock(kPgWorkerLockSpace, lock_key_, &released);
  }
  if (live_->lost()) s = Status::OK();  // the lock went with the session
  live_.reset();
  return s;
}

// A shared lock on the run (an archive takes it exclusively, and waits),
// then the run must not be archived already.
Status PgStore::WhileCurrent(const std::function<Status()>& fn) {
  {
    std::lock_guard<std::mutex> guard(mu_);
    WIZQ_RETURN_IF_ERROR(EnsureConn());
    WIZQ_RETURN_IF_ERROR(
        conn_->Exec("SELECT pg_advisory_lock_shared($1::int4, $2::int4)",
                    {kPgRunLockSpace, static_cast<int32_t>(run_)}));
    PgRun run;
    Status s = PgReadRun(conn_.get(), quoted_, run_, &run);
    if (s.ok() && run.archived) {
      s = Status::Conflict("run " + run.info.run_id + " of the store " +
                           DisplayLocation() +
                           " was archived or replaced since it was opened");
    }
    if (!s.ok()) {
      conn_
          ->Exec("SELECT pg_advisory_unlock_shared($1::int4, $2::int4)",
                 {kPgRunLockSpace, static_cast<int32_t>(run_)})
          .IgnoreError();  // the session may be gone, and the lock with it
      return s;
    }
  }
  const Status s = fn();
  std::lock_guard<std::mutex> guard(mu_);
  if (!conn_->lost()) {
    conn_
        ->Exec("SELECT pg_advisory_unlock_shared($1::int4, $2::int4)",
               {kPgRunLockSpace, static_cast<int32_t>(run_)})
        .IgnoreError();  // a lost session released it
  }
  return s;
}

}  // namespace wizq
