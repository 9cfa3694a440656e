#include "queue/txn_impl.h"

#include "queue/queue_impl.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

void WriteId(JsonWriter& w, std::string_view key, int64_t id) {
  w.Key(key);
  if (id == 0) {
    w.Null();
  } else {
    w.Int(id);
  }
}

}  // namespace

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
    return q_->Stage("task_deduplicated", [&](JsonWriter& w) {
      w.Field("type", task.type);
      w.Field("dedup_key", key);
      w.Key("existing_id").Int(existing);
      WriteId(w, "parent_id", task.parent_id);
    });
  }
  *id = state().next_task_id();
  return q_->Stage("task_submitted", [&](JsonWriter& w) {
    w.Key("id").Int(*id);
    w.Field("type", task.type);
    w.Key("inputs").RawValue(task.inputs);
    WriteId(w, "parent_id", task.parent_id);
    w.Field("origin", OriginName(task.origin));
    w.Field("dedup_key", key);
    w.Key("max_attempts").Int(task.max_attempts);
    w.Field("has_finally", task.has_finally);
    WriteId(w, "finally_for", task.finally_for);
  });
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
  const int attempt = t->attempts + 1;
  return q_->Stage("task_claimed", [&](JsonWriter& w) {
    w.Key("id").Int(*id);
    w.Field("type", t->type);
    w.Field("worker", q_->worker_id());
    w.Key("attempt").Int(attempt);
  });
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
  std::vector<int64_t> spawned, deduplicated;
  for (const NewTask& child : children) {
    int64_t cid = 0;
    bool dup = false;
    WIZQ_RETURN_IF_ERROR(Submit(child, &cid, &dup));
    (dup ? deduplicated : spawned).push_back(cid);
    if (child_ids) child_ids->push_back(cid);
  }
  return q_->Stage("task_completed", [&](JsonWriter& w) {
    w.Key("id").Int(id);
    w.Field("worker", q_->worker_id());
    w.Key("spawned").BeginArray();
    for (int64_t c : spawned) w.Int(c);
    w.EndArray();
    w.Key("deduplicated").BeginArray();
    for (int64_t c : deduplicated) w.Int(c);
    w.EndArray();
  });
}

Status TxnImpl::Fail(int64_t id, std::string_view reason,
                     std::string_view message, bool retryable,
                     int64_t retry_delay_ms, bool* will_retry) {
  const Task* t = nullptr;
  WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  const bool retry = retryable && t->attempts < t->max_attempts;
  if (will_retry) *will_retry = retry;
  const int attempt = t->attempts;
  return q_->Stage("task_failed", [&](JsonWriter& w) {
    w.Key("id").Int(id);
    w.Field("worker", q_->worker_id());
    w.Field("reason", reason);
    w.Field("message", message);
    w.Key("attempt").Int(attempt);
    w.Field("will_retry", retry);
    if (retry) w.Key("retry_at").Int(now_ms() + retry_delay_ms);
  });
}

Status TxnImpl::Release(int64_t id, std::string_view reason) {
  const Task* t = nullptr;
  WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  const int attempt = t->attempts;
  return q_->Stage("task_reset", [&](JsonWriter& w) {
    w.Key("id").Int(id);
    w.Field("worker", q_->worker_id());
    w.Field("reason", reason);
    w.Field("message",
            "stopped before it finished; the attempt does not count");
    w.Key("attempt").Int(attempt);
    w.Field("refund", true);
  });
}

Status TxnImpl::ResetDeadWorkers(int64_t* reset, int64_t* lost) {
  *reset = *lost = 0;
  q_->workers().ForgetCache();
  const std::vector<int64_t> held(state().in_progress().begin(),
                                  state().in_progress().end());
  const auto& started = q_->options().attempt_started;
  for (int64_t id : held) {
    const Task* t = state().Find(id);
    if (q_->workers().IsAlive(t->claimed_by)) continue;
    const std::string worker = t->claimed_by;
    const int attempt = t->attempts;
    const bool ran = !started || started(*t);
    const bool again = !ran || t->attempts < t->max_attempts;
    std::string message =
        ran ? "worker " + worker +
                  " died while the task was in progress (attempt " +
                  std::to_string(attempt) + " of " +
                  std::to_string(t->max_attempts) + ")"
            : "worker " + worker +
                  " died after claiming the task but before starting it; the "
                  "attempt does not count";
    (again ? *reset : *lost) += 1;
    WIZQ_RETURN_IF_ERROR(
        q_->Stage(again ? "task_reset" : "task_failed", [&](JsonWriter& w) {
          w.Key("id").Int(id);
          w.Field("worker", worker);
          w.Field("reason", "worker_lost");
          w.Field("message", message);
          w.Key("attempt").Int(attempt);
          if (!again) w.Field("will_retry", false);
          if (!ran) w.Field("refund", true);
        }));
  }
  return Status::OK();
}

Status TxnImpl::FinishRun(RunStatus status, int64_t duration_ms) {
  const QueueState& s = state();
  return q_->Stage("run_finished", [&](JsonWriter& w) {
    w.Field("status", RunStatusName(status));
    w.Field("resumed", s.run().resumes > 0);
    w.Key("tasks_total").Int(s.total());
    w.Key("tasks_done").Int(s.count(TaskState::kDone));
    w.Key("tasks_failed").Int(s.count(TaskState::kFailed));
    w.Key("duration_ms").Int(duration_ms);
  });
}

}  // namespace wizq
