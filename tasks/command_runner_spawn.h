// Starting an attempt under its supervisor (tasks/orphans_record.h): the
// process that lets a task's tree finish, and its exit status be recorded,
// when the wizq that started it is gone. Internal to tasks/: used by
// command_runner.cc.
#ifndef WIZQ_TASKS_COMMAND_RUNNER_SPAWN_H_
#define WIZQ_TASKS_COMMAND_RUNNER_SPAWN_H_

#include <sys/types.h>

namespace wizq::internal {

// Everything the supervisor needs, prepared before the fork: after it, the
// child runs only async-signal-safe code (wizq has other threads).
struct SupervisorPlan {
  const char* shell = nullptr;  // "/bin/sh"
  char* const* argv = nullptr;  // {"sh", "-c", script, nullptr}
  char* const* envp = nullptr;
  const char* cwd = nullptr;  // nullptr: inherited
  // Open descriptors of wizq (all above 2, O_CLOEXEC): the attempt's stdin
  // (a memfd or pipe), its stdout and stderr files, the lock (stdout's own
  // descriptor, already flocked: the same open file as `out`) and the
  // run's attempt journal (O_APPEND, tasks/attempt_journal.h).
  int in = -1, out = -1, err = -1, lock = -1, record = -1;
  const char* key = "";  // the task's key in the journal
  int attempt = 1;
  const char* boot_id = "";
};

// Forks the supervisor. In it: its own process group (it leads it), stdio
// from the plan, the lock at descriptor 3 (inherited by the whole tree),
// every other descriptor closed, SIGINT/SIGTERM/SIGHUP ignored by it and
// default for the shell, the journal's start line appended, then
// vfork+exec of the shell, waitpid, the end line (synced when wizq is gone
// by then) and exit 0. Returns 0 and *pid (the supervisor = the process
// group), or fork's errno.
int ForkSupervisor(const SupervisorPlan& plan, pid_t* pid);

}  // namespace wizq::internal

#endif  // WIZQ_TASKS_COMMAND_RUNNER_SPAWN_H_
