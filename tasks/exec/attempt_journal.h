// The attempt journal: where every attempt's start and end are recorded,
// one append-only file per run (`.wizard/tasks/attempts.journal`,
// AttemptFiles::JournalPath), instead of a `pgid` file per task.
//
// Two lines per attempt, each with one write(2) to a descriptor opened
// O_APPEND (a single small append to a local file is never interleaved
// with another's): the start line by the attempt's own process, in the
// spawner's vfork child just before it execs the shell, and the end line
// by the spawner once the shell has exited (tasks/proc/spawner.h):
//
//   start <key> <attempt> <pid> <start ticks> <boot id> <start wall ms>\n
//   end <key> <attempt> <pid> exit|signal|spawn <value> <synced 0|1>\n
//
// <key> is the task's key (AttemptFiles::TaskKey), <pid> the shell's
// (= the process group's; in lines of older wizq versions, the per-attempt
// supervisor's, which led the group then), <start ticks> its start time in
// clock ticks after boot, as /proc/<pid>/stat says. An end line belongs
// to the start line with the same key, attempt and pid. A line that does
// not parse (a torn write after a power cut) is skipped. The journal is
// never rewritten; it goes with the run when the run is archived.
//
// Internal to tasks/.
#ifndef WIZQ_TASKS_ATTEMPT_JOURNAL_H_
#define WIZQ_TASKS_ATTEMPT_JOURNAL_H_

#include <string>
#include <string_view>

#include "fs/env.h"
#include "tasks/proc/orphans_record.h"

namespace wizq::internal {

// One parsed line. For a start line `record` has pid, start, boot_id,
// attempt and start_wall_ms; for an end line pid, attempt, ended, end,
// value and synced.
struct JournalLine {
  bool is_end = false;
  std::string key;
  AttemptRecord record;
};
bool ParseJournalLine(std::string_view line, JournalLine* out);

// The latest attempt of task `key` that the journal `path` records a start
// of, with its end line if there is one. False if none (or no journal).
// Reads only what was appended since the last call for the same journal
// (a process-wide cache, keyed by the journal's inode). Thread-safe.
bool LatestJournalAttempt(Env* env, const std::string& path,
                          const std::string& key, AttemptRecord* record);

}  // namespace wizq::internal

#endif  // WIZQ_TASKS_ATTEMPT_JOURNAL_H_
