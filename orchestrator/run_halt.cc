// RunLoop: --halt (stop after N failures), a worker that lost its liveness
// for good, and the list of failed tasks every run with failures ends
// with (docs/CLI.md).
#include "orchestrator/run_loop.h"
#include "tasks/exec/attempt_files.h"

namespace wizq {

// True when the run must halt now: --halt now once the failures are
// reached; --halt soon once, in addition, nothing of ours runs and every
// result is committed (until then no new task starts: jobs_ is 0).
bool RunLoop::HaltDue() {
  const HaltPolicy& h = config_.halt;
  if (h.when == HaltPolicy::When::kNever || failures_seen_ < h.failures) {
    return false;
  }
  if (h.when == HaltPolicy::When::kNow) return true;
  return Drained("halting (--halt soon,fail=" + std::to_string(h.failures) +
                 "): " + std::to_string(failures_seen_) + " task(s) failed");
}

bool RunLoop::LivenessLostDue() {
  const Status live = store_->Liveness();
  return !live.ok() && Drained(live.message());
}

bool RunLoop::Drained(const std::string& why) {
  if (!draining_) {
    draining_ = true;
    jobs_ = 0;  // StartReady starts nothing, commits claim nothing
    lookahead_ = 0;
    executor_->SetQueueSlots(0);
    executor_->CancelQueued();  // they come back to ready_, not started
    observer_->OnNote(why + "; no new task starts, waiting for " +
                      std::to_string(running_.size()) + " running");
  }
  return running_.empty() && outcomes_.empty() && !inflight_.valid();
}

// Gives back what this process holds (tasks claimed ahead, and with --halt
// now the running ones, uncounted) and leaves the run resumable; exit 1.
Status RunLoop::Halt(int* exit_code) {
  *exit_code = kExitTaskFailed;
  const bool now = config_.halt.when == HaltPolicy::When::kNow;
  observer_->OnNote(
      std::string("halted (--halt ") + (now ? "now" : "soon") +
      ",fail=" + std::to_string(config_.halt.failures) +
      "): " + std::to_string(failures_seen_) + " task(s) failed" +
      (now && !running_.empty()
           ? "; stopping " + std::to_string(running_.size()) +
                 " running task(s), they go back to pending"
           : "") +
      "; the rest stays pending, run the same command again to resume");
  Status s = StopAndRelease("interrupted");
  ReportFailures();
  return s.ok() ? store_->Close() : s;
}

// Counted when the result arrives, before it is committed, so that no
// task starts in the freed slot (--halt soon) meanwhile.
void RunLoop::CountFailure(const Task& t, const Outcome& o) {
  if (o.success || o.release) return;
  if (o.retryable && t.attempts < t.max_attempts) return;  // will retry
  failures_seen_++;
}

// Reads every failed task (no index: once, as the run ends).
void RunLoop::ReportFailures() {
  if (!store_) return;
  TaskFilter f;
  f.states = {TaskState::kFailed};
  std::vector<Task> failed;
  if (!store_->ListTasks(f, &failed).ok() || failed.empty()) return;
  observer_->OnFailures(failed, config_.workspace);
}

}  // namespace wizq
