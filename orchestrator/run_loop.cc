#include "orchestrator/run_loop.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "fs/env.h"
#include "orchestrator/run.h"
#include "tasks/response.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

constexpr size_t kMaxResponseBytes = 16 << 20;
constexpr int kIdlePollMinMs = 5;
constexpr int kIdlePollMaxMs = 100;

int64_t MonotonicMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Retry backoff: 100ms, 200ms, 400ms, ... capped at 5s.
int64_t BackoffMs(int attempt) {
  int64_t ms = 100;
  for (int i = 1; i < attempt && ms < 5000; i++) ms *= 2;
  return std::min<int64_t>(ms, 5000);
}

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

RunLoop::RunLoop(Config config, std::unique_ptr<Workflow> workflow,
                 RunObserver* observer)
    : config_(std::move(config)),
      workflow_(std::move(workflow)),
      observer_(observer) {}

int64_t RunLoop::ElapsedMs() const { return MonotonicMs() - start_ms_; }

std::string RunLoop::TaskDir(int64_t id) const {
  return queue_->wizard_dir() + "/tasks/" + std::to_string(id);
}

Progress RunLoop::MakeProgress() const {
  const QueueState& s = queue_->state();
  Progress p;
  p.pending = s.count(TaskState::kPending);
  p.running = s.count(TaskState::kInProgress);
  p.done = s.count(TaskState::kDone);
  p.failed = s.count(TaskState::kFailed);
  p.total = s.total();
  p.elapsed_ms = ElapsedMs();
  return p;
}

Status RunLoop::Open(bool* finished, int* exit_code) {
  const Step* entry = workflow_->FindStep(workflow_->entrypoint());
  QueueOptions qo;
  qo.env = config_.env;
  qo.install_dir = config_.install_dir;
  qo.run_id = config_.run_id;
  qo.workflow_json = workflow_->frozen_json();
  qo.entry_input = config_.input;
  qo.fresh = config_.fresh;
  qo.wizq_version = config_.wizq_version;
  NewTask root;
  root.type = entry->name;
  root.inputs = config_.input;
  root.origin = Origin::kInitial;
  root.max_attempts = entry->options.max_attempts();
  root.has_finally = entry->finally_hook.has_value();
  qo.initial_tasks.push_back(root);
  OpenReport report;
  WIZQ_RETURN_IF_ERROR(Queue::Open(qo, &queue_, &report));
  WIZQ_RETURN_IF_ERROR(UseFrozenWorkflow());
  observer_->OnOpened(config_.run_id, report, MakeProgress());
  *finished = report.action == OpenAction::kFinished;
  if (*finished) {
    *exit_code = queue_->state().run().status == RunStatus::kCompleted
                     ? kExitCompleted
                     : kExitTaskFailed;
  }
  return Status::OK();
}

// A resumed run keeps the workflow it was started with (SPEC §2).
Status RunLoop::UseFrozenWorkflow() {
  const std::string& frozen = queue_->state().run().workflow;
  if (frozen.empty() || frozen == workflow_->frozen_json()) return Status::OK();
  std::unique_ptr<Workflow> wf;
  Status s = Workflow::Parse(frozen, config_.workflow_path + " (frozen copy)", &wf);
  if (!s.ok()) {
    return Status::Corruption("the workflow frozen in " +
                              queue_->wizard_dir() +
                              "/queue.json no longer parses: " + s.message());
  }
  wf->set_base_dir(workflow_->base_dir());
  workflow_ = std::move(wf);
  return Status::OK();
}

Status RunLoop::Run(int* exit_code) {
  start_ms_ = MonotonicMs();
  bool finished = false;
  WIZQ_RETURN_IF_ERROR(Open(&finished, exit_code));
  if (finished) return Status::OK();
  jobs_ = config_.jobs;
  if (jobs_ <= 0) {
    // The workflow's top-level max_concurrency, else the number of CPUs.
    jobs_ = workflow_->default_options().max_concurrency;
    if (jobs_ == StepOptions::kUnlimited) {
      jobs_ = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
    }
  }
  std::vector<Outcome> outcomes;
  while (true) {
    if (StopRequested()) return Interrupt(exit_code);
    std::vector<int64_t> claimed;
    WIZQ_RETURN_IF_ERROR(Cycle(&outcomes, &claimed));
    outcomes.clear();
    for (int64_t id : claimed) StartTask(id, &outcomes);
    const RunStatus status = queue_->state().run().status;
    if (status != RunStatus::kRunning && running_.empty()) {
      observer_->OnRunFinished(status, MakeProgress());
      WIZQ_RETURN_IF_ERROR(queue_->Close());
      *exit_code = status == RunStatus::kCompleted ? kExitCompleted
                                                    : kExitTaskFailed;
      return Status::OK();
    }
    if (!outcomes.empty()) continue;
    if (running_.empty()) {
      WIZQ_RETURN_IF_ERROR(WaitIdle());
      continue;
    }
    idle_ms_ = 0;
    CommandRunner::Done done;
    WIZQ_RETURN_IF_ERROR(runner_.Wait(200, &done));
    for (auto& [token, result] : done) {
      outcomes.push_back(Judge(static_cast<int64_t>(token), result));
    }
  }
}

