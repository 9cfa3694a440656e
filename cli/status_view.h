// Internal to `wizq status` (cli/status.cc, cli/status_archived.cc): the
// rendering of one run's state, live or archived.
#ifndef WIZQ_CLI_STATUS_VIEW_H_
#define WIZQ_CLI_STATUS_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "agent/run_status.h"
#include "cli/status.h"
#include "queue/state.h"

namespace wizq {

// The tasks the filters of `args` select, in id order; NotFound-like
// message in *error (exit 2) for a filter that names no state or step.
bool SelectTasks(const QueueState& st, const StatusArgs& args,
                 std::vector<int64_t>* ids, std::string* error);

// Whether any filter is set.
bool Filtered(const StatusArgs& args);

// Prints the human status of `st`. `extras` as for RunStatusJson;
// `dir` is the directory the user named (for the commands shown);
// `archive` is an archived run's directory ("" for the live run).
void PrintHumanStatus(const QueueState& st, const RunStatusExtras& extras,
                      const StatusArgs& args,
                      const std::vector<int64_t>& selected,
                      const std::string& archive);

// The live run `st` in install directory `dir`: its workers as the registry
// says (probed without writing), whether it is interrupted and how to
// resume it, the bytes of its task files.
RunStatusExtras LiveExtras(const QueueState& st, const std::string& dir);

// `wizq status --archived [NAME]`.
int ListArchived(const StatusArgs& args);
int ShowArchived(const StatusArgs& args);

}  // namespace wizq

#endif  // WIZQ_CLI_STATUS_VIEW_H_
