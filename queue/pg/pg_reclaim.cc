// PgStore: putting back the claims of lost holders at the start of every
// transaction (queue/store.h), by the directory store's rules (queue/
// reclaim.cc) with the lease as the authority across machines (SPEC §14):
//  - a claim whose lease lapsed (an agent's, or a worker's its worker did
//    not renew) goes back, wherever it was made;
//  - a worker's claim made on this host goes back as soon as its worker's
//    liveness lock is gone, judged with what this host can see of the
//    attempt (LocalAttempts);
//  - a leased attempt past its step's timeout fails with reason timeout.
#include <cstdio>

#include "queue/claim_holder.h"
#include "queue/pg/pg_conn.h"
#include "queue/pg/pg_store.h"

namespace wizq {

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

Status PgStore::Reclaim(PgWork* w, Reclaimed* out) {
  *out = Reclaimed();
  PgResult r;
  WIZQ_RETURN_IF_ERROR(conn_->Exec(
      Sql(std::string("SELECT ") + kPgTaskColumns +
          " FROM {s}.tasks t WHERE t.run = $1 AND t.state = 1 AND "
          "(t.lease_token IS NOT NULL OR t.claimed_by <> $2) ORDER BY "
          "t.task_id FOR UPDATE OF t"),
      {run_, worker_id_}, &r));
  if (r.rows() == 0) return Status::OK();
  const int64_t now = w->now_ms();
  std::vector<PgTask*> rows;
  std::vector<std::string> ask;  // workers whose liveness decides
  for (int i = 0; i < r.rows(); i++) {
    PgTask row;
    PgTaskFromRow(r, i, &row);
    rows.push_back(w->Cache(row));
    const PgTask& t = *rows.back();
    if (t.t.lease_token.empty() && t.claim_until_ms >= now &&
        options_.reclaim_worker_claims && OnThisHost(t.t.claim_host)) {
      ask.push_back(t.t.claimed_by);
    }
  }
  std::set<std::string> alive;
  if (!ask.empty()) {
    std::vector<WorkerInfo> live;
    WIZQ_RETURN_IF_ERROR(LiveWorkers(run_, &live));
    for (const WorkerInfo& x : live) alive.insert(x.id);
  }
  for (PgTask* t : rows) {
    if (!t->t.lease_token.empty()) {
      if (AttemptTimedOut(t->t, now)) {
        WIZQ_RETURN_IF_ERROR(TimeOut(w, t, out));
      } else if (HolderOf(t->t).LeaseLapsed(now)) {
        WIZQ_RETURN_IF_ERROR(PutBack(w, t, out));
      }
      continue;
    }
    const bool lapsed = t->claim_until_ms < now;
    const bool dead = options_.reclaim_worker_claims &&
                      OnThisHost(t->t.claim_host) &&
                      alive.count(t->t.claimed_by) == 0;
    if (lapsed || dead) WIZQ_RETURN_IF_ERROR(PutBack(w, t, out));
  }
  return Status::OK();
}

// As DirQueue::PutBack: a lost attempt that started counts (pending again
// if attempts remain, else failed); one that never started does not; one
// that still runs or finished on its own on this host is adopted.
Status PgStore::PutBack(PgWork* w, PgTask* row, Reclaimed* out) {
  const Task& t = row->t;
  const auto& started = options_.local.started;
  const auto& adoptable_fn = options_.local.adoptable;
  const bool leased = !t.lease_token.empty();
  const std::string worker = t.claimed_by;
  const int attempt = t.attempts;
  const bool ran = leased || t.started ||
                   (SharesWorkspace(t.claim_host) && (!started || started(t)));
  const bool adoptable = !leased && ran && OnThisHost(t.claim_host) &&
                         adoptable_fn && adoptable_fn(t);
  const bool again = !ran || adoptable || t.attempts < t.max_attempts;
  const std::string of = " (attempt " + std::to_string(attempt) + " of " +
                         std::to_string(t.max_attempts) + ")";
  std::string message;
  if (leased) {
    message =
        "the lease of " +
        (t.agent.empty() ? std::string("its agent") : "agent " + t.agent) +
        " lapsed without a heartbeat" + of;
  } else if (adoptable) {
    message = "worker " + worker +
              " died while the task was in progress; its attempt " +
              std::to_string(attempt) +
              " still runs or finished on its own and is adopted, not "
              "charged again";
  } else if (ran) {
    message = "worker " + worker +
              (OnThisHost(t.claim_host)
                   ? " died while the task was in progress"
                   : " on another host stopped renewing its claim while the "
                     "task was in progress") +
              of;
  } else {
    message = "worker " + worker +
              " died after claiming the task but before starting it; the "
              "attempt does not count";
  }
  auto fill = [&](auto* e) {
    e->id = t.id;
    e->worker = worker;
    e->reason = kReasonWorkerLost;
    e->message = message;
    e->attempt = attempt;
  };
  if (again) {
    out->reset.push_back(t.id);
    if (adoptable) out->adopt.push_back(t.id);
    TaskReset e;
    fill(&e);
    if (leased) e.reason = kReasonLeaseExpired;
    e.refund = !ran || adoptable;
    e.never_started = !ran;
    return w->Stage(e);
  }
  out->lost.push_back(t.id);
  TaskFailed e;
  fill(&e);
  e.will_retry = false;
  return w->Stage(e);
}

// As DirQueue::TimeOut: a leased attempt past its time limit fails with
// reason timeout at once; retried if its step allows and attempts remain.
Status PgStore::TimeOut(PgWork* w, PgTask* row, Reclaimed* out) {
  const Task& t = row->t;
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%gs", t.timeout_ms / 1000.0);
  TaskFailed e;
  e.id = t.id;
  const std::string worker = t.claimed_by;
  e.worker = worker;
  e.reason = kReasonTimeout;
  const std::string message =
      std::string("timed out after ") + limit + " (the step's timeout) while " +
      (t.agent.empty() ? std::string("its agent") : "agent " + t.agent) +
      " held it (attempt " + std::to_string(t.attempts) + " of " +
      std::to_string(t.max_attempts) + ")";
  e.message = message;
  e.attempt = t.attempts;
  e.will_retry = t.retry_on_timeout && t.attempts < t.max_attempts;
  if (e.will_retry) e.retry_at = w->now_ms();
  (e.will_retry ? out->reset : out->lost).push_back(t.id);
  out->timed_out.push_back(t.id);
  return w->Stage(e);
}

}  // namespace wizq
