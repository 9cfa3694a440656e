#include "tasks/workflow/run_rules.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tasks/workflow/response.h"

namespace wizq {

int64_t RetryDelayMs(int attempts) {
  int64_t ms = 100;
  for (int i = 1; i < attempts && ms < 5000; i++) ms *= 2;
  return std::min<int64_t>(ms, 5000);
}

std::string IdempotencyKey(const std::string& run_id, int64_t run_started_ms,
                           const Task& task) {
  std::string key = run_id + "-" + std::to_string(run_started_ms) + "-" +
                    std::to_string(task.id);
  if (task.generation > 1) key += "-g" + std::to_string(task.generation);
  return key;
}

Status SubmitDueHooks(StoreTxn& txn, const Workflow& wf) {
  std::vector<Task> due;
  WIZQ_RETURN_IF_ERROR(txn.DueHooks(SIZE_MAX, &due));
  for (const Task& owner : due) {
    int64_t id = 0;
    bool dup = false;
    WIZQ_RETURN_IF_ERROR(txn.Submit(FinallyHookOf(wf, owner), &id, &dup));
  }
  return Status::OK();
}

Status SettleRun(StoreTxn& txn, const Workflow& wf, int64_t duration_ms,
                 const std::function<void()>& before_finish) {
  RunInfo run;
  WIZQ_RETURN_IF_ERROR(txn.GetRun(&run));
  if (run.status != RunStatus::kRunning) return Status::OK();
  WIZQ_RETURN_IF_ERROR(SubmitDueHooks(txn, wf));
  RunCounts counts;
  WIZQ_RETURN_IF_ERROR(txn.Counts(&counts));
  if (!counts.all_settled) return Status::OK();
  if (before_finish) before_finish();
  RunStatus status;
  return txn.FinishIfSettled(duration_ms, &status);
}

}  // namespace wizq
