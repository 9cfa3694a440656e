// CommandRunner: starts the processes of Command tasks and waits for them.
//
// Each command runs as `/bin/sh -c <script>`, started by the runner's
// spawner (tasks/proc/spawner.h), leading its own process group; the spawner
// records its exit status, also when wizq is gone, so that a later worker
// can adopt it (tasks/proc/orphans_record.h). It runs with
// stdin from memory (a memfd) and stdout and stderr connected straight to
// the attempt's two files (`<task>.<attempt>.stdout|.stderr`, named by
// AttemptFiles in tasks/exec/attempt_files.h), so no pipe has to be drained and
// nothing can deadlock. A command is over when
// its shell exits: whatever it left running in its process group is killed
// with it. Timeouts send SIGTERM to the whole group and SIGKILL after a grace
// period.
//
// Every process tree also holds an exclusive flock on its attempt's stdout
// file for as long as any of its processes keeps the inherited descriptor
// (stdout, or its copy at descriptor 3) open, and the run's attempt
// journal records the leader (pid = process group id, its start time and
// the boot id; tasks/exec/attempt_journal.h). When wizq itself
// dies, the tree keeps the lock; ReapOrphans() (and Start(), for the same
// directory) end it before a task runs again (SPEC §6.3). The limit: a
// process that both leaves the group (setsid/setpgid) and closes the lock
// descriptor cannot be found once its leader is gone.
//
// The run loop uses it through CommandExecutor (tasks/exec/command_executor.h).
//
// Thread-safety: a CommandRunner must be used by one thread at a time. The
// process must not reap children it did not start itself (no waitpid(-1), no
// SIGCHLD set to SIG_IGN) and should open its own files O_CLOEXEC, or they
// leak into the commands.
#ifndef WIZQ_TASKS_COMMAND_RUNNER_H_
#define WIZQ_TASKS_COMMAND_RUNNER_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fs/env.h"
#include "tasks/proc/spawner.h"
#include "util/status.h"

namespace wizq {

struct CommandSpec {
  // Run as: /bin/sh -c <script>.
  std::string script;
  // Working directory (the workflow file's directory); empty = inherited.
  std::string cwd;
  // Written to the attempt's stdin file, which becomes the child's stdin.
  std::string stdin_data;
  // Added to, or overriding, the inherited environment (WIZQ_* variables).
  std::vector<std::pair<std::string, std::string>> env;
  // The task's name (AttemptFiles::dir(): `<tasks dir>/<id>`); its parent,
  // the tasks directory, is created (0700, with missing parents) if needed.
  // stdout and stderr go to the attempt's files (0600),
  // AttemptFiles::InTaskDir(output_dir, attempt).
  std::string output_dir;
  int attempt = 1;
  // Attempt 1 whose claim expects no adoption (Attempt::adopt_expected
  // false: never claimed before, or given back uncharged by this process,
  // Ctrl+C, whose trees it ended): no earlier attempt is looked for or
  // adopted (the attempt's own lock is still taken, and waited for if
  // held, so an overlap cannot happen).
  bool first_claim = false;
  // Unset = no limit. The group gets SIGTERM when it elapses, then SIGKILL
  // after kill_grace_seconds.
  std::optional<double> timeout_seconds;
  double kill_grace_seconds = 2.0;
  // Only this much of stdout is read back; more sets stdout_truncated.
  size_t max_stdout_bytes = 16 << 20;
};

struct CommandResult {
  enum class Outcome {
    kExited,       // the shell exited; see exit_code
    kSignaled,     // the shell was killed by `signal`
    kTimedOut,     // killed because timeout_seconds elapsed
    kSpawnFailed,  // the process could not be started; see error
  };
  Outcome outcome = Outcome::kSpawnFailed;
  int exit_code = -1;  // when the shell exited, else -1
  int signal = 0;      // when the shell was killed by a signal, else 0
  std::string stdout_text;
  bool stdout_truncated = false;
  // Empty for exit code 0; else a readable summary ("exit code 3", "killed
  // by signal 9", "timed out after 5s") or why the spawn failed.
  std::string error;
  // From the shell's start (Start, until the spawner says it began) to its
  // end (as the spawner saw it, when it did).
  double seconds = 0;
  // Adopt(): the result is an earlier attempt's, waited for this long.
  bool adopted = false;
  double waited_seconds = 0;
  // Adopt(): that attempt died without an exit record (or by a signal), so
  // it has no result; see error.
  bool lost = false;
  // It never began: CancelWaiting() took it back, or the spawner had no
  // descriptors, memory or processes for it (the next Start then fails
  // with that environment error).
  bool cancelled = false;
};

class CommandRunner {
 public:
  using Done = std::vector<std::pair<uint64_t, CommandResult>>;

