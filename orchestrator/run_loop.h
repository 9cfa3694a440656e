// RunLoop: the body of `wizq run` once the workflow and input are valid.
// Internal to orchestrator/; see orchestrator/run.h for the contract.
//
// The executor seam. The loop decides what runs when; it never runs a task
// itself. Every claimed attempt goes to the Executor of Config::executor
// (tasks/exec/executor.h): Start once the claim is durable, Wait for results,
// TerminateAll on stop, FindByProcess for the task that signalled wizq,
// AttemptStarted for the store's recovery of a dead worker's claims, and
// ReapOrphans for a dead worker's task failed as worker_lost. `wizq run`
// uses a CommandExecutor (tasks/exec/command_executor.h, built by RunWorkflow);
// tests drive the loop in-process with a scripted fake
// (tests/fake_executor.h, tests/run_loop_test.cc). A result is judged here
// (tasks/workflow/response.h: ChildrenOf) and committed with its children.
//
// Pipelining. A commit costs one fdatasync (milliseconds on real disks), so
// the loop never waits for one while it could start a task: commits run on
// a helper thread, one at a time, each carrying every result that arrived
// since the last one, the finally hooks that became due, and enough claims
// to refill the slots; for short tasks also a small look-ahead of tasks
// claimed ahead (durably) so that a slot that frees up starts its next task
// at once. Only a step whose last kQueueHistory attempts here took less
// than kQueueTaskMs on average is claimed (and queued) beyond the slots
// (FastSteps): a slow task claimed ahead would gain nothing and be held
// from other workers meanwhile. Claimed-ahead tasks that never started are
// given back on Ctrl+C, and a crash does not count their attempt
// (LocalAttempts::started). An attempt that began is recorded as such with
// the next commit (StoreTxn::MarkStarted, task_started).
//
// The run is held only through the store contract (queue/store.h): the
// loop opens it with Store::Open and changes it with Store::Transact; what
// it may claim is a ClaimFilter (ClaimFilterFor), data the store evaluates.
// Only the commit thread uses the Store while a commit is in flight; the
// main thread works on copies (Claimed) and the CommitResult it gets back.
//
// The members are defined across seven files: run_loop.cc (opening the
// run, the loop and how it ends), run_commit.cc (launching, running and
// harvesting commits; giving tasks back on stop), run_claim.cc (what a
// commit claims, as a ClaimFilter), run_dispatch.cc
// (starting tasks, collecting and judging their results), run_gate.cc (the
// human gate: recording answers, pausing), run_halt.cc (--halt and the list
// of failed tasks) and run_reuse.cc (incremental re-runs).
#ifndef WIZQ_ORCHESTRATOR_RUN_LOOP_H_
#define WIZQ_ORCHESTRATOR_RUN_LOOP_H_

#include <deque>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "orchestrator/commit_thread.h"
#include "orchestrator/observer.h"
#include "orchestrator/run.h"
#include "queue/store.h"
#include "tasks/exec/executor.h"
#include "tasks/workflow/prompt_answers.h"
#include "tasks/workflow/workflow.h"

