// RunLoop, part 3 of 3: dispatch. Starts claimed tasks through the Executor
// (with their idempotency key), collects the finished ones and judges their
// results into Outcomes for the next commit, and has the executor reap what
// dead workers' tasks left running.
#include "fs/env.h"
#include "orchestrator/run_loop.h"
#include "tasks/exec/attempt_files.h"
#include "tasks/exec/prompt.h"
#include "tasks/workflow/def_hash.h"
#include "tasks/workflow/response.h"
#include "tasks/workflow/run_rules.h"
#include "util/crash_point.h"

namespace wizq {
namespace {

constexpr size_t kMaxResponseBytes = kDefaultMaxResponseBytes;

}  // namespace

// A dead worker's task that had no attempts left is failed, not run again,
// so nothing else would end what its attempt left running (SPEC §6.3).
void RunLoop::ReapLostOrphans(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    Status s = executor_->ReapOrphans(id);
    if (!s.ok()) observer_->OnNote(s.message());
  }
}

// Starts claimed tasks while slots are free, in claim order, skipping those
// whose step is at its max_concurrency (they start when one of its tasks
// ends). Tasks of fast steps (FastSteps) that the executor can queue
// (Commands) are started up to QueueAhead() beyond the slots: each waits
// in the executor and starts the moment a running one ends
// (Executor::Queues).
Status RunLoop::StartReady() {
  std::map<std::string, int> per_step;
  int others = 0;  // running tasks of executors that do not queue
  for (const auto& [id, t] : running_) {
    per_step[t.type]++;
    const Step* step = nullptr;
    const Action* a = ActionFor(t, &step);
    if (a == nullptr || !executor_->Queues(*a)) others++;
  }
  executor_->SetQueueSlots(std::max(0, jobs_ - others));
  const int ahead = QueueAhead();
  for (auto it = ready_.begin();
       it != ready_.end() &&
       static_cast<int>(running_.size()) < jobs_ + ahead;) {
    const Step* step = nullptr;
    const Action* a = ActionFor(*it, &step);
    const bool queues = a != nullptr && executor_->Queues(*a);
    if (!StepHasRoom(*it, per_step)) {
      ++it;
      continue;
    }
    // A task that cannot wait in its executor, or is not short enough to
    // be queued, waits for a free slot, and nothing after it is queued
    // meanwhile (it would never get one).
    if ((!queues || !Fast(it->type)) &&
        static_cast<int>(running_.size()) >= jobs_) {
      break;
    }
    WIZQ_RETURN_IF_ERROR(StartTask(*it));  // on error it stays ready
    per_step[it->type]++;
    if (!queues) executor_->SetQueueSlots(std::max(0, jobs_ - ++others));
    it = ready_.erase(it);
  }
  return Status::OK();
}

void RunLoop::DropLostClaims(bool harvested) {
  std::vector<int64_t> ids;
  store_->TakeLostClaims(&ids);
  lost_.insert(ids.begin(), ids.end());
  if (lost_.empty()) return;
  auto note = [&](const Task& t) {
    observer_->OnNote("task " + std::to_string(t.id) + " (" + t.type +
                      "): its claim lapsed while this worker was stopped or "
                      "cut off, and another worker was given it; it does "
                      "not start here");
  };
  for (auto it = ready_.begin(); it != ready_.end();) {
    if (lost_.erase(it->id) == 0) {
      ++it;
      continue;
    }
    note(*it);
    it = ready_.erase(it);
  }
  bool cancel = false;
  for (auto it = lost_.begin(); it != lost_.end();) {
    auto run = running_.find(*it);
    if (run == running_.end()) {
      ++it;
      continue;
    }
    if (queued_.count(*it) != 0) {
      // Waiting in the executor: every queued attempt comes back as never
      // started, the lost ones to be dropped, the others to start again.
      note(run->second);
      cancelling_.insert(*it);
      cancel = true;
    }
    it = lost_.erase(it);
  }
  if (cancel) executor_->CancelQueued();
  if (harvested || !inflight_.valid()) lost_.clear();
}

