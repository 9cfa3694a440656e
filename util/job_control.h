// Job control for the tasks of `wizq run` (docs/CLI.md, "Signals"): the
// process groups of the running tasks, known to signal handlers, and a
// clock that does not advance while wizq is stopped (Ctrl+Z), so that task
// timeouts do not fire for the time the run was stopped.
//
// Each task runs in its own process group (led by its shell, which the
// spawner starts, tasks/proc/spawner.h), outside wizq's, so a terminal's Ctrl+Z
// reaches wizq only: StopAllAndSelf() passes it on to every registered
// group.
//
// Thread- and signal-safety: every function is async-signal-safe and may be
// called from any thread. The registry holds up to kMaxGroups groups; more
// are not registered (they are then not stopped with wizq, and a second
// Ctrl+C does not reach them; TerminateAll still ends them).
#ifndef WIZQ_UTIL_JOB_CONTROL_H_
#define WIZQ_UTIL_JOB_CONTROL_H_

#include <sys/types.h>

#include <cstdint>

namespace wizq {
namespace job_control {

constexpr int kMaxGroups = 4096;

// Registers the process group led by `pgid` (a task's shell). Call
// RemoveGroup before the leader may be reaped (the spawner reaps it once
// wizq releases it), so that a signal never reaches a reused pid.
void AddGroup(pid_t pgid);
void RemoveGroup(pid_t pgid);
// Sends `sig` to every registered group.
void SignalGroups(int sig);

// For a SIGTSTP handler: stops every registered group (SIGSTOP), stops
// wizq itself, and once continued (SIGCONT) continues the groups and adds
// the time spent stopped to StoppedNs().
void StopAllAndSelf();

// CLOCK_MONOTONIC in nanoseconds, minus the time spent stopped by
// StopAllAndSelf: the clock task timeouts are measured on.
int64_t ActiveNowNs();
// The total time spent stopped so far.
int64_t StoppedNs();

}  // namespace job_control
}  // namespace wizq

#endif  // WIZQ_UTIL_JOB_CONTROL_H_
