// The child processes of the kill -9 torture harness (wizq_torture,
// tests/torture/torture.cc): wizq processes started and waited for, and
// the processes that hold a run's files open.
#ifndef WIZQ_TESTS_TORTURE_PROCESSES_H_
#define WIZQ_TESTS_TORTURE_PROCESSES_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace wizq::torture {

// Reaps every exited child: a wizq process Spawn started keeps its status
// for TryWait and WaitFor; orphaned task processes (we are their
// subreaper) are reaped and forgotten.
void ReapAll();

// True (and *status) if `pid`, which Spawn started, has exited.
bool TryWait(pid_t pid, int* status);

// Waits for `pid` up to `timeout`; true (and *status) if it exited.
bool WaitFor(pid_t pid, std::chrono::steady_clock::duration timeout,
             int* status);

// "exit code N", "signal N" or "status N".
std::string DescribeStatus(int status);

// Starts `args` as the leader of a new process group, stdin from /dev/null,
// stdout to /dev/null unless `out` is set, stderr appended to `err`.
pid_t Spawn(const std::vector<std::string>& args, const std::string& err,
            const std::string& out = "/dev/null");

// Runs `args` to its end (SIGKILL after `timeout`); returns its status, or
// -1 on a timeout.
int RunToEnd(const std::vector<std::string>& args, const std::string& err,
             std::chrono::steady_clock::duration timeout,
             const std::string& out = "/dev/null");

// Processes (not us) with a descriptor open on a file under one of
// `prefixes` (canonical paths).
std::vector<pid_t> ProcessesHolding(const std::vector<std::string>& prefixes);

}  // namespace wizq::torture

#endif  // WIZQ_TESTS_TORTURE_PROCESSES_H_
