// DirQueue: putting back the claims of lost holders (queue/claim_holder.h),
// and failing leased attempts past their timeout, at the start of every
// transaction and when a run is resumed or attached.
#include "queue/dir/queue_impl.h"
#include "queue/txn_rules.h"

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

// The shared rules (queue/txn_rules.h), with what this host can tell
// of the attempt (QueueOptions::attempt_started, attempt_adoptable).
Status DirQueue::PutBack(const Task& t, Reclaimed* out) {
  LocalAttempts local;
  local.started = options_.attempt_started;
  local.adoptable = options_.attempt_adoptable;
  LostClaimPlace place;
  place.on_this_host = OnThisHost(t.claim_host);
  place.shares_workspace = SharesWorkspace(t.claim_host);
  return StagePutBack(t, place, local, out, Sink());
}

Status DirQueue::TimeOut(const Task& t, int64_t now_ms, Reclaimed* out) {
  return StageTimeOut(t, now_ms, out, Sink());
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