  // Every file of a task (its stdout and stderr, the journal; the previous
  // layout's running.lock and pgid) is reached through `env`, which must
  // outlive the runner.
  explicit CommandRunner(Env* env = Env::Posix());
  // Kills (SIGKILL) and reaps whatever is still running.
  ~CommandRunner();
  CommandRunner(const CommandRunner&) = delete;
  CommandRunner& operator=(const CommandRunner&) = delete;

  // Starts a command without waiting for it; `token` identifies it in Wait
  // results. A command that cannot be started (missing cwd, no /bin/sh,
  // EAGAIN) still returns OK here and is reported by the next Wait as
  // kSpawnFailed. An error Status means the output directory or its files
  // could not be prepared (nothing was started), or an earlier attempt of
  // the same task is still running and could not be ended (Busy/IOError).
  // Normally quick; blocks (at most kill_grace_seconds + 5s) only when an
  // earlier process tree of this output_dir still holds its lock.
  Status Start(const CommandSpec& spec, uint64_t token);

  // Takes over attempt `spec.attempt` of `spec.output_dir` when the worker
  // that started it is dead (docs/PROTOCOL.md, "Orphans after a crash"):
  // if its tree still runs or finished on its own with an exit record,
  // *adopted is true and Wait reports it like a command of its own
  // (CommandResult::adopted): waited for up to what is left of
  // spec.timeout_seconds since the attempt started, then its exit code and
  // stdout; if it died without an exit record while waited for, `lost`.
  // Nothing runs twice: an adopted tree is never restarted. *adopted is
  // false when there is nothing to adopt (the caller starts the attempt).
  Status Adopt(const CommandSpec& spec, uint64_t token, bool* adopted);
  // Reports attempt `spec.attempt` as lost (CommandResult::lost) at the
  // next Wait, after ending whatever is left of it.
  void ReportLost(const CommandSpec& spec, uint64_t token);
  // What an executor does with a claimed attempt: Start, unless this very
  // attempt number ran before (a dead worker started it, or this process
  // was interrupted while it ran, except attempt 1: see first_claim): then
  // Adopt what it left, or, when the
  // claim expected an adoption (`adopt_expected`: it was put back as
  // worker_lost) but the attempt began and left no result since,
  // ReportLost. *adopted: not started. Sets spec.first_claim for attempt 1
  // of a task never claimed before (no file lookups then).
  Status StartOrAdopt(CommandSpec spec, uint64_t token, bool adopt_expected,
                      bool* adopted);
  // Whether attempt `attempt` of the task named `output_dir`, started by a
  // worker that died, still runs or finished with a record: what Adopt
  // would take over (Executor::AttemptAdoptable). Thread-safe.
  static bool Adoptable(Env* env, const std::string& output_dir, int attempt);

  // Waits up to timeout_ms (0 = just look, negative = no limit) until at
  // least one started command has finished, including its timeout
  // handling, or one has begun (with set_report_begun), and appends every
  // finished one to *done. Returns at once when nothing is running. Timeouts
  // are only enforced while the caller is in Wait (or TerminateAll), so call it
  // at least every few hundred ms.
  Status Wait(int timeout_ms, Done* done);

  // Commands started and not yet returned by Wait.
  size_t running() const;

  // How many commands run at once (negative: no limit, the default; an
  // adopted attempt counts). Started beyond it, a command waits in the
  // spawner and starts as soon as another ends (tasks/proc/spawner.h), without
  // a round trip through wizq; its timeout runs from then on.
  void set_max_running(int n);
  // Gives back every command that waits and has not started: the next Wait
  // reports each with CommandResult::cancelled (it never began).
  void CancelWaiting();
  // Whether the runner tells when each command's shell began (off by
  // default): Wait then also returns when one has, and TakeBegun appends
  // the tokens of those that began since the last call (an adopted
  // attempt, already running, is not among them).
  void set_report_begun(bool on) { report_begun_ = on; }
  void TakeBegun(std::vector<uint64_t>* tokens);

