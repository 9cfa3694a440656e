#include "cli/run_status_bridge.h"

#include "cli/answer.h"
#include "queue/state.h"

namespace wizq {

RunStatusBridge::RunStatusBridge(std::unique_ptr<QueueState> state)
    : state_(std::move(state)) {}

RunStatusBridge::~RunStatusBridge() = default;

Status RunStatusBridge::Load(Store& store,
                             std::unique_ptr<RunStatusBridge>* out) {
  auto state = std::make_unique<QueueState>();
  std::vector<EventRecord> page;
  const size_t kPage = 1 << 16;
  do {
    WIZQ_RETURN_IF_ERROR(store.ReadEvents(state->last_seq(), kPage, &page));
    for (const EventRecord& rec : page) {
      WIZQ_RETURN_IF_ERROR(state->ApplyEvent(rec.line));
    }
  } while (page.size() == kPage);
  out->reset(new RunStatusBridge(std::move(state)));
  return Status::OK();
}

std::string RunStatusBridge::Json(int64_t now_ms,
                                  const RunStatusExtras& extras) const {
  return RunStatusJson(*state_, now_ms, extras);
}

const char* RunStatusBridge::LiveStatus(const RunStatusExtras& extras) const {
  return wizq::LiveStatus(*state_, extras);
}

void RunStatusBridge::PrintWaitingPrompts(const std::string& dir) const {
  wizq::PrintWaitingPrompts(*state_, dir);
}

void RunStatusBridge::SetWorkers(const std::vector<WorkerInfo>& workers,
                                 RunStatusExtras* extras) {
  extras->workers.clear();
  for (const WorkerInfo& w : workers) {
    extras->workers.push_back({w.id, w.run_id, w.pid, w.started_ms, w.alive});
  }
}

}  // namespace wizq
