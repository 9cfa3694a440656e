// RunLoop, part 1 of 3: opening the run, the loop itself and how it ends
// (finished or interrupted), with the accessors the other parts share.
// Committing is in run_commit.cc, starting and judging tasks in
// run_dispatch.cc.
#include "orchestrator/run_loop.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "fs/env.h"
#include "orchestrator/reuse.h"
#include "orchestrator/run.h"
#include "orchestrator/run_admit.h"
#include "tasks/exec/attempt_files.h"
#include "tasks/workflow/def_hash.h"
#include "tasks/workflow/response.h"

namespace wizq {

int64_t RunLoop::MonotonicMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

RunLoop::RunLoop(Config config, std::unique_ptr<Workflow> workflow,
                 RunObserver* observer)
    : config_(std::move(config)),
      workflow_(std::move(workflow)),
      observer_(observer),
      executor_(config_.executor) {}

RunLoop::~RunLoop() {
  if (inflight_.valid()) inflight_.wait();
  // What still runs (an error return) ends before the store lets go.
  if (executor_ != nullptr) executor_->TerminateAll(0);
}

int64_t RunLoop::ElapsedMs() const { return MonotonicMs() - start_ms_; }

// How this worker opens its run (Store::Open).
StoreOptions RunLoop::OpenOptions() {
  StoreOptions so;
  so.env = config_.env;
  so.location = config_.location;
  so.schema = config_.schema;
  so.worker_lease_ms = config_.worker_lease_ms;
  so.install_dir = config_.install_dir;
  so.run_id = config_.run_id;
  so.workflow_json = workflow_->frozen_json();
  so.entry_input = config_.input;
  so.mode = config_.fresh ? OpenMode::kFresh : OpenMode::kRun;
  so.wizq_version = config_.wizq_version;
  // A claim whose attempt never started (claimed ahead) does not count when
  // its worker died.
  so.local.started = [this](const Task& t) {
    return executor_->AttemptStarted(t.id, t.attempts);
  };
  so.import = config_.import;
  if (so.import == nullptr) {
    so.initial_tasks.push_back(RootTask(*workflow_, config_.input));
  }
  so.retry_failed = config_.retry_failed;
  so.no_reuse = config_.no_reuse;
  so.from = config_.from;
  so.retry_budget = [this](const Task& t) {
    const Step* step = workflow_->FindStep(t.type);
    return step ? step->options.max_attempts() : t.max_attempts;
  };
  // A dead worker's attempt that still runs or finished on its own is
  // adopted, not charged and run again (docs/PROTOCOL.md).
  // Only a process tree can be adopted: a Command's, or the agent's of a
  // Pool task that `run --agent` ran (a leased Pool task's agent answers
  // through its lease; a Prompt is asked again).
  so.local.adoptable = [this](const Task& t) {
    const Step* step = nullptr;
    const Action* a = ActionFor(t, &step);
    if (a == nullptr) return false;
    const bool tree = a->kind == Action::Kind::kCommand ||
                      (a->kind == Action::Kind::kPool && executor_->CanRun(*a));
    return tree && executor_->AttemptAdoptable(t.id, t.attempts);
  };
  // Whatever kind of step: its tree runs, or finished on its own (it may
  // then be a task this worker cannot adopt, a Pool one without --agent).
  so.local.may_run = [this](const Task& t) {
    return executor_->AttemptAdoptable(t.id, t.attempts);
  };
  // Before an old run is archived, what its attempts left running ends.
  so.local.end_orphan = [this](const Task& t) {
    return executor_->ReapOrphans(t.id);
  };
  if (!config_.location.empty()) AdmitOnlyTheSameDefinition(&so);
  return so;
}

// On a store that workers on several machines share, the run records its
// step files, and a worker that differs from it is refused (run_admit.h).
void RunLoop::AdmitOnlyTheSameDefinition(StoreOptions* so) {
  WorkerDefinition w;
  w.workflow_json = workflow_->frozen_json();
  w.workflow_path = config_.workflow_path;
  w.base_dir = workflow_->base_dir();
  w.input = config_.input;
  w.def_files = DefFilesJson(*workflow_, config_.env);
  so->def_files = w.def_files;
  so->admit = [w = std::move(w)](const RunInfo& run) {
    return AdmitWorker(run, w);
  };
}

Status RunLoop::Open(bool* finished, int* exit_code) {
  const StoreOptions so = OpenOptions();
  OpenReport report;
  WIZQ_RETURN_IF_ERROR(Store::Open(so, &store_, &report));
  RunInfo run;
  WIZQ_RETURN_IF_ERROR(store_->GetRun(&run));
  if (!config_.location.empty()) {
    WIZQ_RETURN_IF_ERROR(
        AdoptLocalWorkspace(config_.env ? config_.env : Env::Posix(),
                            config_.workspace, std::to_string(run.started_ms)));
  }
  WIZQ_RETURN_IF_ERROR(UseFrozenWorkflow(run));
  run_started_ms_ = run.started_ms;
  TaskFilter lost;
  lost.states = {TaskState::kFailed};
  lost.error_reason = std::string(kReasonWorkerLost);
  std::vector<Task> tasks;
  WIZQ_RETURN_IF_ERROR(store_->ListTasks(lost, &tasks));
  std::vector<int64_t> ids;
  for (const Task& t : tasks) ids.push_back(t.id);
  ReapLostOrphans(ids);
  WIZQ_RETURN_IF_ERROR(ReadProgress(*store_, &progress_));
  progress_ = CurrentProgress();
  observer_->OnOpened(config_.run_id, report, progress_);
  if (report.action != OpenAction::kFinished) OpenReuse(run);
  *finished = report.action == OpenAction::kFinished;
  if (*finished) {
    *exit_code =
        run.status == RunStatus::kCompleted ? kExitCompleted : kExitTaskFailed;
  }
  return Status::OK();
}

// A resumed run keeps the workflow it was started with (SPEC §2).
Status RunLoop::UseFrozenWorkflow(const RunInfo& run) {
  const std::string& frozen = run.workflow;
  if (frozen.empty() || frozen == workflow_->frozen_json()) return Status::OK();
  std::unique_ptr<Workflow> wf;
  Status s =
      Workflow::Parse(frozen, config_.workflow_path + " (frozen copy)", &wf);
  if (!s.ok()) {
    return Status::Corruption("the workflow frozen in the run's store (" +
                              store_->DisplayLocation() +
                              ") no longer parses: " + s.message());
  }
  wf->set_base_dir(workflow_->base_dir());
  workflow_ = std::move(wf);
  observer_->OnWarning("run " + config_.run_id + " keeps the workflow it " +
                       "was started with: " + config_.workflow_path +
                       " has changed since (to run the edits, use --fresh " +
                       "or another --run-id)");
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

// The counts of the committed run (RunCounts, kept by the store).
Status RunLoop::ReadProgress(StoreReads& r, Progress* p) {
  RunCounts c;
  WIZQ_RETURN_IF_ERROR(r.Counts(&c));
  p->pending = c.of(TaskState::kPending);
  p->running = c.of(TaskState::kInProgress);
  p->done = c.of(TaskState::kDone);
  p->failed = c.of(TaskState::kFailed);
  p->total = c.total;
  p->reused = c.reused;
  p->imported = c.imported;
  return Status::OK();
}

// Counts as of the last commit, with this process's running tasks.
Progress RunLoop::CurrentProgress() const {
  Progress p = progress_;
  p.queued = static_cast<int64_t>(queued_.size() + ready_.size());
  p.running = std::max<int64_t>(0, p.running - p.queued);
  p.elapsed_ms = ElapsedMs();
  return p;
}

Status RunLoop::Run(int* exit_code) {
  start_ms_ = MonotonicMs();
  bool finished = false;
  WIZQ_RETURN_IF_ERROR(Open(&finished, exit_code));
  if (finished) {
    ReportFailures();
    return Status::OK();
  }
  ChooseJobs();
  if (commits_.wake_fd() >= 0) {
    wake_on_commit_ = executor_->SetWakeFd(commits_.wake_fd());
  }
  while (true) {
    if (StopRequested()) return Interrupt(exit_code);
    // Moves on with every renewal, but not past a lost claim that was not
    // dropped; the spawner enforces it on its own.
    DropLostClaims(/*harvested=*/false);
    executor_->SetLocalDeadline(store_->LocalDeadlineMs());
    WIZQ_RETURN_IF_ERROR(Harvest(/*block=*/false));
    if (run_status_ != RunStatus::kRunning && running_.empty() &&
        ready_.empty() && outcomes_.empty() && !inflight_.valid()) {
      return Finish(exit_code);
    }
    if (HaltDue()) return Halt(exit_code);
    if (LivenessLostDue()) {
      // What it claimed ahead goes back at once (its claims may hold).
      Status s = StopAndRelease("interrupted");
      return s.ok() ? store_->Liveness() : s;
    }
    Status started = StartReady();
    if (!started.ok()) {
      // Not the task's fault (no descriptors, no space, ...): stop the run
      // like any environment error, giving back what this process holds.
      observer_->OnNote("stopping: " + started.message());
      Status s = StopAndRelease("environment_error");
      if (s.ok()) s = store_->Close();
      return s.ok() ? started : s;
    }
    MaybeLaunchCommit();
    if (running_.empty()) {
      // Nothing of ours runs: wait for the commit, or poll for work that
      // other workers hold or that is backing off before a retry.
      if (inflight_.valid()) {
        WIZQ_RETURN_IF_ERROR(Harvest(/*block=*/true));
      } else {
        bool paused = false;
        WIZQ_RETURN_IF_ERROR(MaybePause(&paused));
        if (paused) return FinishPaused(exit_code);
        WIZQ_RETURN_IF_ERROR(CheckSomethingCanRun());
        usleep(static_cast<useconds_t>(kIdlePollMinMs) * 1000);
      }
      continue;
    }
    WIZQ_RETURN_IF_ERROR(CollectResults());
  }
}

// Called when nothing of ours runs and no commit is in flight. When the
// only tasks left are ones this process cannot run (Pool steps, without
// --agent), the run goes on waiting for agents: it says so once, with how
// to start one, and keeps polling (it puts back lapsed leases, submits
// hooks and finishes the run when the agents are done). Reads every
// pending task, as each poll did before the store contract (the loop
// polls every 5 ms while idle).
Status RunLoop::CheckSomethingCanRun() {
  TaskFilter pending;
  pending.states = {TaskState::kPending};
  pending.limit = kPage;
  std::vector<Task> tasks;
  int64_t waiting = 0;
  do {
    WIZQ_RETURN_IF_ERROR(store_->ListTasks(pending, &tasks));
    for (const Task& t : tasks) {
      bool hook_waits = false;
      WIZQ_RETURN_IF_ERROR(HookWaits(*store_, t, &hook_waits));
      if (hook_waits) continue;  // runs after the tasks beneath its owner
      const Step* step = nullptr;
      const Action* a = ActionFor(t, &step);
      if (a == nullptr || executor_->CanRun(*a)) return Status::OK();
      waiting++;
    }
    if (!tasks.empty()) pending.after_id = tasks.back().id;
  } while (static_cast<int64_t>(tasks.size()) == kPage);
  RunCounts counts;
  WIZQ_RETURN_IF_ERROR(store_->Counts(&counts));
  waiting += counts.leased;
  if (!ready_.empty() || waiting == 0) {
    told_waiting_ = false;
    return Status::OK();
  }
  if (!told_waiting_) {
    told_waiting_ = true;
    observer_->OnNote(
        "waiting for agents: " + std::to_string(waiting) +
        " Pool task(s) pending or leased; start one with `wizq agent serve "
        "--dir " +
        config_.install_dir +
        " -- COMMAND` (or run with --agent COMMAND); Ctrl+C leaves them "
        "pending");
  }
  return Status::OK();
}

Status RunLoop::HookWaits(StoreReads& r, const Task& t, bool* waits) {
  *waits = false;
  if (t.origin != Origin::kFinally || t.state != TaskState::kPending) {
    return Status::OK();
  }
  Task owner;
  Status s = r.GetTask(t.finally_for, &owner);
  if (s.IsNotFound()) return Status::OK();
  WIZQ_RETURN_IF_ERROR(s);
  *waits = owner.open_children > 0;
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

Status RunLoop::Finish(int* exit_code) {
  if (run_status_ == RunStatus::kPaused) return FinishPaused(exit_code);
  ReportFailures();
  observer_->OnRunFinished(run_status_, CurrentProgress());
  WIZQ_RETURN_IF_ERROR(store_->Close());
  *exit_code =
      run_status_ == RunStatus::kCompleted ? kExitCompleted : kExitTaskFailed;
  return Status::OK();
}

// Ctrl+C / SIGTERM: stop our tasks, give them and the tasks claimed ahead
// back (their attempts do not count), leave the run resumable.
Status RunLoop::Interrupt(int* exit_code) {
  *exit_code = kExitInterrupted;
  observer_->OnNote("interrupted: stopping " + std::to_string(running_.size()) +
                    " running task(s); they go back to pending" +
                    (running_.empty() ? "" : " (Ctrl+C again: at once)"));
  // A task that signalled its own wizq is charged the attempt (SPEC §6.3:
  // a task that kills its worker every time still ends failed).
  int64_t culprit = 0;
  if (executor_->FindByProcess(StopSender(), &culprit)) {
    Outcome o;
    o.id = culprit;
    o.reason = std::string(kReasonWorkerLost);
    o.message = "the task sent a stop signal to its own wizq";
    o.retryable = true;
    outcomes_.push_back(o);
  }
  Status s = StopAndRelease("interrupted");
  ReportFailures();
  observer_->OnInterrupted(StopSignalName(), CurrentProgress());
  return s.ok() ? store_->Close() : s;
}

}  // namespace wizq
