// RunLoop, part 3 of 3: dispatch. Starts claimed tasks through the
// CommandRunner (with their environment and idempotency key), collects the
// finished ones and judges their results into Outcomes for the next commit,
// and reaps what dead workers' tasks left running.
#include <algorithm>
#include <fstream>

#include "orchestrator/run_loop.h"
#include "tasks/response.h"
#include "util/crash_point.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

constexpr size_t kMaxResponseBytes = 16 << 20;

// The last non-empty line of a task's stderr, for failure messages.
std::string StderrTail(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 400);
  in.seekg(start);
  std::string tail(static_cast<size_t>(size - start), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) {
    tail.pop_back();
  }
  size_t nl = tail.rfind('\n');
  return nl == std::string::npos ? tail : tail.substr(nl + 1);
}

}  // namespace

// A dead worker's task that had no attempts left is failed, not run again,
// so nothing else would end what its attempt left running (SPEC §6.3).
void RunLoop::ReapLostOrphans(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    Status s = ReapOrphans(TaskDir(id), 1.0, 10.0);
    if (!s.ok()) observer_->OnNote(s.message());
  }
}

Status RunLoop::StartReady() {
  while (static_cast<int>(running_.size()) < jobs_ && !ready_.empty()) {
    WIZQ_RETURN_IF_ERROR(StartTask(ready_.front()));
    ready_.pop_front();
  }
  return Status::OK();
}

Status RunLoop::CollectResults() {
  CommandRunner::Done done;
  // While a commit is in flight, come back soon to take its claims.
  WIZQ_RETURN_IF_ERROR(runner_.Wait(inflight_.valid() ? 1 : 200, &done));
  for (auto& [token, result] : done) {
    const int64_t id = static_cast<int64_t>(token);
    auto it = running_.find(id);
    if (it == running_.end()) continue;
    const double ms = result.seconds * 1000;
    task_ms_ = task_ms_ == 0 ? ms : 0.8 * task_ms_ + 0.2 * ms;
    outcomes_.push_back(Judge(it->second, result));
    running_.erase(it);
  }
  return Status::OK();
}

Status RunLoop::StartTask(const Task& task) {
  const Step* step = nullptr;
  const Action* action = ActionFor(task, &step);
  Outcome o;
  o.id = task.id;
  if (action == nullptr) {
    o.reason = std::string(kReasonInvalidResponse);
    o.message = "step '" + task.type + "' has no " +
                (task.origin == Origin::kFinally ? "finally hook" : "action") +
                " in the run's workflow";
    outcomes_.push_back(o);
    return Status::OK();
  }
  CommandSpec spec;
  spec.script = action->script;
  spec.cwd = workflow_->base_dir();
  JsonWriter w(&spec.stdin_data);
  w.BeginObject().Field("kind", task.type);
  w.Key("value").RawValue(task.inputs).EndObject();
  spec.stdin_data.push_back('\n');
  const std::string& run_id = config_.run_id;
  // Stable across attempts and resumes of this run; a --fresh run of the
  // same run id gets new keys (its start time differs).
  const std::string key = run_id + "-" + std::to_string(run_started_ms_) + "-" +
                          std::to_string(task.id);
  spec.env = {{"WIZQ_RUN_ID", run_id},
              {"WIZQ_TASK_ID", std::to_string(task.id)},
              {"WIZQ_ATTEMPT", std::to_string(task.attempts)},
              {"WIZQ_INSTALL_DIR", config_.install_dir},
              {"WIZQ_IDEMPOTENCY_KEY", key},
              {"WIZQ_STEP", task.type},
              {"WIZQ_ORIGIN", OriginName(task.origin)}};
  spec.output_dir = TaskDir(task.id);
  spec.attempt = task.attempts;
  spec.timeout_seconds = step->options.timeout_seconds;
  spec.max_stdout_bytes = kMaxResponseBytes;
  Status s = runner_.Start(spec, static_cast<uint64_t>(task.id));
  if (!s.ok()) return s.Annotate("starting task " + std::to_string(task.id));
  running_[task.id] = task;
  CrashPoint("run.after_spawn");
  observer_->OnTaskStarted(task, task.attempts, CurrentProgress());
  return Status::OK();
}

Outcome RunLoop::Judge(const Task& task, const CommandResult& result) const {
  const Step* step = workflow_->FindStep(task.type);
  Outcome o;
  o.id = task.id;
  o.retryable = true;
  switch (result.outcome) {
    case CommandResult::Outcome::kExited:
      if (result.exit_code == 0) return JudgeResponse(task, result);
      o.reason = std::string(kReasonExitCode);
      o.message = result.error;
      break;
    case CommandResult::Outcome::kSignaled:
    case CommandResult::Outcome::kSpawnFailed:
      o.reason = std::string(kReasonExitCode);
      o.message = result.error;
      break;
    case CommandResult::Outcome::kTimedOut:
      o.reason = std::string(kReasonTimeout);
      o.message = result.error;
      o.retryable = step == nullptr || step->options.retry_on_timeout;
      break;
  }
  const std::string tail = StderrTail(
      TaskDir(task.id) + "/" + std::to_string(task.attempts) + ".stderr");
  if (!tail.empty()) o.message += "; stderr: " + tail;
  return o;
}

Outcome RunLoop::JudgeResponse(const Task& task,
                               const CommandResult& result) const {
  Outcome o;
  o.id = task.id;
  const Step* step = workflow_->FindStep(task.type);
  const bool hook = task.origin == Origin::kFinally;
  std::vector<NextTask> next;
  Status s;
  if (result.stdout_truncated) {
    s = Status::InvalidArgument("stdout is larger than " +
                                std::to_string(kMaxResponseBytes) + " bytes");
  } else if (hook) {
    s = ParseHookResponse(*workflow_, result.stdout_text, &next);
  } else {
    s = ParseResponse(*workflow_, *step, result.stdout_text, &next);
  }
  if (!s.ok()) {
    o.reason = std::string(kReasonInvalidResponse);
    o.message = s.message();
    o.retryable = step->options.retry_on_invalid_response;
    return o;
  }
  o.success = true;
  for (NextTask& n : next) {
    const Step* target = workflow_->FindStep(n.kind);
    NewTask child;
    child.type = n.kind;
    child.inputs = std::move(n.value_json);
    child.parent_id = hook ? task.parent_id : task.id;
    child.origin = Origin::kSpawned;
    child.max_attempts = target->options.max_attempts();
    child.has_finally = target->finally_hook.has_value();
    o.children.push_back(std::move(child));
  }
  return o;
}

}  // namespace wizq