namespace wizq {

class Env;
class DefHasher;
class PreviousRun;
class Reuser;

bool StopRequested();
int StopSender();
// The name of the signal that requested the stop ("SIGINT"...), or "".
std::string StopSignalName();

// What a finished attempt amounts to, decided outside the lock.
struct Outcome {
  int64_t id = 0;
  bool success = false;
  std::vector<NewTask> children;
  std::string reason;  // on failure
  std::string message;
  bool retryable = false;
  std::string def_hash;  // on success: the step's, if it held still
  // The human gate (orchestrator/run_gate.cc): give the task back unanswered
  // (pending, attempt refunded), or record a new answer with the result.
  bool release = false;
  std::string answer_json, answer_source;
  // The result is an adopted attempt's (task_adopted is recorded with it).
  int adopted_attempt = 0;  // 0: not adopted
  int64_t waited_ms = 0;
  AttemptEnd end;  // for the observer
};

// What a commit claims (RunLoop::ClaimInTxn): up to `slots` tasks of any
// step, then up to `ahead` more of the steps in `fast`, none of which
// overtakes a task of another step. `started`: attempts of this process
// (task id, attempt) that began since the last commit, to record as
// started (StoreTxn::MarkStarted) once their executor says so.
struct ClaimWant {
  int slots = 0;
  int ahead = 0;
  std::set<std::string> fast;
  std::vector<std::pair<int64_t, int>> started;
  // The tasks of which this worker holds an attempt (claimed, queued,
  // running): never claimed again meanwhile. One whose claim was lost and
  // that went back to pending would be a second attempt of one id in hand.
  std::set<int64_t> in_hand;
};

// What one commit did, for the main thread.
// The --answer flags one transaction dealt with: how many it recorded, and
// the indexes (in RunLoop::Config::answers) of all it used or found moot.
struct BoundAnswers {
  int count = 0;
  std::vector<size_t> used;
};

struct CommitResult {
  Status status;
  std::vector<Task> claimed;     // copies, in claim order
  std::vector<Task> finished;    // the outcomes' tasks after the commit
  std::vector<AttemptEnd> ends;  // finished[i]'s attempt's
  std::vector<int64_t> lost;     // dead workers' tasks failed as worker_lost
  std::vector<std::string> notes;
  std::vector<int64_t> reused_ids;        // completed from the previous run
  std::vector<Task> reused;               // their copies after the commit
  std::map<int64_t, int> reused_spawned;  // children each one submitted
  RunStatus run_status = RunStatus::kRunning;
  Progress progress;
  BoundAnswers answers;  // --answer flags this commit recorded or dropped
  // Of ClaimWant::started: attempts their executor does not take as
  // started yet (Executor::AttemptStarted), asked again at the next commit.
  std::vector<std::pair<int64_t, int>> unstarted;
};

class RunLoop {
 public:
  struct Config {
    std::string run_id, install_dir, input, wizq_version, workflow_path;
    std::string location, schema;  // RunOptions::store, schema
    std::string workspace;         // LocalWorkspace of the run
    int64_t worker_lease_ms = 0;   // RunOptions::worker_lease_ms
    int jobs = 0;
    bool fresh = false;
    Env* env = nullptr;
    // Runs the attempts; required, must outlive the RunLoop.
    Executor* executor = nullptr;
    // Incremental re-runs (orchestrator/reuse.h): --no-reuse, --from; a
    // fresh run records them, a resumed one adds what it recorded.
    bool no_reuse = false;
    std::vector<std::string> from;  // step names and previous task ids
    bool retry_failed = false;      // --retry-failed
    // A fresh run starts as this import instead of a root task
    // (queue/import.h); not owned.
    const RunImport* import = nullptr;
    // --answer flags, checked (tasks/workflow/prompt_answers.h); each is
    // recorded when its task waits (SPEC §10).
    std::vector<FlagAnswer> answers;
    HaltPolicy halt;  // --halt (orchestrator/run_halt.cc)
  };

  RunLoop(Config config, std::unique_ptr<Workflow> workflow,
          RunObserver* observer);
  ~RunLoop();
  // Runs until the run finishes or stops; *exit_code per SPEC §7. An error
  // Status is an environment (3) or input (2) problem.
  Status Run(int* exit_code);

 private:
  // The loop's clock, and how long it sleeps between polls when idle.
  static constexpr int kIdlePollMinMs = 5;
  static constexpr int kIdlePollMaxMs = 100;
  // How long an attempt's start may wait for a commit to carry it, on a
  // store that several machines share (MaybeLaunchCommit).
  static constexpr int kMarkStartedMs = 100;
  static int64_t MonotonicMs();

  Status Open(bool* finished, int* exit_code);
  StoreOptions OpenOptions();
  void AdmitOnlyTheSameDefinition(StoreOptions* so);
  Status UseFrozenWorkflow(const RunInfo& run);
  static Status ReadProgress(StoreReads& r, Progress* p);
  void ChooseJobs();

