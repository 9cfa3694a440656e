// `wizq crashtest`, part: the child processes it drives.
//
// crashtest runs the real `wizq` binary as its child. It makes itself a
// child subreaper (PR_SET_CHILD_SUBREAPER), so when a `wizq` dies, the task
// process trees it started are re-parented to crashtest and stay reachable
// as its descendants: a power cut is then "SIGKILL every descendant and its
// process group", whatever layout the task runner uses. crashtest reaps
// every child it adopts at once (a zombie would look alive to a
// `kill(pid, 0)`).
//
// SIGCHLD, SIGINT and SIGTERM are blocked in crashtest and received with
// sigtimedwait, so waiting for a child wakes at once when it exits and
// Ctrl+C is noticed between two waits; each `wizq` runs with a clean signal
// mask and dispositions, in a process group of its own (Ctrl+C on the
// terminal reaches crashtest only, which ends the children itself).
//
// Process inspection reads /proc directly (the kernel's view of processes,
// not files of wizq's), as fs/env.h allows.
#ifndef WIZQ_TOOLS_CRASHTEST_PROC_H_
#define WIZQ_TOOLS_CRASHTEST_PROC_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace wizq::crashtest {

// Once, before the first Spawn: subreaper, blocked signals.
void InitProcessControl();

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is the program's path
  // Added to (or replacing in) crashtest's own environment.
  std::vector<std::pair<std::string, std::string>> env;
  // Are removed from the child's environment.
  std::vector<std::string> unset_env;
  std::string stdout_path;  // created or truncated, 0600
  std::string stderr_path;
};

// Starts the program with stdin from /dev/null, in its own process group.
Status Spawn(const SpawnSpec& spec, pid_t* pid);

struct ChildResult {
  bool exited = false;  // exited normally, with `code`
  int code = -1;
  int signal = 0;            // else the signal that ended it
  bool timed_out = false;    // crashtest killed it at the deadline
  bool interrupted = false;  // SIGINT/SIGTERM reached crashtest
  std::string Describe() const;
};

// Waits until `pid` (a child from Spawn) has exited, reaping every other
// child that exits meanwhile. At `deadline_ms` (milliseconds from now; 0:
// none) or on SIGINT/SIGTERM, SIGKILLs every descendant and returns with
// timed_out or interrupted set.
ChildResult WaitChild(pid_t pid, int64_t deadline_ms);

// SIGKILLs every live descendant of crashtest and each one's process group
// (never crashtest's own), again until none is left, reaping them. Returns
// how many processes were signalled.
int KillDescendants();

// What a power cut does to the attempts of the run in `install_dir` beyond
// killing them: an exit record the spawner wrote without syncing (while
// wizq lived, tasks/exec/attempt_journal.h) is lost with the page cache, so the
// attempt is lost, not adopted. Records written synced are kept. Returns
// how many records were dropped.
int DropUnsyncedExitRecords(const std::string& install_dir);

// True once SIGINT or SIGTERM has reached crashtest.
bool Interrupted();

}  // namespace wizq::crashtest

#endif  // WIZQ_TOOLS_CRASHTEST_PROC_H_
