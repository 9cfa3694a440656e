// The JSON summary of a run that `wizq status --json` prints and the agent
// protocol's run_status returns: run id, status, counts, and every task
// with, while an agent's lease holds it, the agent and when the lease
// lapses. Built from the store contract's reads (queue/store.h).
#ifndef WIZQ_AGENT_RUN_STATUS_H_
#define WIZQ_AGENT_RUN_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "queue/store.h"
#include "util/status.h"

namespace wizq {

// One JSON object, no newline, in *out. `now_ms` (wall clock) gives each
// lease's lapses_in_ms. An error only if the run cannot be read.
Status RunStatusJson(StoreReads& run, int64_t now_ms, std::string* out);

// What `wizq status` adds to the object: the run's workers (Store::Workers)
// and the size of the task files. The fields only ever grow (docs/CLI.md,
// "status --json").
struct RunStatusExtras {
  std::vector<WorkerInfo> workers;  // every entry, alive or not
  // No live worker and unfinished tasks: nobody is running the run.
  bool interrupted = false;
  // How to resume it, if interrupted; "" when `wizq run` cannot (an
  // embedded run: its workflow has Function steps, only the program that
  // registers their handlers can run it).
  std::string resume_command;
  bool embedded = false;  // the workflow has Function steps
  int64_t task_output_bytes =
      -1;  // bytes of the run's task output; -1: unknown
  // Only the tasks these ids name are listed (status filters); the counts
  // stay those of the whole run. Null: every task.
  const std::vector<int64_t>* only_tasks = nullptr;
  // An archived run's key (RunRef::key; the directory store: its archive
  // directory), "" for the live run: the "archive" field.
  std::string archive_dir;
  // The Prompt tasks waiting for a person's answer (SPEC §10).
  std::vector<int64_t> waiting_prompts;
};

// RunStatusJson with `extras`: adds workers, live_workers, live_status
// (LiveStatus), interrupted, resume_command, embedded and
// task_output_bytes, waiting_prompts (and archive for an archived run).
Status RunStatusJson(StoreReads& run, int64_t now_ms,
                     const RunStatusExtras& extras, std::string* out);

// The run's status as it truly is: "interrupted" for a run nobody runs
// (extras.interrupted), "unfinished" for an archived run recorded as
// running (set aside before it finished; nothing resumes it), else the
// recorded one (RunStatusName).
const char* LiveStatus(const RunInfo& run, const RunStatusExtras& extras);

}  // namespace wizq

#endif  // WIZQ_AGENT_RUN_STATUS_H_
