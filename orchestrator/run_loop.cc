#include "orchestrator/run_loop.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "fs/env.h"
#include "orchestrator/run.h"
#include "tasks/response.h"
#include "util/crash_point.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

constexpr size_t kMaxResponseBytes = 16 << 20;
constexpr int kIdlePollMinMs = 5;
constexpr int kIdlePollMaxMs = 100;
constexpr int kMaxLookaheadPerJob = 4;

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

bool FutureReady(const std::future<CommitResult>& f) {
  return f.valid() &&
         f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

RunLoop::RunLoop(Config config, std::unique_ptr<Workflow> workflow,
                 RunObserver* observer)
    : config_(std::move(config)),
      workflow_(std::move(workflow)),
      observer_(observer) {}

RunLoop::~RunLoop() {
  if (inflight_.valid()) inflight_.wait();
}

int64_t RunLoop::ElapsedMs() const { return MonotonicMs() - start_ms_; }

std::string RunLoop::TaskDir(int64_t id) const {
  return wizard_dir_ + "/tasks/" + std::to_string(id);
}

// A claim whose attempt never got as far as writing its stdin file never
// ran: a crash then does not count it (see QueueOptions::attempt_started).
bool RunLoop::AttemptStarted(const Task& t) const {
  const std::string path =
      TaskDir(t.id) + "/" + std::to_string(t.attempts) + ".stdin";
  return access(path.c_str(), F_OK) == 0;
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
  qo.attempt_started = [this](const Task& t) { return AttemptStarted(t); };
  wizard_dir_ = config_.install_dir + "/.wizard";
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
  run_started_ms_ = queue_->state().run().started_ms;
  std::vector<int64_t> lost;
  for (const Task& t : queue_->state().tasks()) {
    if (t.state == TaskState::kFailed && t.error_reason == kReasonWorkerLost) {
      lost.push_back(t.id);
    }
  }
  ReapLostOrphans(lost);
  progress_ = CurrentProgress();
  observer_->OnOpened(config_.run_id, report, progress_);
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
  Status s =
      Workflow::Parse(frozen, config_.workflow_path + " (frozen copy)", &wf);
  if (!s.ok()) {
    return Status::Corruption("the workflow frozen in " + wizard_dir_ +
                              "/queue.json no longer parses: " + s.message());
  }
  wf->set_base_dir(workflow_->base_dir());
  workflow_ = std::move(wf);
  return Status::OK();
}

void RunLoop::ChooseJobs() {
  jobs_ = config_.jobs;
  if (jobs_ > 0) return;
  // The workflow's top-level max_concurrency, else the number of CPUs.
  jobs_ = workflow_->default_options().max_concurrency;
  if (jobs_ == StepOptions::kUnlimited) {
    jobs_ = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  }
}

// Counts as of the last commit, with this process's running tasks.
Progress RunLoop::CurrentProgress() const {
  Progress p = progress_;
  if (queue_ && !inflight_.valid()) {
    const QueueState& s = queue_->state();
    p.pending = s.count(TaskState::kPending);
    p.running = s.count(TaskState::kInProgress);
    p.done = s.count(TaskState::kDone);
    p.failed = s.count(TaskState::kFailed);
    p.total = s.total();
  }
  p.elapsed_ms = ElapsedMs();
  return p;
}

Status RunLoop::Run(int* exit_code) {
  start_ms_ = MonotonicMs();
  bool finished = false;
  WIZQ_RETURN_IF_ERROR(Open(&finished, exit_code));
  if (finished) return Status::OK();
  ChooseJobs();
  while (true) {
    if (StopRequested()) return Interrupt(exit_code);
    WIZQ_RETURN_IF_ERROR(Harvest(/*block=*/false));
    if (run_status_ != RunStatus::kRunning && running_.empty() &&
        ready_.empty() && outcomes_.empty() && !inflight_.valid()) {
      return Finish(exit_code);
    }
    Status started = StartReady();
    if (!started.ok()) {
      // Not the task's fault (no descriptors, no space, ...): stop the run
      // like any environment error, giving back what this process holds.
      observer_->OnNote("stopping: " + started.message());
      Status s = StopAndRelease("environment_error");
      return s.ok() ? started : s;
    }
    MaybeLaunchCommit();
    if (running_.empty()) {
      // Nothing of ours runs: wait for the commit, or poll for work that
      // other workers hold or that is backing off before a retry.
      if (inflight_.valid()) {
        WIZQ_RETURN_IF_ERROR(Harvest(/*block=*/true));
      } else {
        WIZQ_RETURN_IF_ERROR(CheckSomethingCanRun());
        usleep(static_cast<useconds_t>(kIdlePollMinMs) * 1000);
      }
      continue;
    }
    WIZQ_RETURN_IF_ERROR(CollectResults());
  }
}

// A dead worker's task that had no attempts left is failed, not run again,
// so nothing else would end what its attempt left running (SPEC §6.3).
void RunLoop::ReapLostOrphans(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    Status s = ReapOrphans(TaskDir(id), 1.0, 10.0);
    if (!s.ok()) observer_->OnNote(s.message());
  }
}

