// `wizq log`: the audit log, readably (times, not epoch ms) or raw. `wizq
// status` is cli/status.h, `wizq log --table` cli/log_table.h.
#ifndef WIZQ_CLI_INSPECT_H_
#define WIZQ_CLI_INSPECT_H_

#include <cstdint>
#include <string>

namespace wizq {

// Prints the audit log readably, only one task's events if task_id > 0.
int PrintLog(const std::string& install_dir, int64_t task_id, bool json);

}  // namespace wizq

#endif  // WIZQ_CLI_INSPECT_H_
