#include "queue/txn_impl.h"

#include "queue/queue_impl.h"

namespace wizq {

const QueueState& TxnImpl::state() const { return q_->state(); }
int64_t TxnImpl::now_ms() const { return q_->NowMs(); }

Status TxnImpl::Submit(const NewTask& task, int64_t* id, bool* deduplicated) {
  std::string key;
  if (task.origin == Origin::kFinally) {
    key = "finally:" + std::to_string(task.finally_for);
  } else {
    Status s = DedupKey(task.type, task.inputs, &key);
    if (!s.ok()) return s.Annotate("inputs of a " + task.type + " task");
  }
  const int64_t existing = state().FindByDedupKey(key);
  *deduplicated = existing != 0;
  if (existing != 0) {
    *id = existing;
    TaskDeduplicated e;
    e.type = task.type;
    e.dedup_key = key;
    e.existing_id = existing;
    e.parent_id = task.parent_id;
    return q_->Stage(e);
  }
  *id = state().next_task_id();
  TaskSubmitted e;
  e.id = *id;
  e.type = task.type;
  e.inputs = task.inputs;
  e.parent_id = task.parent_id;
  e.origin = OriginName(task.origin);
  e.dedup_key = key;
  e.max_attempts = task.max_attempts;
  e.has_finally = task.has_finally;
  e.finally_for = task.finally_for;
  return q_->Stage(e);
}

Status TxnImpl::ClaimNext(const std::function<bool(const Task&)>& accept,
                          int64_t* id) {
  *id = 0;
  const int64_t now = now_ms();
  for (int64_t pid : state().pending()) {
    const Task* t = state().Find(pid);
    if (t->retry_at_ms > now || (accept && !accept(*t))) continue;
    *id = pid;
    break;
  }
  if (*id == 0) return Status::OK();
  const Task* t = state().Find(*id);
  TaskClaimed e;
  e.id = *id;
  e.type = t->type;
  e.worker = q_->worker_id();
  e.attempt = t->attempts + 1;
  return q_->Stage(e);
}

Status TxnImpl::RequireHeld(int64_t id, const Task** task) const {
  const Task* t = state().Find(id);
  if (t == nullptr) {
    return Status::InvalidArgument("no task " + std::to_string(id));
  }
  if (t->state != TaskState::kInProgress || t->claimed_by != q_->worker_id()) {
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
  const Task* t = nullptr;
  WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  TaskCompleted e;
  e.id = id;
  e.worker = q_->worker_id();
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
  TaskFailed e;
  e.id = id;
  e.worker = q_->worker_id();
  e.reason = reason;
  e.message = message;
  e.attempt = t->attempts;
  e.will_retry = retryable && t->attempts < t->max_attempts;
  if (e.will_retry) e.retry_at = now_ms() + retry_delay_ms;
  if (will_retry) *will_retry = e.will_retry;
  return q_->Stage(e);
}

Status TxnImpl::Release(int64_t id, std::string_view reason) {
  const Task* t = nullptr;
  WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  TaskReset e;
  e.id = id;
  e.worker = q_->worker_id();
  e.reason = reason;
  e.message = "stopped before it finished; the attempt does not count";
  e.attempt = t->attempts;
  e.refund = true;
  return q_->Stage(e);
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
  e.tasks_adopted = s.run().adopted;
  return q_->Stage(e);
}

Status TxnImpl::NoteAdopted(int64_t id, int attempt, int64_t waited_ms) {
  const Task* t = nullptr;
  WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  TaskAdopted e;
  e.id = id;
  e.worker = q_->worker_id();
  e.attempt = attempt;
  e.waited_ms = waited_ms;
  return q_->Stage(e);
}

}  // namespace wizq