Status RunLoop::CollectResults() {
  Executor::Done done;
  // While a commit is in flight, come back soon to take its claims.
  // While a commit is in flight, come back as soon as it lands (the
  // executor wakes on its eventfd) to take its claims; without that, soon.
  int wait_ms = inflight_.valid() && !wake_on_commit_ ? 1 : 200;
  if (inflight_.valid() && wake_on_commit_) {
    // Woken by the commit only when its claims are needed soon; else it is
    // taken at the next wake (within kLazyHarvestMs), and the results that
    // arrive meanwhile share the next commit.
    const bool want = static_cast<int>(ready_.size()) < jobs_;
    commits_.set_wake_wanted(want);
    if (!want) wait_ms = kLazyHarvestMs;
    if (want && commits_.landed()) wait_ms = 0;
  }
  WIZQ_RETURN_IF_ERROR(executor_->Wait(wait_ms, &done));
  std::vector<int64_t> begun;
  executor_->TakeBegun(&begun);
  for (int64_t id : begun) Began(id);
  for (auto& [id, result] : done) {
    auto it = running_.find(id);
    if (it == running_.end()) continue;
    const bool lost = cancelling_.erase(id) > 0;
    if (result.never_started) {  // still claimed: it starts again later
      queued_.erase(id);
      if (!lost) ready_.push_front(it->second);
      running_.erase(it);
      continue;
    }
    Began(id);  // if its start was not told yet
    using Result = AttemptResult::Outcome;
    if (!result.adopted && result.outcome != Result::kSpawnFailed) {
      NoteDuration(it->second.type, result.seconds * 1000);
    }
    outcomes_.push_back(Judge(it->second, result));
    submitted_[id] = static_cast<int>(outcomes_.back().children.size());
    CountFailure(it->second, outcomes_.back());  // --halt
    if (outcomes_.back().success) {
      outcomes_.back().def_hash = FinishedDefHash(it->second);
    }
    running_.erase(it);
  }
  return Status::OK();
}

Status RunLoop::StartTask(const Task& task) {
  const Step* step = nullptr;
  const Action* action = ActionFor(task, &step);
  if (action == nullptr) {
    Outcome o;
    o.id = task.id;
    o.reason = std::string(kReasonInvalidResponse);
    o.message = "step '" + task.type + "' has no " +
                (task.origin == Origin::kFinally ? "finally hook" : "action") +
                " in the run's workflow";
    outcomes_.push_back(o);
    return Status::OK();
  }
  Attempt a;
  a.task_id = task.id;
  a.number = task.attempts;
  a.step = task.type;
  a.origin = task.origin;
  a.value_json = task.inputs;
  a.action = action;
  a.base_dir = workflow_->base_dir();
  a.run_id = config_.run_id;
  a.install_dir = config_.install_dir;
  a.idempotency_key = IdempotencyKey(config_.run_id, run_started_ms_, task);
  a.timeout_seconds = step->options.timeout_seconds;
  a.max_response_bytes = kMaxResponseBytes;
  if (hasher_) start_hash_[task.id] = hasher_->Hash(task.type, nullptr);
  a.answer_json = task.answer;
  a.workflow = workflow_.get();
  a.adopt_expected = task.error_reason == kReasonWorkerLost;
  Status s = executor_->Start(a);
  if (!s.ok()) return s.Annotate("starting task " + std::to_string(task.id));
  // Handed over while every slot is busy: it waits in the executor.
  const bool waits = static_cast<int>(running_.size()) >= jobs_;
  running_[task.id] = task;
  const std::string waiting = executor_->AdoptionNote(task.id);
  if (!waiting.empty()) {
    observer_->OnNote("task " + std::to_string(task.id) + " (" + task.type +
                      "): " + waiting);
  }
  // An executor that queues tells when the attempt begins; others begin it
  // now.
  queued_.insert(task.id);
  if (!executor_->Queues(*action)) {
    Began(task.id);
  } else if (waits) {
    observer_->OnTaskQueued(task, task.attempts, CurrentProgress());
  }
  return Status::OK();
}

void RunLoop::Began(int64_t id) {
  auto it = running_.find(id);
  if (it == running_.end() || queued_.erase(id) == 0) return;
  NoteBegan(id, it->second.attempts);  // for MarkStarted
  CrashPoint("run.after_spawn");
  observer_->OnTaskStarted(it->second, it->second.attempts, CurrentProgress());
}

void RunLoop::NoteBegan(int64_t id, int attempt) {
  if (began_.empty()) began_since_ms_ = MonotonicMs();
  began_.emplace_back(id, attempt);
}

std::set<std::string> RunLoop::FastSteps() const {
  std::set<std::string> out;
  for (const auto& [step, ms] : step_ms_) {
    if (Fast(step)) out.insert(step);
  }
  return out;
}

