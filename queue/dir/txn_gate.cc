// TxnImpl: the human gate's transitions (SPEC §10): recording an answer and
// pausing the run.
#include "queue/dir/queue_impl.h"
#include "queue/dir/txn_impl.h"

namespace wizq {

Status TxnImpl::Answer(int64_t id, std::string_view answer_json,
                       std::string_view source) {
  const Task* t = state().Find(id);
  if (t == nullptr) {
    return Status::InvalidArgument("no task " + std::to_string(id));
  }
  const bool held =
      t->state == TaskState::kInProgress && t->claimed_by == q_->worker_id();
  if (t->state != TaskState::kPending && !held) {
    return Status::Conflict("task " + std::to_string(id) +
                            " does not wait for an answer (state " +
                            TaskStateName(t->state) + ")");
  }
  if (!t->answer.empty()) {
    return Status::Conflict("task " + std::to_string(id) +
                            " was already answered " + t->answer + " (" +
                            t->answer_source + ")");
  }
  TaskAnswered e;
  e.id = id;
  e.answer = answer_json;
  e.source = source;
  e.worker = q_->worker_id();
  return q_->Stage(e);
}

Status TxnImpl::Pause(std::string_view waiting_json) {
  RunPaused e;
  e.waiting = waiting_json;
  return q_->Stage(e);
}

}  // namespace wizq