  // Main thread.
  Status Harvest(bool block);
  Status CheckSomethingCanRun();
  void ReapLostOrphans(const std::vector<int64_t>& ids);
  Status StartReady();
  // Claims the store found lost (Store::TakeLostClaims: they lapsed while
  // this worker was frozen or cut off, and another was given them) never
  // start here: dropped from ready_, or cancelled in the executor. An
  // attempt that began was ended at the local deadline; its result is
  // refused. One not seen yet is among the claims of the commit under way
  // (`harvested`: that commit's claims are in ready_ now).
  void DropLostClaims(bool harvested);
  void MaybeLaunchCommit();
  // The steps whose tasks may be claimed, and queued, beyond the slots:
  // those whose last kQueueHistory attempts that ran in this process took
  // less than kQueueTaskMs on average (a step with fewer, or none, never
  // queues: a slow task queued or claimed ahead gains nothing and is held
  // from other workers meanwhile).
  std::set<std::string> FastSteps() const;
  bool Fast(const std::string& step) const;
  // Records how long an attempt of `step` ran (FastSteps).
  void NoteDuration(const std::string& step, double ms);
  // How many tasks of fast steps StartReady starts beyond the slots, to
  // wait in the executor (four per slot: the spawner then wakes wizq once
  // per few ended tasks, tasks/proc/spawner.h). None under --halt: a slot freed
  // by a failure must not start a queued task before the failure is
  // counted.
  int QueueAhead() const {
    return config_.halt.when != HaltPolicy::When::kNever ? 0 : 4 * jobs_;
  }
  static constexpr double kQueueTaskMs = 50;
  static constexpr size_t kQueueHistory = 8;
  static constexpr int kLazyHarvestMs = 10;
  // Pending tasks read per ListTasks call by the idle checks.
  static constexpr int64_t kPage = 256;
  Status CollectResults();
  Status StartTask(const Task& task);
  // The attempt of task `id` that the executor started began (its process
  // runs): tells the observer.
  void Began(int64_t id);
  void NoteBegan(int64_t id, int attempt);  // into began_
  Outcome Judge(const Task& task, const AttemptResult& result) const;
  Outcome JudgeAttempt(const Task& task, const AttemptResult& result) const;
  Outcome JudgeResponse(const Task& task, const AttemptResult& result) const;
  Status Interrupt(int* exit_code);
  Status StopAndRelease(const std::string& reason);
  Status Finish(int* exit_code);
  Progress CurrentProgress() const;

  // Commit thread (and Open/Interrupt while no commit is in flight).
  CommitResult Commit(std::vector<Outcome> outcomes, const ClaimWant& want,
                      std::map<std::string, int> per_step);
  Status CommitInTxn(StoreTxn& txn, const std::vector<Outcome>& outcomes,
                     const ClaimWant& want,
                     const std::map<std::string, int>& per_step,
                     CommitResult* r);
  Status CommitOutcome(StoreTxn& txn, const Outcome& o,
                       std::vector<std::string>* notes);
  // Records as started (task_started) those of `began` whose executor says
  // they started; the others are appended to *unstarted.
  Status MarkStarted(StoreTxn& txn,
                     const std::vector<std::pair<int64_t, int>>& began,
                     std::vector<std::pair<int64_t, int>>* unstarted);
  Status ClaimInTxn(StoreTxn& txn, const ClaimWant& want,
                    const std::map<std::string, int>& per_step,
                    CommitResult* r);
  // What this process may claim, as data (orchestrator/run_claim.cc): the
  // steps (and hooks) its executor runs, the Prompt steps it runs only
  // answered, each step's room given `per_step` held, and the tasks it
  // declines by id (declined_).
  Status ClaimFilterFor(StoreTxn& txn,
                        const std::map<std::string, int>& per_step,
                        ClaimFilter* f);
  // The id below which tasks of fast steps may be claimed ahead: that of
  // the first claimable task of another step (0: none).
  Status AheadBound(StoreTxn& txn, const ClaimWant& want, const ClaimFilter& f,
                    int64_t* below);
  // Whether this process's executor would run `t` now.
  bool Claimable(const Task& t) const;
  // Whether `t`'s step is below its max_concurrency in `per_step`.
  bool StepHasRoom(const Task& t,
                   const std::map<std::string, int>& per_step) const;

  // Reuse (orchestrator/run_reuse.cc).
  void OpenReuse(const RunInfo& run);
  Status ReuseInTxn(StoreTxn& txn, CommitResult* r);
  std::string FinishedDefHash(const Task& task);
  // The human gate (run_gate.cc).
  Status CommitGate(StoreTxn& txn, const Outcome& o, bool* handled,
                    std::vector<std::string>* notes);
  Status BindFlagAnswers(StoreTxn& txn, BoundAnswers* bound,
                         std::vector<std::string>* notes);
  void ForgetFlagAnswers(const BoundAnswers& bound);
  bool WaitsHere(const Task& t) const;
  Status Waiting(StoreReads& r, std::vector<Task>* waiting) const;
  // A pending finally hook over a subtree that has not settled (again): it
  // is not claimed before (SPEC §2).
  static Status HookWaits(StoreReads& r, const Task& t, bool* waits);
  Status MaybePause(bool* paused);
  Status FinishPaused(int* exit_code);

