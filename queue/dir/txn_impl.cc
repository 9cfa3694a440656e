#include "queue/dir/txn_impl.h"

#include <algorithm>

#include "queue/dir/queue_impl.h"
#include "queue/txn_rules.h"
#include "util/random.h"

namespace wizq {

const QueueState& TxnImpl::state() const { return q_->state(); }
int64_t TxnImpl::now_ms() const { return q_->NowMs(); }

Status TxnImpl::Submit(const NewTask& task, int64_t* id, bool* deduplicated) {
  int hook_generation = 0;
  bool hook_stale = false;
  if (task.origin == Origin::kFinally) {
    const Task* owner = state().Find(task.finally_for);
    if (owner != nullptr && owner->finally_task != 0) {
      hook_generation = state().Find(owner->finally_task)->generation;
      hook_stale = owner->hook_stale;
    }
  }
  std::string key;
  int generation = 1;
  WIZQ_RETURN_IF_ERROR(
      SubmitKey(task, hook_generation, hook_stale, &key, &generation));
  const int64_t existing = state().FindByDedupKey(key);
  *deduplicated = existing != 0;
  *id = existing != 0 ? existing : state().next_task_id();
  return StageSubmit(task, key, generation, existing, *id, q_->Sink());
}

// Not before its retry time, nor a hook before its owner's subtree settled.
bool TxnImpl::Ready(const Task& t, int64_t now) const {
  return t.retry_at_ms <= now && !state().HookWaits(t);
}

int64_t TxnImpl::NextReady(const std::function<bool(const Task&)>& accept,
                           int64_t now) const {
  for (int64_t pid : state().pending()) {
    const Task* t = state().Find(pid);
    if (!Ready(*t, now) || (accept && !accept(*t))) continue;
    return pid;
  }
  return 0;
}

int64_t TxnImpl::NextReadyOfSteps(
    const std::function<bool(std::string_view type)>& step_open,
    const std::function<bool(const Task&)>& accept, int64_t now) const {
  int64_t best = 0;
  for (const auto& [type, ids] : state().pending_by_type()) {
    if (step_open && !step_open(type)) continue;
    for (int64_t pid : ids) {
      if (best != 0 && pid > best) break;  // cannot beat the best so far
      const Task* t = state().Find(pid);
      if (!Ready(*t, now) || (accept && !accept(*t))) continue;
      best = pid;
      break;
    }
  }
  return best;
}

TaskClaimed TxnImpl::ClaimOf(int64_t id) const {
  const Task* t = state().Find(id);
  TaskClaimed e;
  e.id = id;
  e.type = t->type;
  e.worker = Actor();
  e.attempt = t->attempts + 1;
  e.host = q_->host_key();
  return e;
}

Status TxnImpl::ClaimNextOfSteps(
    const std::function<bool(std::string_view type)>& step_open,
    const std::function<bool(const Task&)>& accept, int64_t* id) {
  *id = NextReadyOfSteps(step_open, accept, now_ms());
  if (*id == 0) return Status::OK();
  return q_->Stage(ClaimOf(*id));
}

// Who acts, for the events' `worker` field: this worker, or "agent" for a
// store opened to hold leases only (QueueOptions::leases_only).
std::string_view TxnImpl::Actor() const {
  const std::string& w = q_->worker_id();
  return w.empty() ? std::string_view("agent") : std::string_view(w);
}

Status TxnImpl::RequireHeld(int64_t id, const Task** task) const {
  const Task* t = state().Find(id);
  if (t == nullptr) {
    return Status::InvalidArgument("no task " + std::to_string(id));
  }
  const bool held =
      leased_.count(id) != 0
          ? !t->lease_token.empty()
          : t->lease_token.empty() && t->claimed_by == q_->worker_id();
  if (t->state != TaskState::kInProgress || !held) {
    return Status::Conflict("task " + std::to_string(id) +
                            " is no longer held by this worker (state " +
                            TaskStateName(t->state) + ", claimed by " +
                            t->claimed_by + ")");
  }
  *task = t;
  return Status::OK();
}

Status TxnImpl::Complete(int64_t id, const std::vector<NewTask>& children,
                         std::vector<int64_t>* child_ids) {
  return CompleteWith(id, children, CompletionInfo(), child_ids);
}

Status TxnImpl::CompleteWith(int64_t id, const std::vector<NewTask>& children,
                             const CompletionInfo& info,
                             std::vector<int64_t>* child_ids) {
  const Task* t = nullptr;
  if (info.reused_id != 0) {
    t = state().Find(id);
    if (t == nullptr || t->state != TaskState::kPending || t->attempts != 0) {
      return Status::Conflict(
          "task " + std::to_string(id) + " can no longer be reused (it is " +
          (t ? TaskStateName(t->state) : "unknown") + " or already ran)");
    }
  } else {
    WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  }
  TaskCompleted e;
  e.id = id;
  e.worker = Actor();
  e.def_hash = info.def_hash;
  e.reused_run_id = info.reused_run_id;
  e.reused_id = info.reused_id;
  for (const NewTask& child : children) {
    int64_t cid = 0;
    bool dup = false;
    WIZQ_RETURN_IF_ERROR(Submit(child, &cid, &dup));
    (dup ? e.deduplicated : e.spawned).push_back(cid);
    if (child_ids) child_ids->push_back(cid);
  }
  return q_->Stage(e);
}

Status TxnImpl::Fail(int64_t id, std::string_view reason,
                     std::string_view message, bool retryable,
                     int64_t retry_delay_ms, bool* will_retry) {
  const Task* t = nullptr;
  WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  Failure f;
  f.reason = std::string(reason);
  f.message = std::string(message);
  f.retryable = retryable;
  f.retry_delay_ms = retry_delay_ms;
  return StageFail(*t, Actor(), f, now_ms(), will_retry, q_->Sink());
}

Status TxnImpl::Release(int64_t id, std::string_view reason) {
  const Task* t = nullptr;
  WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  return StageRelease(*t, Actor(), reason, leased_.count(id) != 0, q_->Sink());
}

Status TxnImpl::FinishRun(RunStatus status, int64_t duration_ms) {
  const QueueState& s = state();
  RunFinished e;
  e.status = RunStatusName(status);
  e.resumed = s.run().resumes > 0;
  e.tasks_total = s.total();
  e.tasks_done = s.count(TaskState::kDone);
  e.tasks_failed = s.count(TaskState::kFailed);
  e.duration_ms = duration_ms;
  e.has_reuse_counts = true;
  e.tasks_reused = s.reused();
  e.tasks_imported = s.imported();
  e.tasks_live =
      e.tasks_done + e.tasks_failed - e.tasks_reused - e.tasks_imported;
  e.tasks_adopted = s.run().adopted;
  return q_->Stage(e);
}

Status TxnImpl::NoteAdopted(int64_t id, int attempt, int64_t waited_ms) {
  const Task* t = nullptr;
  WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  TaskAdopted e;
  e.id = id;
  e.worker = Actor();
  e.attempt = attempt;
  e.waited_ms = waited_ms;
  return q_->Stage(e);
}

Status TxnImpl::MarkStarted(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    const Task* t = nullptr;
    if (!RequireHeld(id, &t).ok() || t->started) continue;
    TaskStarted e;
    e.id = id;
    e.worker = Actor();
    e.attempt = t->attempts;
    WIZQ_RETURN_IF_ERROR(q_->Stage(e));
  }
  return Status::OK();
}