// Nothing of ours runs and nothing could be claimed: other workers hold
// the remaining tasks, or a retry is backing off. Poll with a growing pause.
Status RunLoop::WaitIdle() {
  const QueueState& s = queue_->state();
  if (s.in_progress().empty() && !s.pending().empty()) {
    bool only_pool = true;
    for (int64_t id : s.pending()) {
      const Step* step = nullptr;
      const Action* a = ActionFor(*s.Find(id), &step);
      if (a == nullptr || a->kind != Action::Kind::kPool) only_pool = false;
    }
    if (only_pool) {
      return Status::NotSupported(
          "the remaining tasks are Pool steps, which need an agent (wizq "
          "agent); this version of wizq runs Command steps only. The run "
          "is kept and resumes once agents are supported");
    }
  }
  idle_ms_ = std::clamp(idle_ms_ * 2, kIdlePollMinMs, kIdlePollMaxMs);
  usleep(static_cast<useconds_t>(idle_ms_) * 1000);
  return Status::OK();
}

Status RunLoop::Cycle(std::vector<Outcome>* outcomes,
                     std::vector<int64_t>* claimed) {
  Status s = queue_->Transact([&](Txn& txn) {
    claimed->clear();
    return CommitInTxn(txn, *outcomes, claimed);
  });
  if (!s.ok()) return s;
  const Progress p = MakeProgress();
  for (const Outcome& o : *outcomes) {
    const Task* t = queue_->state().Find(o.id);
    const bool retry = t->state == TaskState::kPending;
    observer_->OnTaskFinished(*t, o.success ? "" : o.reason, o.message, retry,
                              static_cast<int>(o.children.size()), p);
  }
  return Status::OK();
}

Status RunLoop::CommitInTxn(Txn& txn, const std::vector<Outcome>& outcomes,
                            std::vector<int64_t>* claimed) {
  int64_t reset = 0, lost = 0;
  WIZQ_RETURN_IF_ERROR(txn.ResetDeadWorkers(&reset, &lost));
  if (reset + lost > 0) {
    observer_->OnNote("put back " + std::to_string(reset) +
                      " task(s) of a dead worker; " + std::to_string(lost) +
                      " failed (worker_lost, no attempts left)");
  }
  for (const Outcome& o : outcomes) {
    running_.erase(o.id);
    Status s;
    if (o.success) {
      s = txn.Complete(o.id, o.children, nullptr);
    } else {
      const Task* t = txn.state().Find(o.id);
      s = txn.Fail(o.id, o.reason, o.message, o.retryable,
                   BackoffMs(t ? t->attempts : 1), nullptr);
    }
    if (s.IsConflict()) {
      observer_->OnNote(s.message() + "; its result is dropped");
      continue;
    }
    WIZQ_RETURN_IF_ERROR(s);
  }
  WIZQ_RETURN_IF_ERROR(SubmitDueHooks(txn));
  const QueueState& st = txn.state();
  if (st.run().status == RunStatus::kRunning && st.AllSettled()) {
    const RunStatus end = st.count(TaskState::kFailed) > 0
                              ? RunStatus::kFailed
                              : RunStatus::kCompleted;
    return txn.FinishRun(end, ElapsedMs());
  }
  if (st.run().status != RunStatus::kRunning) return Status::OK();
  return ClaimForFreeSlots(txn, claimed);
}

Status RunLoop::SubmitDueHooks(Txn& txn) {
  const std::vector<int64_t> due(txn.state().hooks_due().begin(),
                                 txn.state().hooks_due().end());
  for (int64_t owner_id : due) {
    const Task* owner = txn.state().Find(owner_id);
    const Step* step = workflow_->FindStep(owner->type);
    NewTask hook;
    hook.type = owner->type;
    hook.inputs = owner->inputs;
    hook.parent_id = owner->parent_id;
    hook.origin = Origin::kFinally;
    hook.finally_for = owner_id;
    hook.max_attempts = step ? step->options.max_attempts() : 1;
    int64_t id = 0;
    bool dup = false;
    WIZQ_RETURN_IF_ERROR(txn.Submit(hook, &id, &dup));
  }
  return Status::OK();
}

