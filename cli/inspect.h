// `wizq status` and `wizq log`: read-only views of a run's state.
#ifndef WIZQ_CLI_INSPECT_H_
#define WIZQ_CLI_INSPECT_H_

#include <cstdint>
#include <string>

namespace wizq {

// Prints the run summary and task tree (or JSON); returns the exit code.
int PrintStatus(const std::string& install_dir, bool json);
// Prints the audit log readably, only one task's events if task_id > 0.
int PrintLog(const std::string& install_dir, int64_t task_id, bool json);

}  // namespace wizq

#endif  // WIZQ_CLI_INSPECT_H_
