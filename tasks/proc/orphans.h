// Identifying a task's process tree across a wizq crash (SPEC §6.3).
//
// Every process tree CommandRunner starts holds an exclusive flock on the
// attempt's stdout file through an inherited descriptor, and the run's
// attempt journal records the leader as "<pid> <start time> <boot id>"
// (tasks/exec/attempt_journal.h; the previous layout: the task's `running.lock`
// and `pgid`, AttemptFiles in tasks/exec/attempt_files.h).
// When wizq dies, the tree keeps the lock; these helpers find it again: the
// recorded leader, if that very process is still alive, and every process
// that still holds the lock (a /proc scan). ReapOrphans, declared in
// tasks/proc/command_runner.h next to CommandRunner, is defined in orphans.cc.
//
// The task's files (its stdout files, the journal) are reached through an Env;
// the /proc scan is process inspection (the kernel's view of other processes,
// not wizq's files) and stays raw system calls, as fs/env.h allows.
//
// Internal to tasks/: used by command_runner.cc and orphans.cc.
#ifndef WIZQ_TASKS_ORPHANS_H_
#define WIZQ_TASKS_ORPHANS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "fs/env.h"

namespace wizq::internal {

// Other processes with a descriptor open for writing on `file` (its device
// and inode; scans /proc): the processes of an attempt's tree hold its
// stdout file so, whereas a wizq reading it or probing its lock holds it
// read-only and must never be taken for one of them (and signalled).
std::vector<pid_t> FileHolders(const FileInfo& file);

// Signals each process and its process group (never wizq's own group: a
// task could only be in it by moving there itself).
void SignalOrphans(const std::vector<pid_t>& pids, int sig);

}  // namespace wizq::internal

#endif  // WIZQ_TASKS_ORPHANS_H_
