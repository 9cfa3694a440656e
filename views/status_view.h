// Internal to `wizq status` and `wizq report` (views/status.cc,
// views/status_archived.cc, views/report.cc): one run as the views read it
// through the store contract, and its rendering, live or archived.
#ifndef WIZQ_VIEWS_STATUS_VIEW_H_
#define WIZQ_VIEWS_STATUS_VIEW_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/run_status.h"
#include "queue/store.h"
#include "views/status.h"

namespace wizq {

// What the views show of a run: its info, counts and every task, read once
// (GetRun, Counts, ListTasks) from `store`. Task ids are dense (1, 2, 3...:
// the contract), so tasks[id - 1] is task `id`.
//
// Bounded (`wizq status` without --all, --json or a filter): only what it
// prints, read in statements whose number and size do not grow with the
// run (views/status_bounded.cc): the tree's first lines, every task in
// progress, the first failed tasks and the Prompt tasks that wait.
struct RunView {
  Store* store = nullptr;  // not owned
  RunInfo run;
  RunCounts counts;
  std::vector<Task> tasks;  // in id order unless bounded

  bool bounded = false;
  std::map<int64_t, size_t> at;                // bounded: tasks[at[id]]
  std::vector<std::pair<int64_t, int>> lines;  // bounded: the tree (id, depth)
  std::vector<int64_t> failed;                 // bounded: the first failed

  const Task& Find(int64_t id) const {
    return bounded ? tasks[at.at(id)] : tasks[id - 1];
  }
  // In id order (bounded: of those read).
  std::vector<const Task*> InState(TaskState state) const;
};
Status LoadRunView(Store& store, RunView* view);
// The bounded view, with at most `max_lines` lines of the tree and of the
// failed tasks.
Status LoadBoundedRunView(Store& store, size_t max_lines, RunView* view);

// The directory that holds the task files of `run` (a RunRef of
// Store::ListRuns) of install directory `dir`: the local workspace for the
// current run; an archived run's files moved with it (the directory store
// archives them into the directory its key names). "" if none is known.
// On a database store, this machine's workspace of that run
// (LocalWorkspaceOf).
std::string TaskFilesDir(const RunPlace& place, const RunRef& run);

// The tasks the filters of `args` select, in id order; NotFound-like
// message in *error (exit 2) for a filter that names no state or step.
bool SelectTasks(const RunView& v, const StatusArgs& args,
                 std::vector<int64_t>* ids, std::string* error);

// Whether any filter is set.
bool Filtered(const StatusArgs& args);

// Prints the human status of `v`. `extras` as for RunStatusJson;
// `archive` is an archived run's key ("" for the live run).
void PrintHumanStatus(const RunView& v, const RunStatusExtras& extras,
                      const StatusArgs& args,
                      const std::vector<int64_t>& selected,
                      const std::string& archive);

// The live run `v` of `store`, in install directory `dir`: its workers as
// the store knows them, whether it is interrupted and how to resume it,
// the bytes of its task files.
RunStatusExtras LiveExtras(const RunView& v, Store& store,
                           const RunPlace& place);

// `wizq status --archived [NAME]`.
int ListArchived(const StatusArgs& args);
int ShowArchived(const StatusArgs& args);

}  // namespace wizq

#endif  // WIZQ_VIEWS_STATUS_VIEW_H_
