// `wizq log --table`: one row per attempt, like GNU parallel's --joblog —
// task, step, value, worker, start, duration, and the exit code or the
// reason it ended — read from the audit log (queue/history.h). `--json`
// prints one JSON object per attempt (NDJSON; fields in docs/CLI.md).
#ifndef WIZQ_CLI_LOG_TABLE_H_
#define WIZQ_CLI_LOG_TABLE_H_

#include <cstdint>
#include <string>

#include "queue/run_place.h"

namespace wizq {

struct AttemptRecord;

// Prints the table (only task `task_id`'s attempts if > 0); returns the
// exit code (0; 2 no run; 3 an unreadable log).
int PrintLogTable(const RunPlace& place, int64_t task_id, bool json);

// What ended the attempt, for people: "ok", "exit 3", "worker_lost
// (refunded)", "running", ... (also the report's tooltips).
std::string AttemptResultText(const AttemptRecord& a);
// The exit code of a failed attempt whose reason is exit_code, else -1.
int AttemptExitCode(const AttemptRecord& a);

}  // namespace wizq

#endif  // WIZQ_CLI_LOG_TABLE_H_
