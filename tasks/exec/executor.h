// Executor: runs claimed attempts of tasks, whatever their action kind, and
// reports how each one ended. The run loop (orchestrator/run_loop.h) only
// ever talks to an Executor: it starts an attempt once its claim is
// durable, waits for results, judges them (tasks/workflow/response.h) and
// commits them. Today's implementation runs Command steps as processes
// (tasks/exec/command_executor.h); Pool agents started by `wizq run --agent`,
// in-process Function handlers and the adoption of orphaned attempts are
// further implementations or extensions of this one interface, and tests
// use a scripted fake (tests/fake_executor.h). Ninja's CommandRunner is the
// model.
//
// Thread-safety: two threads call an Executor, and each method says which.
// The run loop's thread may call every method. The thread that commits
// (orchestrator/commit_thread.h) calls CanRun, CanRunTask (choosing what to
// claim), AttemptStarted and AttemptAdoptable (putting back a dead worker's
// tasks, inside a store transaction) while the loop thread starts and waits
// for attempts, so those four must be thread-safe. The rest are called from
// the loop thread only.
#ifndef WIZQ_TASKS_EXECUTOR_H_
#define WIZQ_TASKS_EXECUTOR_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "queue/task.h"
#include "tasks/workflow/workflow.h"
#include "util/status.h"

namespace wizq {

// How much of a response is read back unless an Attempt says otherwise.
constexpr size_t kDefaultMaxResponseBytes = 16 << 20;

// One claimed attempt of a task: everything a body may be told about it.
struct Attempt {
  int64_t task_id = 0;
  int number = 1;    // the attempt number (Task::attempts), from 1
  std::string step;  // the task's step (Task::type)
  Origin origin = Origin::kInitial;
  std::string value_json;  // the task's value (Task::inputs)
  // What to run: the step's action, or its finally hook for a hook task.
  // Owned by the run's Workflow, which outlives the attempt.
  const Action* action = nullptr;
  std::string base_dir;  // the workflow file's directory (a Command's cwd)
  std::string run_id;
  std::string install_dir;
  // Stable across the attempts and resumes of one task of one run.
  std::string idempotency_key;
  std::optional<double> timeout_seconds;  // unset: no limit
  size_t max_response_bytes = kDefaultMaxResponseBytes;
  // A Prompt task's recorded answer (JSON text), empty if none (SPEC §10).
  std::string answer_json;
  // The run's workflow (`action` is one of its steps'), for executors that
  // describe the step to their body (a Pool agent's instructions).
  const Workflow* workflow = nullptr;
  // The task was put back by a dead worker's reclaim as adoptable (its last
  // reset: worker_lost): if this attempt turns out to have died since,
  // without an exit record, it is reported lost (charged), not run afresh
  // under the refunded number.
  bool adopt_expected = false;
};

// How an attempt ended. A Command's exit code 0 with its stdout, an agent's
// `done` or a Function's return value are all kResponded with a response
// text that the run loop validates the same way.
struct AttemptResult {
  enum class Outcome {
    kResponded,    // finished and produced `response` (exit code 0)
    kExited,       // failed: a non-zero exit code (see exit_code)
    kSignaled,     // killed by `signal`
    kTimedOut,     // stopped because its timeout elapsed
    kSpawnFailed,  // could not be started; see error
    // A Prompt got no answer (end of input, three unreadable replies): the
    // task goes back to pending, the attempt does not count, and it waits.
    kUnanswered,
  };
  Outcome outcome = Outcome::kSpawnFailed;
  int exit_code = -1;    // kResponded / kExited, else -1
  int signal = 0;        // kSignaled, else 0
  std::string response;  // kResponded: the response text (a Command's stdout)
  bool response_truncated = false;  // longer than max_response_bytes
  // A readable summary of a failure ("exit code 3", "killed by signal 9",
  // "timed out after 5s", why the spawn failed); empty on success.
  std::string error;
  // For failures: the last non-empty line the body wrote to its stderr,
  // for the failure message. May be empty.
  std::string stderr_tail;
  double seconds = 0;  // from the attempt's start (when it began) to its end
  // A Prompt's answer (JSON text): the run loop turns it into the response
  // (tasks/exec/prompt.h). `answer_source` (terminal, default) is set when the
  // answer is new and must be recorded (task_answered) with the result;
  // empty for an answer that was already recorded.
  std::string answer_json;
  std::string answer_source;
  // The attempt was started by a worker that died and adopted by this one
  // (Executor::AttemptAdoptable): the result is that earlier attempt's,
  // waited for `waited_ms` after Start. Judged like any other; the run
  // loop records task_adopted with it.
  bool adopted = false;
  int64_t waited_ms = 0;
  // An adopted attempt that died without an exit record while waited for:
  // it has no result and is a lost attempt (worker_lost, charged).
  bool lost = false;
  // A queued attempt taken back by CancelQueued before it started: no
  // result; the task is still claimed and may start later.
  bool never_started = false;
};

class Executor {
 public:
  // Finished attempts, by task id.
  using Done = std::vector<std::pair<int64_t, AttemptResult>>;

  virtual ~Executor() = default;

  // Whether this executor can run tasks whose action is `action` (the run
  // loop claims only those). Thread-safe: also called from the thread that
  // commits.
  virtual bool CanRun(const Action& action) const = 0;