// --- leases ------------------------------------------------------------------

Status TxnImpl::ClaimLeased(const std::function<bool(const Task&)>& accept,
                            const LeaseTerms& terms, int64_t* id,
                            std::string* token) {
  *id = 0;
  if (terms.lease_ms <= 0) {
    return Status::InvalidArgument("a lease must last at least 1 ms");
  }
  const int64_t now = now_ms();
  *id = NextReady(accept, now);
  if (*id == 0) return Status::OK();
  *token = RandomHex128();
  TaskClaimed e = ClaimOf(*id);
  e.lease = *token;
  e.lease_expires_ms = now + terms.lease_ms;
  e.agent = terms.agent;
  e.timeout_ms = std::max<int64_t>(0, terms.timeout_ms);
  e.retry_on_timeout = terms.retry_on_timeout;
  return q_->Stage(e);
}

// A lapsed lease is refused even if no transaction has put its task back
// yet (the reclaim at the start of this one normally has).
Status TxnImpl::CheckLease(int64_t id, std::string_view token,
                           const Task** task) const {
  const Task* t = state().Find(id);
  if (t == nullptr) {
    return Status::InvalidArgument("no task " + std::to_string(id) +
                                   " in this run");
  }
  if (t->state != TaskState::kInProgress || t->lease_token.empty() ||
      t->lease_token != token) {
    return Status::Conflict(WhyNotHeld(*t));
  }
  if (t->lease_expires_ms < now_ms()) {
    return Status::Conflict("lease lost: task " + std::to_string(id) +
                            " was put back: its lease lapsed " +
                            std::to_string(now_ms() - t->lease_expires_ms) +
                            " ms ago");
  }
  *task = t;
  return Status::OK();
}

Status TxnImpl::RenewLease(int64_t id, std::string_view token, int64_t lease_ms,
                           int64_t* expires_ms) {
  const Task* t = nullptr;
  WIZQ_RETURN_IF_ERROR(CheckLease(id, token, &t));
  LeaseRenewed e;
  e.id = id;
  e.lease_expires_ms = std::max(now_ms() + lease_ms, t->lease_expires_ms);
  if (expires_ms) *expires_ms = e.lease_expires_ms;
  return q_->Stage(e);
}

Status TxnImpl::UseLease(int64_t id, std::string_view token) {
  const Task* t = nullptr;
  WIZQ_RETURN_IF_ERROR(CheckLease(id, token, &t));
  leased_.insert(id);
  return Status::OK();
}

}  // namespace wizq
