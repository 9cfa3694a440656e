// PgStoreTxn: claims (SELECT ... FOR UPDATE SKIP LOCKED, every eligibility
// test in SQL) and leases.
#include <algorithm>

#include "queue/pg/pg_conn.h"
#include "queue/pg/pg_txn.h"
#include "util/random.h"

namespace wizq {

// Pending, ready (its retry time has come), of a step this worker takes
// (its own task, or a hook of a hook step; a Prompt step nobody here can
// ask only when answered), within the id bound, not declined, and not a
// hook whose owner's subtree is open again (QueueState::HookWaits), and
// not held for another host's adoption (PgStore::PutBack: claim_until_ms of
// a pending task is that reservation; 0 otherwise); and only while the
// worker's liveness lock $11 is granted (0: no such check).
const char kPgClaimable[] =
    " FROM {s}.tasks t WHERE ($11::bigint = 0 OR EXISTS (SELECT 1 FROM "
    "pg_catalog.pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND "
    "l.classid = 2003401335::oid AND l.objid = $11::oid AND l.objsubid = 2 "
    "AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname "
    "= current_database()))) AND t.run = $1 AND t.state = 0 AND t.retry_at_ms "
    "<= $2 AND t.task_id > $3 AND ((t.origin <> 3 AND t.step = "
    "ANY($4::text[]) AND (t.answer IS NOT NULL OR NOT t.step = "
    "ANY($5::text[]))) OR (t.origin = 3 AND t.step = ANY($6::text[]))) AND "
    "($7::bigint = 0 OR t.task_id < $7::bigint) AND NOT t.task_id = "
    "ANY($8::bigint[]) AND (t.claim_until_ms < $2 OR t.claim_host = $10) "
    "AND NOT (t.origin = 3 AND EXISTS (SELECT 1 FROM {s}.tasks o WHERE o.run = "
    "t.run AND o.task_id = t.finally_for AND o.open_children > 0)) ORDER BY "
    "t.task_id LIMIT $9 FOR UPDATE OF t SKIP LOCKED";

static_assert(kPgWorkerLockSpace == 2003401335,
              "kPgClaimable names the workers' lock space");

namespace {

std::vector<std::string> WithRoom(const std::set<std::string>& steps,
                                  const std::map<std::string, int>& room) {
  std::vector<std::string> out;
  for (const std::string& s : steps) {
    auto it = room.find(s);
    if (it == room.end() || it->second > 0) out.push_back(s);
  }
  return out;
}

}  // namespace

Status PgStoreTxn::Claim(const ClaimFilter& f, std::vector<Task>* claimed) {
  if (f.lease && f.lease_ms <= 0) {
    return Status::InvalidArgument("a lease must last at least 1 ms");
  }
  // A worker whose liveness session is lost claims nothing until the
  // renewer took it back (a restarted server, a dropped session), and
  // fails once it is lost for good (another worker saw it dead).
  if (!f.lease && !store_->worker_id().empty() && !store_->live()) {
    return store_->Liveness();
  }
  std::map<std::string, int> room = f.room;
  // What this transaction put back (a reclaim, a retry) may lower the
  // floor the claim starts from (written with the run's row at commit).
  w_->LowerFloors();
  int64_t after = w_->run().pending_floor - 1;  // none pending below
  bool more = true;
  const size_t before = claimed->size();
  while (more) {
    const int64_t left = f.max - static_cast<int64_t>(claimed->size() - before);
    if (left <= 0) break;
    WIZQ_RETURN_IF_ERROR(ClaimBatch(f, left, &room, &after, claimed, &more));
  }
  w_->RaisePendingFloor();
  return Status::OK();
}

Status PgStoreTxn::ClaimBatch(const ClaimFilter& f, int64_t limit,
                              std::map<std::string, int>* room, int64_t* after,
                              std::vector<Task>* claimed, bool* more) {
  *more = false;
  const std::vector<std::string> steps = WithRoom(f.steps, *room);
  const std::vector<std::string> hooks = WithRoom(f.hook_steps, *room);
  if (steps.empty() && hooks.empty()) return Status::OK();
  std::vector<int64_t> skip(f.skip_ids.begin(), f.skip_ids.end());
  // A lost claim whose old attempt the caller may still hold (queued in
  // its spawner, to start once a proof of life moves the deadline): a
  // claim of it now would be a second attempt of one task id in the
  // caller's hands, and both would run.
  store_->AddUntakenLost(&skip);
  // The server's word on it: a worker claims only while its liveness lock
  // is granted. A liveness session the server ended (a terminated backend,
  // a half-open connection) while the worker has not noticed yet would
  // otherwise claim tasks a worker of its host may put back at once, or
  // that it cannot renew: it claims nothing (its renewer finds out).
  const int64_t live_key = f.lease ? 0 : store_->lock_key();
  // In the round trip that writes what this transaction changed so far.
  std::vector<PgResult> got;
  WIZQ_RETURN_IF_ERROR(w_->Flush(
      {{w_->Sql(std::string("SELECT ") + kPgTaskColumns + kPgClaimable),
        {w_->run().run, now_ms(), *after, PgArray(steps),
         PgArray({f.answered_only.begin(), f.answered_only.end()}),
         PgArray(hooks), f.below_id, PgIntArray(skip), limit,
         store_->host_key(), live_key},
        /*planned=*/false,
        /*generic=*/true}},
      &got));
  const PgResult& r = got[0];
  *more = r.rows() == limit;
  for (int i = 0; i < r.rows(); i++) {
    PgTask row;
    PgTaskFromRow(r, i, &row);
    *after = row.t.id;
    auto it = room->find(row.t.type);
    if (it != room->end() && it->second <= 0) continue;  // filled meanwhile
    PgTask* t = w_->Cache(row);
    t->t.children = row.t.children;  // cached before without them
    WIZQ_RETURN_IF_ERROR(StageClaim(f, t));
    if (it != room->end()) it->second--;
    claimed->push_back(t->t);
  }
  return Status::OK();
}

// The task_claimed of this worker's next attempt; a leased claim takes its
// step's lease and timeout. Every claim's lease is on the store's clock.
Status PgStoreTxn::StageClaim(const ClaimFilter& f, PgTask* row) {
  const Task& t = row->t;
  TaskClaimed e;
  e.id = t.id;
  e.type = t.type;
  e.worker = Actor();
  e.attempt = t.attempts + 1;
  e.host = store_->host_key();
  const std::string token = RandomHex128();
  if (f.lease) {
    auto lease = f.step_lease_ms.find(t.type);
    e.lease = token;
    e.lease_expires_ms =
        now_ms() +
        (lease != f.step_lease_ms.end() ? lease->second : f.lease_ms);
    e.agent = f.agent;
    auto timeout = f.timeouts.find(t.type);
    if (timeout != f.timeouts.end()) {
      e.timeout_ms = std::max<int64_t>(0, timeout->second.ms);
      e.retry_on_timeout = timeout->second.retry;
    }
  }
  WIZQ_RETURN_IF_ERROR(w_->Stage(e));
  row->claim_until_ms =
      f.lease ? e.lease_expires_ms : now_ms() + store_->worker_lease_ms();
  claimed_[t.id] = {t.attempts, row->claim_token, f.lease};
  ended_.erase(t.id);
  return Status::OK();
}

// A lapsed lease is refused even if no transaction has put its task back
// yet (the reclaim at the start of this one normally has).
Status PgStoreTxn::CheckLease(int64_t id, std::string_view token,
                              PgTask** task) {
  PgTask* row = nullptr;
  WIZQ_RETURN_IF_ERROR(w_->Find(id, &row));
  if (row == nullptr) {
    return Status::InvalidArgument("no task " + std::to_string(id) +
                                   " in this run");
  }
  const Task& t = row->t;
  if (t.state != TaskState::kInProgress || t.lease_token.empty() ||
      t.lease_token != token) {
    return Status::Conflict(WhyNotHeld(t));
  }
  if (t.lease_expires_ms < now_ms()) {
    return Status::Conflict("lease lost: task " + std::to_string(id) +
                            " was put back: its lease lapsed " +
                            std::to_string(now_ms() - t.lease_expires_ms) +
                            " ms ago");
  }
  *task = row;
  return Status::OK();
}

Status PgStoreTxn::ActAs(int64_t id, std::string_view token) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(CheckLease(id, token, &t));
  acting_.insert(id);
  return Status::OK();
}

Status PgStoreTxn::RenewLease(int64_t id, std::string_view token,
                              int64_t lease_ms, int64_t* expires_ms) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(CheckLease(id, token, &t));
  LeaseRenewed e;
  e.id = id;
  e.lease_expires_ms = std::max(now_ms() + lease_ms, t->t.lease_expires_ms);
  if (expires_ms) *expires_ms = e.lease_expires_ms;
  return w_->Stage(e);
}

}  // namespace wizq
