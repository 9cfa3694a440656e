// CommandRunner's bookkeeping of one attempt it waits for: a shell its
// spawner started, or an adopted attempt of a dead worker. Internal to
// command_runner*.cc.
#ifndef WIZQ_TASKS_COMMAND_RUNNER_CHILD_H_
#define WIZQ_TASKS_COMMAND_RUNNER_CHILD_H_

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tasks/proc/command_runner.h"
#include "tasks/proc/orphans_record.h"
#include "tasks/proc/posix_util.h"

namespace wizq {

struct CommandRunner::Child {
  uint64_t token = 0;
  uint64_t serial = 0;  // the spawner's name for it (tasks/proc/spawner.h)
  // The shell, which leads the process group (0 until the spawner has
  // started it); for an adopted attempt the recorded leader if it was
  // still alive at adoption, else 0.
  pid_t pid = -1;
  bool exited = false;     // ready to be reaped (adopted: finished or lost)
  int signalled = 0;       // TerminateAll's last signal to it (-1: cancelled)
  pid_t spawner_died = 0;  // the spawner that died before it ended
  int attempt = 1;
  std::string cwd;
  std::string output_dir;
  std::string stdout_path;
  size_t max_stdout_bytes = 0;
  int64_t start_ns = 0;
  int64_t end_ns =
      0;  // when the shell ended (the spawner's kEnded); 0: unknown
  int64_t term_ns = internal::kNever;  // when SIGTERM is due (the timeout)
  int64_t kill_ns = internal::kNever;  // when SIGKILL is due
  bool has_timeout = false;
  double timeout_seconds = 0;
  double grace_seconds = 0;
  bool timed_out = false;
  bool past_deadline = false;  // the spawner killed it at the local deadline
  // Adoption (CommandRunner::Adopt).
  bool adopted = false;
  bool lost = false;         // died without an exit record
  bool never_began = false;  // no start record, and its lock let go
  int64_t next_probe_ns = 0;
  // How it ended: the spawner's kEnded, or an adopted attempt's record.
  internal::AttemptRecord end;
};

namespace internal {

constexpr const char kCommandShell[] = "/bin/sh";

// The descriptors a child starts with. All are O_CLOEXEC and above 2 here.
// `out` is also the lock the tree holds (flocked before the fork).
struct ChildFds {
  ScopedFd in, out, err;
};

// Opens the attempt's stdout and takes its lock, after ending whatever an
// earlier tree of the task (or of this very attempt, started by a worker
// that died) left running; then its stderr and stdin
// (command_runner_files.cc).
Status OpenChildFds(Env* env, const CommandSpec& spec, ChildFds* fds);
// What the spawner starts for `spec`: /bin/sh -c script, leading its own
// process group, with the environment and the descriptors of `fds`.
SpawnPlan PlanOf(const CommandSpec& spec, const ChildFds& fds, int journal,
                 uint64_t serial);

// Shared by command_runner.cc and command_runner_adopt.cc.
void ReadStdoutInto(Env* env, const std::string& path, size_t max,
                    CommandResult* result);
void DescribeEnd(const AttemptRecord& rec, bool timed_out, double timeout,
                 CommandResult* result);

}  // namespace internal
}  // namespace wizq

#endif  // WIZQ_TASKS_COMMAND_RUNNER_CHILD_H_