// Called when nothing of ours runs and no commit is in flight: fails when
// the only tasks left are Pool steps, which no Command worker can take.
Status RunLoop::CheckSomethingCanRun() const {
  const QueueState& s = queue_->state();
  if (!ready_.empty() || !s.in_progress().empty() || s.pending().empty()) {
    return Status::OK();
  }
  for (int64_t id : s.pending()) {
    const Step* step = nullptr;
    const Action* a = ActionFor(*s.Find(id), &step);
    if (a == nullptr || a->kind != Action::Kind::kPool) return Status::OK();
  }
  return Status::NotSupported(
      "the remaining " + std::to_string(s.pending().size()) +
      " pending task(s) are Pool steps, which need an agent (wizq agent); "
      "this version of wizq runs Command steps only. The run is kept as it "
      "is and can be resumed once agents are supported");
}

// Takes the result of the commit in flight, if it is done (or waits).
Status RunLoop::Harvest(bool block) {
  if (!inflight_.valid() || (!block && !FutureReady(inflight_))) {
    return Status::OK();
  }
  CommitResult r = inflight_.get();
  if (r.status.ok() && !r.claimed.empty()) CrashPoint("run.after_claim_commit");
  if (r.status.ok() && !r.finished.empty())
    CrashPoint("run.after_result_commit");
  const double took = static_cast<double>(MonotonicMs() - commit_started_ms_);
  commit_ms_ = commit_ms_ == 0 ? took : 0.8 * commit_ms_ + 0.2 * took;
  if (!r.status.ok()) {
    runner_.TerminateAll(2.0);
    return r.status;
  }
  for (const std::string& note : r.notes) observer_->OnNote(note);
  run_status_ = r.run_status;
  progress_ = r.progress;
  for (const Task& t : r.finished) {
    const bool done = t.state == TaskState::kDone;
    observer_->OnTaskFinished(t, done ? "" : t.error_reason, t.error_message,
                              t.state == TaskState::kPending,
                              done ? static_cast<int>(t.children.size()) : 0,
                              CurrentProgress());
  }
  for (Task& t : r.claimed) ready_.push_back(std::move(t));
  ReapLostOrphans(r.lost);
  const int asked_and_missed = r.claimed.empty() ? 1 : 0;
  if (asked_and_missed && running_.empty()) {
    poll_backoff_ms_ =
        std::clamp(poll_backoff_ms_ * 2, kIdlePollMinMs, kIdlePollMaxMs);
    next_poll_ms_ = MonotonicMs() + poll_backoff_ms_;
  } else {
    poll_backoff_ms_ = 0;
    next_poll_ms_ = 0;
  }
  return Status::OK();
}

Status RunLoop::StartReady() {
  while (static_cast<int>(running_.size()) < jobs_ && !ready_.empty()) {
    WIZQ_RETURN_IF_ERROR(StartTask(ready_.front()));
    ready_.pop_front();
  }
  return Status::OK();
}

