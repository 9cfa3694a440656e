// PgStore: putting back the claims of lost holders at the start of every
// transaction (queue/store.h), by the directory store's rules (queue/
// reclaim.cc) with the lease as the authority across machines (SPEC §14):
//  - a claim whose lease lapsed (an agent's, or a worker's its worker did
//    not renew) goes back, wherever it was made;
//  - a worker's claim made on this host goes back as soon as its worker's
//    liveness lock is gone and its process too (a worker whose session
//    was lost but that still runs may still start what it claimed: its
//    claims wait for their lease like another host's), judged with what
//    this host can see of the attempt (LocalAttempts);
//  - a leased attempt past its step's timeout fails with reason timeout.
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "queue/claim_holder.h"
#include "queue/pg/pg_conn.h"
#include "queue/pg/pg_store.h"
#include "queue/txn_rules.h"

namespace wizq {
namespace {

// Whether the process of worker `id` ("w<pid>-<hex>", of this host, so of
// this pid namespace) still runs. A pid used again by another process
// reads as running: the claim then waits for its lease, never less.
// A worker of this very process (the embedding API runs several stores in
// one; so do the store tests) is judged by its lock alone.
bool WorkerProcessRuns(const std::string& id) {
  if (id.size() < 2 || id[0] != 'w') return true;
  char* end = nullptr;
  const long pid = strtol(id.c_str() + 1, &end, 10);
  if (pid <= 0 || end == nullptr || *end != '-') return true;
  if (pid == getpid()) return false;
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

}  // namespace

bool PgStore::OnThisHost(const std::string& claim_host) const {
  return claim_host.empty() || claim_host == host_key_;
}

bool PgStore::SharesWorkspace(const std::string& claim_host) const {
  HostId h;
  if (claim_host.empty() || !HostId::Parse(claim_host, &h)) return true;
  HostId mine;
  if (!HostId::Parse(host_key_, &mine)) return false;
  return h.workspace_dev == mine.workspace_dev &&
         h.workspace_ino == mine.workspace_ino;
}

// Whether `t` (another holder's claim, in progress) is to be put back or
// timed out at `now`; `alive` the live workers, asked for only when a
// claim of this host is still within its lease (`ask` says so).
bool PgStore::Reclaimable(const PgTask& t, int64_t now,
                          const std::set<std::string>* alive, bool* ask) const {
  if (!t.t.lease_token.empty()) {
    return AttemptTimedOut(t.t, now) || HolderOf(t.t).LeaseLapsed(now);
  }
  if (t.claim_until_ms < now) return true;
  if (!options_.reclaim_worker_claims) return false;
#ifdef WIZQ_MUTANT_NO_GUARDED_RESCUE
  // Mutant (tests/machines/torture, make torture-mutants): unguarded rescue.
  const bool here = true;
#else
  const bool here = OnThisHost(t.t.claim_host);
#endif
  if (!here) return false;
  if (alive == nullptr) {
    *ask = true;
    return false;
  }
  if (alive->count(t.t.claimed_by) != 0) return false;
  if (!OnThisHost(t.t.claim_host)) return true;  // only the mutant's
  if (WorkerProcessRuns(t.t.claimed_by)) return false;
  // Within its lease, a claim of this host is put back early only to be
  // adopted (SPEC §14), or when its attempt does not run (never ran, or
  // died). One that may still run here and that this worker cannot adopt
  // (a Pool step, and no --agent) waits for its lease as another host's
  // does: put back now, another host would run it beside the orphan, which
  // its spawner ends only at the dead worker's local deadline.
  const PutBackFate fate = FateOfPutBack(
      t.t, {OnThisHost(t.t.claim_host), SharesWorkspace(t.t.claim_host)},
      options_.local);
  const LocalAttempts& local = options_.local;
  return !fate.ran || fate.adoptable || !local.may_run || !local.may_run(t.t);
}

// Two steps: the tasks other holders have in progress are read without a
// lock (none is below held_floor; the first of them, or of this worker's
// own claims, is the new floor, so that the dead index entries an old
// snapshot keeps below it are not walked over again); only those to be
// put back are then locked, read again and judged again. A transaction
// never waits on, nor holds, the claims it leaves alone: a holder's
// renewal (which does not lock the run's row) is not held up by a
// transaction frozen in mid-flight.
namespace {

const char kOthersHeld[] =
    " FROM {s}.tasks t WHERE t.run = $1 AND t.state = 1 AND (t.lease_token "
    "IS NOT NULL OR t.claimed_by <> $2) AND ";

}  // namespace

// The first step's read, from the run's held_floor (read from its row: the
// statement may go in the round trip that locks it).
PgStatement PgStore::ReclaimScan() const {
  return {Sql(std::string("SELECT ") + kPgTaskColumns + kOthersHeld +
              "t.task_id >= (SELECT held_floor FROM {s}.runs WHERE run = $1) "
              "ORDER BY t.task_id"),
          {run_, worker_id_}};
}

Status PgStore::Reclaim(PgWork* w, Reclaimed* out, const PgResult* scanned) {
  *out = Reclaimed();
  PgResult r;
  if (scanned == nullptr) {
    const PgStatement scan = ReclaimScan();
    WIZQ_RETURN_IF_ERROR(conn_->Exec(scan.sql, scan.params, &r));
    scanned = &r;
  }
  int64_t floor = w->run().next_task;
  if (scanned->rows() > 0) floor = scanned->GetInt(0, "task_id");
  if (!held_.empty()) floor = std::min(floor, held_.begin()->first);
  w->SetHeldFloor(floor);
  const int64_t now = w->now_ms();
  std::vector<PgTask> rows(static_cast<size_t>(scanned->rows()));
  bool ask = false;
  for (int i = 0; i < scanned->rows(); i++) {
    PgTaskFromRow(*scanned, i, &rows[i]);
  }
  for (const PgTask& t : rows) Reclaimable(t, now, nullptr, &ask);
  std::set<std::string> alive;
  if (ask) {
    std::vector<WorkerInfo> live;
    WIZQ_RETURN_IF_ERROR(LiveWorkers(run_, &live));
    for (const WorkerInfo& x : live) alive.insert(x.id);
  }
  std::vector<int64_t> ids;
  for (const PgTask& t : rows) {
    if (Reclaimable(t, now, &alive, &ask)) ids.push_back(t.t.id);
  }
  if (ids.empty()) return Status::OK();
  WIZQ_RETURN_IF_ERROR(conn_->Exec(
      Sql(std::string("SELECT ") + kPgTaskColumns + kOthersHeld +
          "t.task_id = ANY($3::bigint[]) ORDER BY t.task_id FOR UPDATE OF t"),
      {run_, worker_id_, PgIntArray(ids)}, &r));
  for (int i = 0; i < r.rows(); i++) {  // as they are now, locked
    PgTask row;
    PgTaskFromRow(r, i, &row);
    if (!Reclaimable(row, now, &alive, &ask)) continue;  // renewed meanwhile
    PgTask* t = w->Cache(row);
    if (!t->t.lease_token.empty() && AttemptTimedOut(t->t, now)) {
      WIZQ_RETURN_IF_ERROR(TimeOut(w, t, out));
    } else {
      WIZQ_RETURN_IF_ERROR(PutBack(w, t, out));
    }
  }
  return Status::OK();
}

// The shared rules (queue/txn_rules.h), with what this host can tell
// of the attempt (StoreOptions::local).
//
// An attempt put back to be adopted (it still runs, or finished, here) is
// held for this host for a lease: a worker of another host that claimed
// it would run it again beside the orphan. By the time the reservation
// lapses the orphan is gone: its spawner ended it at its dead worker's
// local deadline, which came before the put-back's time plus a lease.
Status PgStore::PutBack(PgWork* w, PgTask* row, Reclaimed* out) {
  LostClaimPlace place;
  place.on_this_host = OnThisHost(row->t.claim_host);
  place.shares_workspace = SharesWorkspace(row->t.claim_host);
  const size_t adopting = out->adopt.size();
  WIZQ_RETURN_IF_ERROR(
      StagePutBack(row->t, place, options_.local, out, w->Sink()));
  if (out->adopt.size() > adopting) {
    row->t.claim_host = host_key_;
    row->claim_until_ms = w->now_ms() + worker_lease_ms_;
    row->dirty = true;
  }
  return Status::OK();
}

Status PgStore::TimeOut(PgWork* w, PgTask* row, Reclaimed* out) {
  return StageTimeOut(row->t, w->now_ms(), out, w->Sink());
}

}  // namespace wizq
