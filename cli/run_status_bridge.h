// RunStatusBridge: the QueueState forms of agent/run_status.h (RunStatusJson,
// LiveStatus) and cli/answer.h (PrintWaitingPrompts), for the views that
// hold a run only through the store contract (queue/store.h).
//
// Temporary, and the one file of the views that names QueueState: those
// functions belong to the agent side, which takes StoreReads& on its own
// branch (mig-agent). Once it lands, the views call them with their
// Store and this file goes. Until then the state they need is replayed from
// the run's events (Store::ReadEvents), so it works on any store.
#ifndef WIZQ_CLI_RUN_STATUS_BRIDGE_H_
#define WIZQ_CLI_RUN_STATUS_BRIDGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/run_status.h"
#include "queue/store.h"

namespace wizq {

class RunStatusBridge {
 public:
  // Replays the events of `store`'s run. Corruption if one does not apply.
  static Status Load(Store& store, std::unique_ptr<RunStatusBridge>* out);
  ~RunStatusBridge();

  std::string Json(int64_t now_ms, const RunStatusExtras& extras) const;
  const char* LiveStatus(const RunStatusExtras& extras) const;
  void PrintWaitingPrompts(const std::string& dir) const;

  // The store's workers as RunStatusExtras::workers holds them.
  static void SetWorkers(const std::vector<WorkerInfo>& workers,
                         RunStatusExtras* extras);

 private:
  explicit RunStatusBridge(std::unique_ptr<QueueState> state);
  std::unique_ptr<QueueState> state_;
};

}  // namespace wizq

#endif  // WIZQ_CLI_RUN_STATUS_BRIDGE_H_