void RunLoop::MaybeLaunchCommit() {
  if (inflight_.valid()) return;
  const int free = jobs_ - static_cast<int>(running_.size());
  int want = free + lookahead_ - static_cast<int>(ready_.size());
  if (run_status_ != RunStatus::kRunning) want = 0;
  const bool poll_due = MonotonicMs() >= next_poll_ms_;
  if (outcomes_.empty() && (want <= 0 || !poll_due)) return;
  std::map<std::string, int> per_step;
  for (const auto& [id, t] : running_) per_step[t.type]++;
  for (const Task& t : ready_) per_step[t.type]++;
  // Claim ahead as many tasks as the slots will finish during one commit,
  // so that a slot that frees up while the next fdatasync runs has work
  // waiting; long tasks get no look-ahead at all.
  // Commit latency has a long tail (p99 several times the mean), so short
  // tasks get at least one task per slot claimed ahead, and twice what the
  // mean predicts.
  if (task_ms_ > 0) {
    const double per_commit = jobs_ * commit_ms_ / task_ms_;
    lookahead_ = per_commit < 0.5
                     ? 0
                     : std::clamp(static_cast<int>(2 * per_commit + 0.5), jobs_,
                                  kMaxLookaheadPerJob * jobs_);
  }
  commit_started_ms_ = MonotonicMs();
  if (!outcomes_.empty()) CrashPoint("run.before_result_commit");
  std::vector<Outcome> batch;
  batch.swap(outcomes_);
  inflight_ = std::async(std::launch::async, [this, b = std::move(batch), want,
                                              per_step]() mutable {
    return Commit(std::move(b), std::max(0, want), std::move(per_step));
  });
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

CommitResult RunLoop::Commit(std::vector<Outcome> outcomes, int want,
                             std::map<std::string, int> per_step) {
  CommitResult r;
  r.status = queue_->Transact([&](Txn& txn) {
    r.claimed.clear();
    r.notes.clear();
    return CommitInTxn(txn, outcomes, want, per_step, &r);
  });
  if (!r.status.ok()) return r;
  const QueueState& s = queue_->state();
  for (const Outcome& o : outcomes) r.finished.push_back(*s.Find(o.id));
  r.run_status = s.run().status;
  r.progress.pending = s.count(TaskState::kPending);
  r.progress.running = s.count(TaskState::kInProgress);
  r.progress.done = s.count(TaskState::kDone);
  r.progress.failed = s.count(TaskState::kFailed);
  r.progress.total = s.total();
  return r;
}

Status RunLoop::CommitInTxn(Txn& txn, const std::vector<Outcome>& outcomes,
                            int want, std::map<std::string, int>& per_step,
                            CommitResult* r) {
  int64_t reset = 0, lost = 0;
  const std::vector<int64_t> held(txn.state().in_progress().begin(),
                                  txn.state().in_progress().end());
  WIZQ_RETURN_IF_ERROR(txn.ResetDeadWorkers(&reset, &lost));
  for (int64_t id : held) {
    if (txn.state().Find(id)->state == TaskState::kFailed)
      r->lost.push_back(id);
  }
  if (reset + lost > 0) {
    r->notes.push_back("put back " + std::to_string(reset) +
                       " task(s) of a dead worker; " + std::to_string(lost) +
                       " failed (worker_lost, no attempts left)");
  }
  for (const Outcome& o : outcomes) {
    Status s;
    if (o.success) {
      s = txn.Complete(o.id, o.children, nullptr);
    } else {
      const Task* t = txn.state().Find(o.id);
      s = txn.Fail(o.id, o.reason, o.message, o.retryable,
                   BackoffMs(t ? t->attempts : 1), nullptr);
    }
    if (s.IsConflict()) {
      r->notes.push_back(s.message() + "; its result is dropped");
      continue;
    }
    WIZQ_RETURN_IF_ERROR(s);
  }
  WIZQ_RETURN_IF_ERROR(SubmitDueHooks(txn));
  const QueueState& st = txn.state();
  if (st.run().status == RunStatus::kRunning && st.AllSettled()) {
    CrashPoint("run.before_finish");
    const RunStatus end = st.count(TaskState::kFailed) > 0
                              ? RunStatus::kFailed
                              : RunStatus::kCompleted;
    return txn.FinishRun(end, ElapsedMs());
  }
  if (st.run().status != RunStatus::kRunning) return Status::OK();
  for (int i = 0; i < want; i++) {
    int64_t id = 0;
    WIZQ_RETURN_IF_ERROR(txn.ClaimNext(
        [&](const Task& t) { return Claimable(t, per_step); }, &id));
    if (id == 0) break;
    const Task* t = txn.state().Find(id);
    per_step[t->type]++;
    r->claimed.push_back(*t);
  }
  return Status::OK();
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

Status RunLoop::Finish(int* exit_code) {
  observer_->OnRunFinished(run_status_, CurrentProgress());
  WIZQ_RETURN_IF_ERROR(queue_->Close());
  *exit_code =
      run_status_ == RunStatus::kCompleted ? kExitCompleted : kExitTaskFailed;
  return Status::OK();
}

// Ctrl+C / SIGTERM: stop our tasks, give them and the tasks claimed ahead
// back (their attempts do not count), leave the run resumable.
Status RunLoop::Interrupt(int* exit_code) {
  *exit_code = kExitInterrupted;
  observer_->OnNote("interrupted: stopping " + std::to_string(running_.size()) +
                    " running task(s); they go back to pending");
  // A task that signalled its own wizq is charged the attempt (SPEC §6.3:
  // a task that kills its worker every time still ends failed).
  uint64_t culprit = 0;
  if (runner_.FindByProcess(StopSender(), &culprit)) {
    Outcome o;
    o.id = static_cast<int64_t>(culprit);
    o.reason = std::string(kReasonWorkerLost);
    o.message = "the task sent a stop signal to its own wizq";
    o.retryable = true;
    outcomes_.push_back(o);
  }
  return StopAndRelease("interrupted");
}

// Ends every task this process runs and gives them, and the tasks claimed
// ahead, back to pending without counting their attempts. Results that
// arrived but are not committed yet are committed first.
Status RunLoop::StopAndRelease(const std::string& reason) {
  runner_.TerminateAll(2.0);
  Status s = Harvest(/*block=*/true);
  for (const Task& t : ready_) running_[t.id] = t;
  for (const Outcome& o : outcomes_) running_.erase(o.id);
  if (s.ok()) {
    s = queue_->Transact([&](Txn& txn) {
      for (const Outcome& o : outcomes_) {
        const Task* t = txn.state().Find(o.id);
        Status rs = o.success
                        ? txn.Complete(o.id, o.children, nullptr)
                        : txn.Fail(o.id, o.reason, o.message, o.retryable,
                                   BackoffMs(t ? t->attempts : 1), nullptr);
        if (!rs.ok() && !rs.IsConflict()) return rs;
      }
      for (const auto& [id, t] : running_) {
        Status rs = txn.Release(id, reason);
        if (!rs.ok() && !rs.IsConflict()) return rs;
      }
      return Status::OK();
    });
  }
  running_.clear();
  ready_.clear();
  outcomes_.clear();
  if (s.ok()) s = queue_->Close();
  return s;
}

}  // namespace wizq
