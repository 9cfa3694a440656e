// The JSON summary of a run that `wizq status --json` prints and the agent
// protocol's run_status returns: run id, status, counts, and every task
// with, while an agent's lease holds it, the agent and when the lease
// lapses.
#ifndef WIZQ_AGENT_RUN_STATUS_H_
#define WIZQ_AGENT_RUN_STATUS_H_

#include <cstdint>
#include <string>

#include "queue/state.h"

namespace wizq {

// One JSON object, no newline. `now_ms` (wall clock) gives each lease's
// lapses_in_ms.
std::string RunStatusJson(const QueueState& s, int64_t now_ms);

}  // namespace wizq

#endif  // WIZQ_AGENT_RUN_STATUS_H_