const Action* RunLoop::ActionFor(const Task& t, const Step** step) const {
  *step = workflow_->FindStep(t.type);
  if (*step == nullptr) return nullptr;
  if (t.origin == Origin::kFinally) {
    return (*step)->finally_hook ? &*(*step)->finally_hook : nullptr;
  }
  return &(*step)->action;
}

bool RunLoop::Claimable(const Task& t,
                        const std::map<std::string, int>& per_step) const {
  const Step* step = nullptr;
  const Action* action = ActionFor(t, &step);
  if (action == nullptr) return true;  // claimed, then failed with a reason
  if (action->kind != Action::Kind::kCommand) return false;  // agents' work
  auto it = per_step.find(t.type);
  const int now = it == per_step.end() ? 0 : it->second;
  return now < step->options.max_concurrency;
}

Status RunLoop::ClaimForFreeSlots(Txn& txn, std::vector<int64_t>* claimed) {
  std::map<std::string, int> per_step;
  for (const auto& [id, r] : running_) per_step[r.step]++;
  const int free = jobs_ - static_cast<int>(running_.size());
  for (int i = 0; i < free; i++) {
    int64_t id = 0;
    WIZQ_RETURN_IF_ERROR(txn.ClaimNext(
        [&](const Task& t) { return Claimable(t, per_step); }, &id));
    if (id == 0) break;
    const Task* t = txn.state().Find(id);
    per_step[t->type]++;
    running_[id] = Running{t->attempts, t->type};
    claimed->push_back(id);
  }
  return Status::OK();
}

void RunLoop::StartTask(int64_t id, std::vector<Outcome>* failed_to_start) {
  const Task& task = *queue_->state().Find(id);
  const Step* step = nullptr;
  const Action* action = ActionFor(task, &step);
  if (action == nullptr) {
    Outcome o;
    o.id = id;
    o.reason = std::string(kReasonInvalidResponse);
    o.message = "step '" + task.type + "' has no " +
                (task.origin == Origin::kFinally ? "finally hook" : "action") +
                " in the run's workflow";
    failed_to_start->push_back(o);
    return;
  }
  CommandSpec spec;
  spec.script = action->script;
  spec.cwd = workflow_->base_dir();
  JsonWriter w(&spec.stdin_data);
  w.BeginObject().Field("kind", task.type);
  w.Key("value").RawValue(task.inputs).EndObject();
  spec.stdin_data.push_back('\n');
  const std::string& run_id = queue_->state().run().run_id;
  spec.env = {{"WIZQ_RUN_ID", run_id},
              {"WIZQ_TASK_ID", std::to_string(id)},
              {"WIZQ_ATTEMPT", std::to_string(task.attempts)},
              {"WIZQ_INSTALL_DIR", config_.install_dir},
              {"WIZQ_IDEMPOTENCY_KEY", run_id + "-" + std::to_string(id)},
              {"WIZQ_STEP", task.type},
              {"WIZQ_ORIGIN", OriginName(task.origin)}};
  spec.output_dir = TaskDir(id);
  spec.attempt = task.attempts;
  spec.timeout_seconds = step->options.timeout_seconds;
  spec.max_stdout_bytes = kMaxResponseBytes;
  Status s = runner_.Start(spec, static_cast<uint64_t>(id));
  if (!s.ok()) {
    Outcome o;
    o.id = id;
    o.reason = std::string(kReasonExitCode);
    o.message = "could not start: " + s.message();
    o.retryable = true;
    failed_to_start->push_back(o);
    return;
  }
  observer_->OnTaskStarted(task, task.attempts, MakeProgress());
}

Outcome RunLoop::Judge(int64_t id, const CommandResult& result) const {
  const Task& task = *queue_->state().Find(id);
  const Step* step = workflow_->FindStep(task.type);
  Outcome o;
  o.id = id;
  o.retryable = true;
  const std::string stderr_path = TaskDir(id) + "/" +
                                  std::to_string(task.attempts) + ".stderr";
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
  const std::string tail = StderrTail(stderr_path);
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

Status RunLoop::Interrupt(int* exit_code) {
  observer_->OnNote("interrupted: stopping " + std::to_string(running_.size()) +
                    " running task(s); they go back to pending");
  runner_.TerminateAll(2.0);
  Status s = queue_->Transact([&](Txn& txn) {
    for (const auto& [id, r] : running_) {
      Status rs = txn.Release(id, "interrupted");
      if (!rs.ok() && !rs.IsConflict()) return rs;
    }
    return Status::OK();
  });
  running_.clear();
  if (s.ok()) s = queue_->Close();
  *exit_code = kExitInterrupted;
  return s;
}

}  // namespace wizq
