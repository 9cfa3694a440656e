// `wizq status`: a truthful, read-only view of a run — a summary line with
// the counts first, whether any worker is alive (an unfinished run that no
// live worker runs is `interrupted`, with the command that resumes it), the
// waiting prompts and leased tasks, and the task tree (or the tasks a
// filter selects); `--json` is agent/run_status.h's object with the
// workers and the file sizes added. `--archived` lists the runs set aside
// (Store::ListRuns), `--archived NAME` shows one of them.
//
// It writes nothing: it works on a read-only copy of a run.
#ifndef WIZQ_CLI_STATUS_H_
#define WIZQ_CLI_STATUS_H_

#include <cstddef>
#include <string>

#include "queue/run_place.h"

namespace wizq {

// How many lines of the task tree `wizq status` prints without --all.
inline constexpr size_t kTreeLines = 50;

struct StatusArgs {
  RunPlace place;  // --dir, --store, --schema, --run-id
  bool json = false;
  bool failed = false;        // only failed tasks
  std::string state;          // only tasks in this state ("" = any)
  std::string step;           // only tasks of this step ("" = any)
  bool all = false;           // the whole tree (else its first kTreeLines)
  bool archived = false;      // --archived given
  std::string archived_name;  // its value: one archived run ("" = list)
};

// Prints the status; returns the exit code (0; 2 no run or a bad filter;
// 3 an unreadable run).
int DoStatus(const StatusArgs& args);

class StoreReads;

// The tasks of the run that wait for an answer, each with its prompt and
// the command that answers it (nothing if none, or if the run cannot be
// read): `wizq status` (views/waiting_prompts.cc).
void PrintWaitingPrompts(StoreReads& run, const RunPlace& place);

}  // namespace wizq

#endif  // WIZQ_CLI_STATUS_H_
