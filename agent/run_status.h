// The JSON summary of a run that `wizq status --json` prints and the agent
// protocol's run_status returns: run id, status, counts, and every task
// with, while an agent's lease holds it, the agent and when the lease
// lapses.
#ifndef WIZQ_AGENT_RUN_STATUS_H_
#define WIZQ_AGENT_RUN_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "queue/state.h"
#include "queue/workers.h"

namespace wizq {

// One JSON object, no newline. `now_ms` (wall clock) gives each lease's
// lapses_in_ms.
std::string RunStatusJson(const QueueState& s, int64_t now_ms);

// What `wizq status` adds to the object: the worker registry as probed
// (queue/workers.h) and the size of the task files. The fields only ever
// grow (docs/CLI.md, "status --json").
struct RunStatusExtras {
  std::vector<WorkerEntry> workers;  // every entry, alive or not
  // No live worker and unfinished tasks: nobody is running the run.
  bool interrupted = false;
  // How to resume it, if interrupted; "" when `wizq run` cannot (an
  // embedded run: its workflow has Function steps, only the program that
  // registers their handlers can run it).
  std::string resume_command;
  bool embedded = false;           // the workflow has Function steps
  int64_t task_output_bytes = -1;  // bytes under .wizard/tasks; -1: unknown
  // Only the tasks these ids name are listed (status filters); the counts
  // stay those of the whole run. Null: every task.
  const std::vector<int64_t>* only_tasks = nullptr;
  // An archived run's directory (`.wizard/archive/<name>`), "" for the live
  // run: the "archive" field.
  std::string archive_dir;
  // The Prompt tasks waiting for a person's answer (SPEC §10).
  std::vector<int64_t> waiting_prompts;
};

// RunStatusJson with `extras`: adds workers, live_workers, live_status
// (LiveStatus), interrupted, resume_command, embedded and
// task_output_bytes, waiting_prompts (and archive for an archived run).
std::string RunStatusJson(const QueueState& s, int64_t now_ms,
                          const RunStatusExtras& extras);

// The run's status as it truly is: "interrupted" for a run nobody runs
// (extras.interrupted), "unfinished" for an archived run recorded as
// running (set aside before it finished; nothing resumes it), else the
// recorded one (RunStatusName).
const char* LiveStatus(const QueueState& s, const RunStatusExtras& extras);

}  // namespace wizq

#endif  // WIZQ_AGENT_RUN_STATUS_H_