bool RunLoop::Fast(const std::string& step) const {
  auto it = step_ms_.find(step);
  if (it == step_ms_.end() || it->second.size() < kQueueHistory) return false;
  double sum = 0;
  for (double ms : it->second) sum += ms;
  return sum < kQueueTaskMs * static_cast<double>(kQueueHistory);
}

void RunLoop::NoteDuration(const std::string& step, double ms) {
  std::deque<double>& last = step_ms_[step];
  last.push_back(ms);
  if (last.size() > kQueueHistory) last.pop_front();
  // The look-ahead is sized for the tasks it claims: the fast steps'.
  if (Fast(step)) task_ms_ = task_ms_ == 0 ? ms : 0.8 * task_ms_ + 0.2 * ms;
}

Outcome RunLoop::Judge(const Task& task, const AttemptResult& result) const {
  Outcome o = JudgeAttempt(task, result);
  if (result.adopted && !result.lost) {
    o.adopted_attempt = task.attempts;
    o.waited_ms = result.waited_ms;
  }
  // An exit status and a stderr file are a process's: a Command's, or a
  // Pool task's agent (a Prompt or a Function has none of its own).
  const Step* step = nullptr;
  const Action* action = ActionFor(task, &step);
  if (action != nullptr && (action->kind == Action::Kind::kCommand ||
                            action->kind == Action::Kind::kPool)) {
    using Result = AttemptResult::Outcome;
    if (!result.lost && (result.outcome == Result::kResponded ||
                         result.outcome == Result::kExited)) {
      o.end.exit_code = result.exit_code;
    }
    // An adopted attempt may be an older wizq's, in its layout.
    const std::string workspace = config_.workspace;
    o.end.stderr_path =
        (result.adopted
             ? AttemptFiles::Existing(config_.env ? config_.env : Env::Posix(),
                                      workspace, task.id, task.attempts)
             : AttemptFiles(workspace, task.id, task.attempts))
            .stderr_path();
  }
  o.end.duration_ms = static_cast<int64_t>(result.seconds * 1000 + 0.5);
  return o;
}

Outcome RunLoop::JudgeAttempt(const Task& task,
                              const AttemptResult& result) const {
  using Result = AttemptResult::Outcome;
  if (result.lost) {
    // An adopted attempt that died without an exit record: a lost attempt,
    // charged like a dead worker's (SPEC §6.3).
    Outcome o;
    o.id = task.id;
    o.reason = std::string(kReasonWorkerLost);
    o.message = result.error;
    o.retryable = true;
    return o;
  }
  if (result.outcome == Result::kResponded) return JudgeResponse(task, result);
  if (result.outcome == Result::kUnanswered) {
    Outcome o;
    o.id = task.id;
    o.release = true;
    return o;
  }
  const Step* step = workflow_->FindStep(task.type);
  Outcome o;
  o.id = task.id;
  o.retryable = true;
  o.reason = std::string(kReasonExitCode);
  o.message = result.error;
  if (result.outcome == Result::kTimedOut) {
    o.reason = std::string(kReasonTimeout);
    o.retryable = step == nullptr || step->options.retry_on_timeout;
  }
  if (!result.stderr_tail.empty())
    o.message += "; stderr: " + result.stderr_tail;
  return o;
}

Outcome RunLoop::JudgeResponse(const Task& task,
                               const AttemptResult& result) const {
  Outcome o;
  o.id = task.id;
  Status s;
  if (result.response_truncated) {
    s = Status::InvalidArgument("stdout is larger than " +
                                std::to_string(kMaxResponseBytes) + " bytes");
  } else if (!result.answer_json.empty()) {
    // A Prompt's answer becomes its response (SPEC §10).
    o.answer_json = result.answer_json;
    o.answer_source = result.answer_source;
    const Step* step = workflow_->FindStep(task.type);
    s = ChildrenOf(*workflow_, task,
                   PromptResponse(*step, result.answer_json, task.inputs),
                   &o.children);
  } else {
    s = ChildrenOf(*workflow_, task, result.response, &o.children);
  }
  if (!s.ok()) {
    const Step* step = workflow_->FindStep(task.type);
    o.reason = std::string(kReasonInvalidResponse);
    o.message = s.message();
    o.retryable = step->options.retry_on_invalid_response;
    return o;
  }
  o.success = true;
  return o;
}

}  // namespace wizq
