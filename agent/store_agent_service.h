// The agent service on the store contract (agent/agent_service.h),
// internal to agent/: its calls are defined in agent_service.cc (opening
// the run, take, status) and agent_lease.cc (what a lease's holder does:
// heartbeat, done, fail, release).
#ifndef WIZQ_AGENT_STORE_AGENT_SERVICE_H_
#define WIZQ_AGENT_STORE_AGENT_SERVICE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent_service.h"
#include "fs/env.h"
#include "queue/run_place.h"
#include "queue/store.h"
#include "tasks/workflow/workflow.h"

namespace wizq {

class StoreAgentService : public AgentService {
 public:
  StoreAgentService(RunPlace place, Env* env)
      : place_(std::move(place)),
        dir_(place_.dir),
        env_(env != nullptr ? env : Env::Posix()) {}

  AgentReply Take(const TakeRequest& request) override;
  AgentReply Heartbeat(int64_t task_id, const std::string& lease) override;
  AgentReply Done(int64_t task_id, const std::string& lease,
                  const std::string& response) override;
  AgentReply Fail(int64_t task_id, const std::string& lease,
                  std::string_view reason, const std::string& message) override;
  AgentReply Release(int64_t task_id, const std::string& lease) override;
  AgentReply RunStatus() override;
  std::string workspace() const override { return workspace_; }

 private:
  static AgentReply Reply(int code, std::string json, std::string message = "");
  static AgentReply EnvError(const Status& s);
  // EnvError, but invalid input (exit 2) for what opening the run refuses
  // as InvalidArgument: a store location libpq cannot read.
  static AgentReply OpenError(const Status& s);
  int64_t NowMs() const {
    return static_cast<int64_t>(env_->NowMicros() / 1000);
  }
  std::string InstallDir() const;
  Status OpenRun(std::unique_ptr<Store>* store, bool* finished);
  Status Thaw(const RunInfo& run);
  const Step* PoolStepOf(const Task& t) const;
  int64_t LeaseMs(const std::string& step) const;
  Status PoolFilter(const TakeRequest& request, ClaimFilter* filter) const;
  Status Look(Store& store, const ClaimFilter& filter, bool* worth,
              int64_t* wake_ms);
  Status Settle(StoreTxn& txn);
  void ReapLost(const std::vector<int64_t>& ids);
  Status TryTake(Store& store, const ClaimFilter& filter, std::string* payload,
                 int64_t* lease_from, wizq::RunStatus* status);
  AgentReply WithLease(
      int64_t task_id, const std::string& lease, const char* what,
      const std::function<Status(StoreTxn&, const Task&, AgentReply*)>& fn);
  AgentReply WithLeaseOn(
      Store* store, bool finished, int64_t task_id, const std::string& lease,
      const char* what,
      const std::function<Status(StoreTxn&, const Task&, AgentReply*)>& fn);

  const RunPlace place_;
  const std::string dir_;
  std::string workspace_;  // of the run of the last task taken
  Env* const env_;
  std::string frozen_;  // the workflow text `workflow_` was thawed from
  std::unique_ptr<Workflow> workflow_;
};

}  // namespace wizq

#endif  // WIZQ_AGENT_STORE_AGENT_SERVICE_H_