  // The local deadline (tasks/proc/spawner.h; SPEC §14), in CLOCK_MONOTONIC
  // ms (0: none): past it, the spawner kills every command that runs, even
  // when wizq is frozen or gone, and starts none until a later one comes.
  // Such a command fails as killed "at this worker's local deadline".
  void set_local_deadline(int64_t mono_ms) {
    spawner_.SetDeadline(mono_ms * 1'000'000);
  }

  // Wait also returns (without reading it) when `fd` is readable; -1: none.
  void set_wake_fd(int fd) { wake_fd_ = fd; }

  // The token of the running command whose process group `pid` is in
  // (false if none): who sent wizq a signal.
  bool FindByProcess(pid_t pid, uint64_t* token) const;

  // Sends SIGTERM to every running group, SIGKILL to those still running
  // after grace_seconds, and reaps them all. Their results are dropped. Used
  // when wizq itself is interrupted.
  void TerminateAll(double grace_seconds);

 private:
  struct Child;
  struct Journal;

  // Marks children whose leader has exited; waits up to timeout_ms
  // (negative = no limit) for the first one.
  Status PollChildren(int timeout_ms);
  // Applies the spawner's events; ends what it ran when it died.
  Status ReadSpawnEvents();
  // kStarted: the shell runs (its timeout starts now).
  void Started(Child* c, pid_t pid, int64_t at_ns);
  static bool NeverStarted(const Child& c);
  // Sends the SIGTERM/SIGKILL that are due.
  void EnforceTimeouts();
  // Reaps the exited children and appends their results.
  void CollectExited(Done* done);
  // Kills what `child` left in its group, reaps it, reads its stdout.
  CommandResult Reap(const Child& child);
  CommandResult ReapAdopted(const Child& child);
  // Marks adopted attempts that finished or were lost (probes due ones).
  void ProbeAdopted(bool force);
  void AppendStderr(const Child& child, const std::string& text);
  // Until the earliest of `deadline_ns` and the next due signal; -1 = never.
  int MillisToNextEvent(int64_t deadline_ns) const;
  // The journal of the run whose task is named `task_dir`, open O_APPEND.
  Status OpenJournal(const std::string& task_dir,
                     std::shared_ptr<Journal>* journal);

  Env* const env_;
  std::vector<std::unique_ptr<Child>> children_;
  Done spawn_failures_;                             // reported by the next Wait
  std::vector<std::shared_ptr<Journal>> journals_;  // one per run directory
  std::set<std::string> checked_dirs_;  // tasks directories made and checked
  internal::Spawner spawner_;           // started on the first Start
  uint64_t last_serial_ = 0;
  Status spawn_error_;  // reported by the next Start
  int max_running_ = -1;
  uint32_t sent_limit_ = internal::SpawnRequest::kNoLimit;
  // The spawner's limit: max_running_ less the adopted attempts.
  uint32_t SpawnLimit() const;
  void UpdateLimit();
  int wake_fd_ = -1;
  bool woken_ = false;  // the wake fd was readable in the last poll
  bool report_begun_ = false;
  std::vector<uint64_t> begun_;  // started since the last TakeBegun
};

// Before a task runs again: ends or awaits the process tree that an earlier
// attempt left running in `output_dir` (the task's directory), e.g. because
// a previous wizq died (SPEC §6.3). Sends SIGTERM to the recorded group and
// to every process still holding one of the task's lock files (each
// attempt's stdout; the previous layout's `running.lock`), SIGKILL after
// grace_seconds, and waits until the lock is free. Returns OK when nothing
// of an earlier attempt is running any more (or there never was one), an
// IOError naming the directory and the pids when that takes longer than
// max_wait_seconds. Quick (one open and one flock) when nothing runs. The
// task's files are reached through `env`.
Status ReapOrphans(const std::string& output_dir, double grace_seconds,
                   double max_wait_seconds, Env* env = Env::Posix());

}  // namespace wizq

#endif  // WIZQ_TASKS_COMMAND_RUNNER_H_
