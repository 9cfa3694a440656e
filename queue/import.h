// RunImport: a fresh run whose tasks start in given states.
//
// A run another tool began (a Barnum state log, interop/) is continued by
// wizq as a fresh run whose first batch records every task as it stood:
// submitted, then, for each task that already ran, its attempts as
// ordinary events (task_claimed + task_failed for each failed attempt,
// task_claimed + task_completed for the one that succeeded), by the worker
// kImportWorker ("import": no wizq worker ran them), task by task
// in the order the source finished them (ImportedTask::order). So a
// finally hook that ran before a task beneath its owner completed is
// stale, as it would be in a wizq run (Task::hook_stale), and runs again
// once the subtree settles. Several hooks of one owner are its
// generations, in id order. `wizq
// status`, `wizq log`, resume and export then need nothing special. The
// batch is written with run_started and run_imported, in one commit: a
// crash leaves either no run or the whole import. An import of no task
// is a run finished at once (run_finished, completed).
//
// Set QueueOptions::import to import; it replaces initial_tasks. Nothing
// here knows the source's format.
#ifndef WIZQ_QUEUE_IMPORT_H_
#define WIZQ_QUEUE_IMPORT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "queue/events.h"
#include "queue/task.h"
#include "util/status.h"

namespace wizq {

// One failed attempt of an imported task.
struct ImportedFailure {
  std::string reason;  // kReasonTimeout, kReasonInvalidResponse, ...
  std::string message;
};

// One task of an imported run. Its id is its position in RunImport::tasks
// plus one (ids 1, 2, 3, ...); parent_id and finally_for refer to earlier
// tasks.
struct ImportedTask {
  NewTask task;
  TaskState state = TaskState::kPending;  // kPending, kDone or kFailed
  // Every failed attempt, in order. kPending: the attempts already spent
  // (each retried); kFailed: at least one, the last one final; kDone: the
  // failures before the attempt that succeeded.
  std::vector<ImportedFailure> failures;
  // kDone: the ids the successful attempt spawned (as task_completed lists
  // them; children attach through their parent_id).
  std::vector<int64_t> spawned;
  // Where the source finished the task (e.g. its log line): attempts are
  // staged in this order, ties (and 0, unknown) by id.
  int64_t order = 0;
};

struct RunImport {
  std::string source;  // recorded in run_imported
  std::vector<ImportedTask> tasks;
  // The source's own classification, recorded in run_imported.
  int64_t tasks_pending = 0;
  int64_t tasks_waiting = 0;
  int64_t tasks_done = 0;
};

// Checks what the queue requires of an import (ids refer to earlier tasks,
// a Finally task names its owner, states and attempts consistent, inputs
// are JSON). InvalidArgument naming the task.
Status ValidateImport(const RunImport& import);

// Stages run_imported and the tasks' events on a fresh run (internal to
// the stores: DirQueue::StartFresh and PgStore::StartFresh call it), each
// through `sink` (`now_ms`: the store's clock). REQUIRES: run_started
// staged, no task yet.
Status StageImport(const RunImport& import, int64_t now_ms,
                   const EventSink& sink);

}  // namespace wizq

#endif  // WIZQ_QUEUE_IMPORT_H_