  // Whether this executor would run `task` (whose action is `action`) now;
  // the run loop claims only those. By default, CanRun(action). A Prompt
  // task without an answer is runnable only where someone can answer it.
  // The run loop turns it into a store's ClaimFilter (data): it asks per
  // step, for a task that stands for any (id 0, unanswered, then answered),
  // and asks about a task by id only once its attempt ended here (a gate
  // given up on, an abandoned Function body). So an answer may depend on
  // the step, on whether the task is answered, and on tasks this executor
  // ran; on nothing else of a task.
  // Thread-safe: called from the thread that commits and the loop thread.
  virtual bool CanRunTask(const Task& task, const Action& action) const {
    (void)task;
    return CanRun(action);
  }

  // Starts an attempt without waiting for it; first ends whatever an
  // earlier attempt of the same task may have left running (a crashed
  // worker's), so two attempts never overlap (SPEC §6.3). If this very
  // attempt was started by a worker that died and can be adopted, it is
  // adopted instead (AttemptResult::adopted). Called only once
  // the attempt's claim is durable. An attempt that cannot be started for
  // reasons of its own (a missing cwd, no shell) still returns OK and is
  // reported by Wait as kSpawnFailed. An error Status is the environment's
  // fault (no descriptors, no space, an earlier attempt that cannot be
  // ended): nothing was started and the run should stop. Loop thread.
  virtual Status Start(const Attempt& attempt) = 0;

  // Waits up to timeout_ms (0 = just look, negative = no limit) until at
  // least one started attempt has finished and appends every finished one
  // to *done. Returns at once when nothing runs. Loop thread.
  virtual Status Wait(int timeout_ms, Done* done) = 0;

  // Attempts started and not yet returned by Wait. Loop thread.
  virtual size_t running() const = 0;

  // The task whose running attempt process `pid` belongs to (false if
  // none): who sent wizq a stop signal. Loop thread.
  virtual bool FindByProcess(int pid, int64_t* task_id) const = 0;

  // Stops every running attempt (grace_seconds before it is forced) and
  // drops their results. Used when the run stops. Loop thread.
  virtual void TerminateAll(double grace_seconds) = 0;

  // Whether attempt `attempt` of task `task_id` ever started, in this
  // process or in a worker that died since: a claim whose attempt never
  // started does not count (LocalAttempts::started, queue/store.h).
  // Thread-safe: called inside store transactions, on the thread that
  // commits too.
  virtual bool AttemptStarted(int64_t task_id, int attempt) const = 0;

  // Ends whatever an earlier attempt of `task_id` left running (a dead
  // worker's task that is failed as worker_lost, SPEC §6.3). OK when
  // nothing runs any more. Loop thread (also through Store::Open, which
  // archives an old run: LocalAttempts::end_orphan).
  virtual Status ReapOrphans(int64_t task_id) = 0;

  // Whether attempt `attempt` of `task_id`, started by a worker that died,
  // still runs or finished on its own with a result this executor can
  // adopt (LocalAttempts::adoptable). If so, the store puts the task
  // back without charging the attempt, and the next Start of that same
  // attempt number adopts it instead of running the task again.
  // Thread-safe: called inside store transactions, on the thread that
  // commits too. Default: never (nothing to adopt).
  virtual bool AttemptAdoptable(int64_t task_id, int attempt) const;

  // Asks Wait to return early, too, when descriptor `fd` becomes readable
  // (the run loop's commit-landed eventfd; Wait does not read it). False
  // if this executor cannot (then the loop polls on a short timer). Loop
  // thread.
  virtual bool SetWakeFd(int fd) {
    (void)fd;
    return false;
  }

  // Whether an attempt of `action` may be started while every slot is
  // busy: it then waits in the executor and starts the moment one of its
  // running attempts ends, without a round trip through the run loop
  // (CommandExecutor: in its spawner, tasks/proc/spawner.h). The run loop
  // starts at most RunLoop::QueueAhead() such attempts beyond the slots.
  // Loop thread. Default: no.
  virtual bool Queues(const Action& action) const {
    (void)action;
    return false;
  }
  // How many of the attempts this executor queues may run at once (the
  // slots that attempts of other executors do not hold). Loop thread.
  // Default: ignored.
  virtual void SetQueueSlots(int slots) { (void)slots; }
  // The local deadline (CLOCK_MONOTONIC ms; 0: none): when the store's
  // claims of this worker may lapse (Store::LocalDeadlineMs). An executor
  // whose attempts are processes ends them by then, even when wizq is
  // frozen (tasks/proc/spawner.h). Loop thread. Default: ignored.
  virtual void SetLocalDeadline(int64_t mono_ms) { (void)mono_ms; }
  // Gives back the queued attempts that have not started: Wait reports
  // each with AttemptResult::never_started. Loop thread. Default: none.
  virtual void CancelQueued() {}
  // For the attempts of actions it Queues, an executor says when each one
  // began (its process runs), which may be well after Start: appends the
  // task ids of the attempts that began since the last call (Wait also
  // returns when one began). An attempt whose result comes first began
  // too, unless it never_started. Default: none (the run loop takes an
  // attempt of an action that does not queue as begun at Start). Loop
  // thread.
  virtual void TakeBegun(std::vector<int64_t>* task_ids) { (void)task_ids; }

  // After a Start that adopted a dead worker's attempt of `task_id` which
  // still runs: what it waits for, for the user ("waiting for its earlier
  // attempt 1 (process group 4242) to finish, up to 28s"). Empty when Start
  // ran the task, or the adopted attempt had already finished. Loop
  // thread. Default: empty.
  virtual std::string AdoptionNote(int64_t task_id) const {
    (void)task_id;
    return "";
  }
};

inline bool Executor::AttemptAdoptable(int64_t task_id, int attempt) const {
  (void)task_id;
  (void)attempt;
  return false;
}

}  // namespace wizq

#endif  // WIZQ_TASKS_EXECUTOR_H_
