// DirQueue: `wizq run --retry-failed` (SPEC §11). The failed tasks of the
// run being resumed go back to pending with a fresh attempt budget, one
// task_retried event each, in the batch that resumes the run; a finished
// run with failed tasks is resumed for it (a completed one is not). An
// import's failed tasks (a Barnum run's dropped ones) are put back the same
// way, in the batch that starts the run.
#include <algorithm>

#include "queue/dir/queue_impl.h"
#include "queue/events.h"
#include "util/crash_point.h"

namespace wizq {

bool DirQueue::WantsRetry() const {
  return options_.retry_failed && state_->count(TaskState::kFailed) > 0;
}

Status DirQueue::StageRetries(OpenReport* report) {
  std::vector<int64_t> failed;
  for (const Task& t : state_->tasks()) {
    if (t.state == TaskState::kFailed) failed.push_back(t.id);
  }
  for (int64_t id : failed) {
    const Task& t = *state_->Find(id);
    const int budget = std::max(
        1, options_.retry_budget ? options_.retry_budget(t) : t.max_attempts);
    const std::string error = t.error_reason;
    TaskRetried e;
    e.id = id;
    e.reason = "retry_failed";
    e.error = error;
    e.max_attempts = static_cast<int64_t>(t.attempts) + budget;
    WIZQ_RETURN_IF_ERROR(Stage(e));
  }
  if (!failed.empty()) CrashPoint("retry.before_commit");
  report->tasks_retried = static_cast<int64_t>(failed.size());
  report->tasks_pending = state_->count(TaskState::kPending);
  return Status::OK();
}

}  // namespace wizq
