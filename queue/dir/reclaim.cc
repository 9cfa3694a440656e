// DirQueue: putting back the claims of lost holders (queue/claim_holder.h),
// and failing leased attempts past their timeout, at the start of every
// transaction and when a run is resumed or attached.
#include <cstdio>

#include "queue/dir/queue_impl.h"

namespace wizq {

bool DirQueue::HolderLost(const ClaimHolder& holder, int64_t now_ms) {
  switch (holder.kind) {
    case ClaimHolder::Kind::kWorker:
      return !workers_.IsAlive(holder.worker);
    case ClaimHolder::Kind::kLease:
      return holder.LeaseLapsed(now_ms);
  }
  return false;
}

bool DirQueue::OnThisHost(const std::string& claim_host) const {
  return claim_host.empty() || claim_host == host_key_;
}

bool DirQueue::SharesWorkspace(const std::string& claim_host) const {
  HostId h;
  if (claim_host.empty() || !HostId::Parse(claim_host, &h)) return true;
  return h.workspace_dev == options_.host.workspace_dev &&
         h.workspace_ino == options_.host.workspace_ino;
}

// A lost attempt that started counts (pending again if attempts remain,
// else failed); one that never started (claimed ahead) does not, and the
// task goes back. It started if the store says so (task_started), if it
// was leased (its payload was handed out), or if the attempt journal says
// so (QueueOptions::attempt_started) — asked only where the journal can be
// read, in the claim's workspace; elsewhere the store's fact alone decides.
Status DirQueue::PutBack(const Task& t, Reclaimed* out) {
  const auto& started = options_.attempt_started;
  const bool leased = !t.lease_token.empty();
  const std::string worker = t.claimed_by;
  const int attempt = t.attempts;
  const bool ran = leased || t.started ||
                   (SharesWorkspace(t.claim_host) && (!started || started(t)));
  // A worker's attempt that still runs or finished on its own is adopted by
  // the next claim (not charged) — only on its host, where its processes
  // can be seen; a lapsed lease's agent cannot be waited for.
  const bool adoptable = !leased && ran && OnThisHost(t.claim_host) &&
                         options_.attempt_adoptable &&
                         options_.attempt_adoptable(t);
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
    message = "worker " + worker + " died while the task was in progress" + of;
  } else {
    message = "worker " + worker +
              " died after claiming the task but before starting it; the "
              "attempt does not count";
  }
  // task_reset and task_failed share these fields.
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
    return Stage(e);
  }
  out->lost.push_back(t.id);
  TaskFailed e;
  fill(&e);
  e.will_retry = false;
  return Stage(e);
}

// A leased attempt past its time limit fails with reason timeout, at once
// (no backoff, as a lapsed lease is put back); retried if its step allows
// it (recorded at claim) and attempts remain, else failed for good.
Status DirQueue::TimeOut(const Task& t, int64_t now_ms, Reclaimed* out) {
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%gs", t.timeout_ms / 1000.0);
  TaskFailed e;
  e.id = t.id;
  e.worker = t.claimed_by;
  e.reason = kReasonTimeout;
  const std::string message =
      std::string("timed out after ") + limit + " (the step's timeout) while " +
      (t.agent.empty() ? std::string("its agent") : "agent " + t.agent) +
      " held it (attempt " + std::to_string(t.attempts) + " of " +
      std::to_string(t.max_attempts) + ")";
  e.message = message;
  e.attempt = t.attempts;
  e.will_retry = t.retry_on_timeout && t.attempts < t.max_attempts;
  if (e.will_retry) e.retry_at = now_ms;
  (e.will_retry ? out->reset : out->lost).push_back(t.id);
  out->timed_out.push_back(t.id);
  return Stage(e);
}

// Cheap when nothing is held by another holder: one pass over the
// in_progress set, no file touched. Otherwise each other worker's liveness
// is checked once (its lock, as ListLive does), afresh in every
// transaction, so a worker that died since the last one is seen at once.
Status DirQueue::ReclaimLostClaims(Reclaimed* out) {
  out->reset.clear();
  out->lost.clear();
  out->adopt.clear();
  out->timed_out.clear();
  const std::string& self = workers_.self();
  std::vector<int64_t> others;
  for (int64_t id : state_->in_progress()) {
    const Task* t = state_->Find(id);
    const bool leased = !t->lease_token.empty();
    if (!leased && !options_.reclaim_worker_claims) continue;
    if (t->claimed_by != self || leased) others.push_back(id);
  }
  if (others.empty()) return Status::OK();
  workers_.ForgetCache();
  const int64_t now = NowMs();
  for (int64_t id : others) {
    const Task* t = state_->Find(id);
    if (AttemptTimedOut(*t, now)) {
      WIZQ_RETURN_IF_ERROR(TimeOut(*t, now, out));
      continue;
    }
    if (!HolderLost(HolderOf(*t), now)) continue;
    WIZQ_RETURN_IF_ERROR(PutBack(*t, out));
  }
  return Status::OK();
}

}  // namespace wizq