  // --halt and the failure list (orchestrator/run_halt.cc).
  bool HaltDue();
  // True once this worker's liveness is lost for good (Store::Liveness)
  // and what began here has ended and been committed. From the moment it is
  // lost, nothing more starts: what waits in the executor is cancelled (its
  // local deadline never moves on again, so it would wait for ever).
  bool LivenessLostDue();
  // From its first call on, no new task starts and what waits in the
  // executor comes back to ready_ unstarted (said once, with `why`). True
  // once nothing of ours runs and every result is committed.
  bool Drained(const std::string& why);
  // Counts `o` in failures_seen_ if it fails `t` for good.
  void CountFailure(const Task& t, const Outcome& o);
  Status Halt(int* exit_code);
  void ReportFailures();

  const Action* ActionFor(const Task& t, const Step** step) const;
  int64_t ElapsedMs() const;

  Config config_;
  std::unique_ptr<Workflow> workflow_;
  RunObserver* observer_;
  std::unique_ptr<Store> store_;
  Executor* const executor_;
  int jobs_ = 1;
  int64_t start_ms_ = 0;
  int64_t run_started_ms_ = 0;

  std::map<int64_t, Task> running_;  // started, by id
  // Of running_: handed to an executor that tells when they begin
  // (Executor::TakeBegun), not begun yet: waiting for a slot.
  std::set<int64_t> queued_;
  std::deque<Task> ready_;  // claimed, not started yet
  // DropLostClaims: lost claims not seen yet, and those being cancelled.
  std::set<int64_t> lost_, cancelling_;
  std::vector<Outcome> outcomes_;  // results not yet committed
  // Attempts (task id, attempt) begun, not recorded as started yet.
  std::vector<std::pair<int64_t, int>> began_;
  int64_t began_since_ms_ = 0;  // when began_ last stopped being empty
  // Tasks whose attempt ended here and that the executor declines by id
  // since (Executor::CanRunTask false while its step runs here): never in
  // a claim while that lasts. Commit thread only.
  std::set<int64_t> declined_;
  std::future<CommitResult> inflight_;
  int lookahead_ = 0;
  double task_ms_ = 0;  // moving average of the fast steps' task durations
  // Per step, how long its last kQueueHistory attempts ran here (ms).
  std::map<std::string, std::deque<double>> step_ms_;
  double commit_ms_ = 0;  // moving average of commit latencies
  int64_t commit_started_ms_ = 0;
  int64_t next_poll_ms_ = 0;
  int poll_backoff_ms_ = 0;
  RunStatus run_status_ = RunStatus::kRunning;
  Progress progress_;
  std::unique_ptr<DefHasher> hasher_;
  std::unique_ptr<PreviousRun> previous_;
  std::unique_ptr<Reuser> reuser_;
  std::map<int64_t, std::string> start_hash_;  // def_hash at start, by id
  bool told_waiting_ = false;  // "waiting for agents" said since last work
  int failures_seen_ = 0;      // tasks this process saw fail for good
  bool draining_ = false;      // Drained: no new task starts
  std::map<int64_t, int> submitted_;  // children each outcome submitted
  // The executor's Wait also wakes when a commit lands (SetWakeFd).
  bool wake_on_commit_ = false;
  // Last: its thread, which uses the members above, ends first.
  CommitThread commits_;
};

// Checks the --answer arguments `args` against the run `config` would
// resume (read-only), or against the tasks of the import it would start
// with (none for a root task), before anything is written
// (orchestrator/run_answers.cc). InvalidArgument: exit 2.
Status CheckFlagAnswers(const RunLoop::Config& config, const Workflow& workflow,
                        const std::vector<std::string>& args,
                        std::vector<FlagAnswer>* out);

}  // namespace wizq

#endif  // WIZQ_ORCHESTRATOR_RUN_LOOP_H_
