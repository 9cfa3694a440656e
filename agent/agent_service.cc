// PLACEHOLDER (scaffold for parallel work, replaced by the agents change):
// every call is refused until the lease store lands.
#include "agent/agent_service.h"

namespace wizq {
namespace {

class Unavailable : public AgentService {
 public:
  AgentReply Take(const TakeRequest&) override { return No(); }
  AgentReply Heartbeat(int64_t, const std::string&) override { return No(); }
  AgentReply Done(int64_t, const std::string&, const std::string&) override {
    return No();
  }
  AgentReply Fail(int64_t, const std::string&, const std::string&) override {
    return No();
  }
  AgentReply RunStatus() override { return No(); }

 private:
  static AgentReply No() {
    AgentReply r;
    r.exit_code = 3;
    r.message = "the agent protocol is not available in this build";
    return r;
  }
};

}  // namespace

std::unique_ptr<AgentService> AgentService::Open(const std::string&, Env*) {
  return std::make_unique<Unavailable>();
}

}  // namespace wizq
