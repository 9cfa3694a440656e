// The attempt record: how an attempt's exit status outlives the wizq that
// started it, and how a later worker judges an attempt it finds (adoption,
// docs/PROTOCOL.md "Orphans after a crash").
//
// Every attempt is started by a spawner (tasks/proc/spawner.h), one small
// process per CommandRunner: it vforks, and its child, which becomes
// `/bin/sh -c <script>`, leads a process group of its own, appends the
// attempt's start line to the run's journal (tasks/exec/attempt_journal.h) and
// execs; the shell and everything it starts inherit the attempt's lock
// (its stdout file). Once the shell has exited, the spawner appends its end
// line (`exit <code>`, `signal <number>` or `spawn <errno>`: the shell
// could not be started), and only then reaps it: a zombie leader means the
// end line is coming. When wizq is gone by then, nobody else will record
// the result, so the spawner syncfs'es stdout's filesystem (its data and
// name), appends the line with synced=1 and fdatasyncs the journal: a
// record from an earlier boot is trusted only with synced=1 (a power cut
// may have kept the record but lost stdout). Records of older wizq
// versions, whose per-attempt supervisor (a fork of wizq) led the group
// and wrote them, are read and judged the same way.
//
// The previous layout kept the same record in the task directory's `pgid`
// file, rewritten by every attempt (ParseAttemptRecord reads it):
//
//   <pid> <start ticks> <boot id> <attempt> <start wall ms>\n   at start
//   end <attempt> exit|signal|spawn <value> <synced 0|1>\n       at the end
//
// (wizq versions before adoption wrote only the first three fields.) The
// functions below read the journal first, then `pgid`.
// Once the shell runs, the spawner holds no copy of the lock; whatever the
// shell left running keeps it until the live wizq (or an adopter) kills it.
// A spawner killed on its own leaves running shells without an end line:
// a live wizq fails them and ends their trees; otherwise they are lost.
//
// Internal to tasks/.
#ifndef WIZQ_TASKS_ORPHANS_RECORD_H_
#define WIZQ_TASKS_ORPHANS_RECORD_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "fs/env.h"

namespace wizq::internal {

struct AttemptRecord {
  pid_t pid = 0;                 // the leader of the process group
  unsigned long long start = 0;  // its start time, clock ticks after boot
  std::string boot_id;
  int attempt = 0;            // 0: a record of an older wizq
  int64_t start_wall_ms = 0;  // 0: unknown
  bool ended = false;         // the second line is there
  enum class End { kExit, kSignal, kSpawn } end = End::kExit;
  int value = 0;  // exit code, signal or errno
  bool synced = false;
};

// Parses the record's text; false if not even the first line parses.
bool ParseAttemptRecord(std::string_view text, AttemptRecord* record);

// The boot id of this machine ("" if unknown).
const std::string& CurrentBootId();

// Whether attempt `attempt`'s shell started (the task's latest start
// record names the attempt) or something holds the attempt's lock (a tree,
// or the spawner while the attempt waits in its queue). False when wizq
// died after creating the attempt's files but before the spawner had them,
// or when the spawner dropped the queued attempt once wizq was gone.
bool AttemptBegan(Env* env, const std::string& task_dir, int attempt);

// What a later worker finds of attempt `attempt` of the task whose
// directory is `task_dir`, when the worker that started it is dead.
enum class OrphanState {
  kRunning,   // its tree still runs (lock held, or the leader alive or a
              // zombie: its end line is coming)
  kFinished,  // its shell exited on its own and the exit code is recorded
  kLost,      // died without an exit record (killed, power cut, reboot),
              // was killed by a signal, never started its shell, or was
              // started by a wizq that kept no record
};
// Reads the record and tests the lock. *record (may be null) gets what was
// read.
OrphanState ProbeOrphan(Env* env, const std::string& task_dir, int attempt,
                        AttemptRecord* record);

}  // namespace wizq::internal

#endif  // WIZQ_TASKS_ORPHANS_RECORD_H_
