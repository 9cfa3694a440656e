// The agent protocol on a run's directory (agent/agent_service.h, SPEC §9):
// leases that lapse (on a clock the test moves), attempts counted at claim
// and recorded as started,
// late calls of a lapsed holder refused without changing anything, agents
// that keep vanishing, every kind of invalid response, take on a finished
// run, and take --wait woken by another worker's completion.
#include "agent/agent_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "fs/env.h"
#include "queue/dir/queue.h"
#include "tasks/workflow/response.h"
#include "tasks/workflow/workflow.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using Json = nlohmann::json;

// The POSIX Env on a clock the test can move forward.
class ClockEnv : public EnvWrapper {
 public:
  ClockEnv() : EnvWrapper(Env::Posix()) {}
  uint64_t NowMicros() override { return target()->NowMicros() + offset_us_; }
  void Advance(double seconds) {
    offset_us_ += static_cast<uint64_t>(seconds * 1e6);
  }

 private:
  std::atomic<uint64_t> offset_us_{0};
};

// Review (Pool) may spawn A (with a schema) or B (without one); A and B
// are Commands nobody runs here.
constexpr const char* kWorkflow = R"({
  "entrypoint": "Review",
  "options": {"max_retries": 1, "lease": 60},
  "steps": [
    {"name": "Review", "action": {"kind": "Pool", "instructions": "Look."},
     "next": ["A", "B"]},
    {"name": "A", "action": {"kind": "Command", "script": "true"},
     "value_schema": {"type": "object", "required": ["n"],
                      "properties": {"n": {"type": "integer"}}}},
    {"name": "B", "action": {"kind": "Command", "script": "true"}}
  ]})";

class AgentServiceTest : public ::testing::Test {
 protected:
  // Starts a run of `workflow` (its entrypoint task pending) and leaves it,
  // as a `wizq run` that stopped would.
  void StartRun(const std::string& workflow = kWorkflow) {
    std::unique_ptr<Workflow> wf;
    ASSERT_TRUE(Workflow::Parse(workflow, "wf", &wf).ok());
    QueueOptions o;
    o.env = &env_;
    o.install_dir = dir_.path();
    o.run_id = "rtest";
    o.workflow_json = wf->frozen_json();
    o.initial_tasks.push_back(RootTask(*wf, "{}"));
    std::unique_ptr<Queue> q;
    ASSERT_TRUE(Queue::Open(o, &q, nullptr).ok());
    ASSERT_TRUE(q->Close().ok());
    svc_ = AgentService::Open(dir_.path(), &env_);
  }

  Json Take(const std::string& agent, int want_code = 0) {
    TakeRequest r;
    r.agent = agent;
    const AgentReply reply = svc_->Take(r);
    EXPECT_EQ(reply.exit_code, want_code) << reply.message << reply.json;
    return Json::parse(reply.json, nullptr, false);
  }

  Json Status() {
    const AgentReply r = svc_->RunStatus();
    EXPECT_EQ(r.exit_code, 0) << r.message;
    return Json::parse(r.json);
  }
  Json TaskOf(int64_t id) { return Status()["tasks"][id - 1]; }
  std::string Log() { return test::ReadAll(dir_.Join(".wizard/audit.jsonl")); }

  test::ScratchDir dir_;
  ClockEnv env_;
  std::unique_ptr<AgentService> svc_;
};

TEST_F(AgentServiceTest, TakeGivesThePayloadOfSpec9) {
  StartRun();
  const Json p = Take("claude");
  EXPECT_EQ(p["task"], Json::parse(R"({"kind":"Review","value":{}})"));
  EXPECT_TRUE(p["timeout_seconds"].is_null());
  EXPECT_EQ(p["task_id"], 1);
  EXPECT_EQ(p["attempt"], 1);
  EXPECT_EQ(p["lease"].get<std::string>().size(), 32u);
  EXPECT_EQ(p["lease_seconds"], 60);
  EXPECT_EQ(p["run_id"], "rtest");
  EXPECT_FALSE(p["idempotency_key"].get<std::string>().empty());
  EXPECT_NE(p["instructions"].get<std::string>().find("# Current Step: Review"),
            std::string::npos);
  const Json t = TaskOf(1);
  EXPECT_EQ(t["state"], "in_progress");
  EXPECT_EQ(t["lease"]["agent"], "claude");
  // A 60 s lease, read back a few milliseconds (or none) after it began.
  const int64_t lapses_in = t["lease"]["lapses_in_ms"].get<int64_t>();
  EXPECT_GT(lapses_in, 50000);
  EXPECT_LE(lapses_in, 60000);
  // Nothing else to take.
  EXPECT_EQ(Take("other", 5), Json::parse(R"({"status":"idle"})"));
}

// The lease tests of issue 10: an agent that stops heartbeating loses its
// task after the lease lapses, the attempt is counted, a second agent takes
// and completes it, and the first agent's late done and heartbeat exit 3
// and change nothing.
TEST_F(AgentServiceTest, LapsedLeaseGoesToASecondAgentAndTheFirstIsRefused) {
  StartRun();
  const Json first = Take("first");
  const std::string stale = first["lease"];
  env_.Advance(30);
  EXPECT_EQ(svc_->Heartbeat(1, stale).exit_code, 0);  // renewed to +60s
  env_.Advance(59);
  EXPECT_EQ(Take("other", 5)["status"], "idle") << "the renewal held";
  env_.Advance(2);  // 61s since the last heartbeat
  const Json second = Take("second");
  ASSERT_EQ(second["task_id"], 1);
  EXPECT_EQ(second["attempt"], 2) << "the lapsed attempt counts";
  EXPECT_NE(second["lease"], first["lease"]);
  EXPECT_NE(Log().find("\"reason\":\"lease_expired\""), std::string::npos);

  const std::string before = Log();
  AgentReply late = svc_->Done(1, stale, "[]");
  EXPECT_EQ(late.exit_code, 3);
  EXPECT_NE(late.message.find("lease lost: task 1"), std::string::npos)
      << late.message;
  late = svc_->Heartbeat(1, stale);
  EXPECT_EQ(late.exit_code, 3);
  late = svc_->Fail(1, stale, kReasonAgentFailed, "give up");
  EXPECT_EQ(late.exit_code, 3);
  EXPECT_EQ(Log(), before) << "a lapsed holder's calls recorded something";
  EXPECT_EQ(TaskOf(1)["lease"]["agent"], "second");

  const AgentReply done = svc_->Done(1, second["lease"], "[]");
  EXPECT_EQ(done.exit_code, 0) << done.message;
  const Json st = Status();
  EXPECT_EQ(st["tasks"][0]["state"], "done");
  EXPECT_EQ(st["status"], "completed") << "the agent's done ends the run";
  EXPECT_EQ(Take("third", 5),
            Json::parse(R"({"status":"finished","run_status":"completed"})"));
}

// A lease that lapsed is refused even before any transaction put it back.
TEST_F(AgentServiceTest, LapsedLeaseIsRefusedByItsOwnDone) {
  StartRun();
  const Json p = Take("a");
  env_.Advance(61);
  const AgentReply r = svc_->Done(1, p["lease"], "[]");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.message.find("was put back"), std::string::npos) << r.message;
  const Json t = TaskOf(1);
  EXPECT_EQ(t["state"], "pending");
  EXPECT_EQ(t["error"]["reason"], "lease_expired");
}

TEST_F(AgentServiceTest, VanishingAgentsFailTheTaskAsWorkerLost) {
  StartRun();  // max_retries 1: two attempts
  for (int attempt = 1; attempt <= 2; attempt++) {
    const Json p = Take("ghost");
    EXPECT_EQ(p["attempt"], attempt);
    env_.Advance(61);
  }
  EXPECT_EQ(Take("ghost", 5),
            Json::parse(R"({"status":"finished","run_status":"failed"})"));
  const Json t = TaskOf(1);
  EXPECT_EQ(t["state"], "failed");
  EXPECT_EQ(t["attempts"], 2);
  EXPECT_EQ(t["error"]["reason"], "worker_lost");
}

TEST_F(AgentServiceTest, UnknownTaskOrLeaseIsRefused) {
  StartRun();
  Take("a");
  EXPECT_EQ(svc_->Done(1, "not-the-lease", "[]").exit_code, 3);
  EXPECT_EQ(svc_->Heartbeat(9, "x").exit_code, 2);
  EXPECT_EQ(TaskOf(1)["state"], "in_progress");
}

// Each kind of invalid response: exit 1, a message saying what was wrong,
// the attempt failed with invalid_response and the retry policy applied.
TEST_F(AgentServiceTest, InvalidResponsesFailTheAttemptWithTheRetryPolicy) {
  std::string wf = kWorkflow;
  wf.replace(wf.find("\"max_retries\": 1"), 16, "\"max_retries\": 9");
  StartRun(wf);
  const struct {
    const char* response;
    const char* says;
  } cases[] = {
      {"this is not json", "JSON"},
      {"{\"kind\":\"A\",\"value\":{\"n\":1}}", "array"},
      {"[{\"kind\":\"C\",\"value\":1}]", "\"C\""},
      {"[{\"kind\":\"A\",\"value\":{\"n\":\"x\"}}]", "value_schema"},
  };
  int attempt = 0;
  for (const auto& c : cases) {
    env_.Advance(6);  // past the retry backoff
    const Json p = Take("a");
    ASSERT_EQ(p["attempt"], ++attempt);
    const AgentReply r = svc_->Done(1, p["lease"], c.response);
    EXPECT_EQ(r.exit_code, 1) << c.response;
    EXPECT_NE(r.message.find(c.says), std::string::npos)
        << c.response << " -> " << r.message;
    EXPECT_NE(r.message.find("will be retried"), std::string::npos)
        << r.message;
    const Json t = TaskOf(1);
    EXPECT_EQ(t["state"], "pending");
    EXPECT_EQ(t["error"]["reason"], "invalid_response");
  }
  // A valid one, with children of both kinds.
  env_.Advance(6);
  const Json p = Take("a");
  const AgentReply r =
      svc_->Done(1, p["lease"],
                 R"([{"kind":"A","value":{"n":1}},{"kind":"B","value":7}])");
  EXPECT_EQ(r.exit_code, 0) << r.message;
  EXPECT_EQ(Json::parse(r.json)["children"], Json::parse("[2,3]"));
}

TEST_F(AgentServiceTest, InvalidResponseWithoutRetryFailsForGood) {
  std::string wf = kWorkflow;
  wf.replace(wf.find("\"lease\": 60"), 11,
             "\"lease\": 60, \"retry_on_invalid_response\": false");
  StartRun(wf);
  const Json p = Take("a");
  const AgentReply r = svc_->Done(1, p["lease"], "[1]");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.message.find("failed for good"), std::string::npos) << r.message;
  EXPECT_EQ(TaskOf(1)["state"], "failed");
  EXPECT_EQ(Status()["status"], "failed");
}

TEST_F(AgentServiceTest, FailAppliesTheRetryPolicy) {
  StartRun();
  Json p = Take("a");
  AgentReply r = svc_->Fail(1, p["lease"], kReasonAgentFailed,
                            "cannot review binary files");
  EXPECT_EQ(r.exit_code, 0) << r.message;
  EXPECT_EQ(Json::parse(r.json)["will_retry"], true);
  Json t = TaskOf(1);
  EXPECT_EQ(t["error"]["reason"], "agent_failed");
  EXPECT_EQ(t["error"]["message"], "cannot review binary files");
  env_.Advance(6);
  p = Take("a");
  r = svc_->Fail(1, p["lease"], kReasonAgentFailed, "");
  EXPECT_EQ(Json::parse(r.json)["will_retry"], false);
  EXPECT_EQ(TaskOf(1)["state"], "failed");
}

// A leased attempt's time limit is part of the state a checkpoint keeps
// (queue.json's "attempt_timeout"): after one, the claim is no longer
// replayed from the log, and heartbeats still do not outlast the timeout.
TEST_F(AgentServiceTest, TimeoutIsKeptAcrossACheckpoint) {
  std::string wf = kWorkflow;
  wf.replace(wf.find("\"lease\": 60"), 11, "\"lease\": 60, \"timeout\": 600");
  StartRun(wf);
  const Json p = Take("a");
  QueueOptions o;
  o.env = &env_;
  o.install_dir = dir_.path();
  o.mode = OpenMode::kAttach;
  o.leases_only = true;
  std::unique_ptr<Queue> q;
  ASSERT_TRUE(Queue::Open(o, &q, nullptr).ok());
  ASSERT_TRUE(q->Checkpoint().ok());
  ASSERT_TRUE(q->Close().ok());
  EXPECT_NE(test::ReadAll(dir_.Join(".wizard/queue.json"))
                .find("\"attempt_timeout\":{\"timeout_ms\":600000,"),
            std::string::npos);
  for (int i = 0; i < 11; i++) {  // 550 s of heartbeats, 50 s apart
    env_.Advance(50);
    ASSERT_EQ(svc_->Heartbeat(1, p["lease"]).exit_code, 0) << i;
  }
  env_.Advance(52);  // 602 s since the claim
  const AgentReply r = svc_->Heartbeat(1, p["lease"]);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.message.find("task 1: timed out after 600s"), std::string::npos)
      << r.message;
  EXPECT_EQ(TaskOf(1)["error"]["reason"], "timeout");
}

TEST_F(AgentServiceTest, NoRunIsAnEnvironmentError) {
  svc_ = AgentService::Open(dir_.path(), &env_);
  TakeRequest req;
  const AgentReply r = svc_->Take(req);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.message.find("no run in"), std::string::npos) << r.message;
}

// take --wait returns as soon as a task becomes ready: here a worker
// completes the parent (a Command) of the Pool task while take waits.
TEST_F(AgentServiceTest, TakeWaitReturnsWhenAParentCompletes) {
  constexpr const char* kTwoSteps = R"({
    "entrypoint": "Root",
    "steps": [
      {"name": "Root", "action": {"kind": "Command", "script": "true"},
       "next": ["Review"]},
      {"name": "Review", "action": {"kind": "Pool", "instructions": "x"}}
    ]})";
  StartRun(kTwoSteps);
  AgentReply got;
  std::chrono::steady_clock::time_point returned;
  std::thread agent([&] {
    TakeRequest req;
    req.wait_seconds = 60;
    got = svc_->Take(req);
    returned = std::chrono::steady_clock::now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Another worker completes Root with a Review child.
  QueueOptions o;
  o.install_dir = dir_.path();
  o.mode = OpenMode::kAttach;
  std::unique_ptr<Queue> q;
  ASSERT_TRUE(Queue::Open(o, &q, nullptr).ok());
  const auto completed = std::chrono::steady_clock::now();
  ASSERT_TRUE(q->Transact([](Txn& txn) {
                 int64_t id = 0;
                 WIZQ_RETURN_IF_ERROR(
                     txn.ClaimNextOfSteps(nullptr, nullptr, &id));
                 NewTask child;
                 child.type = "Review";
                 child.inputs = "{}";
                 child.parent_id = id;
                 return txn.Complete(id, {child}, nullptr);
               }).ok());
  ASSERT_TRUE(q->Close().ok());
  agent.join();
  EXPECT_EQ(got.exit_code, 0) << got.message;
  EXPECT_EQ(Json::parse(got.json)["task_id"], 2);
  EXPECT_LT(returned - completed, std::chrono::seconds(5))
      << "take did not notice the new task soon";
}

// No commit announces a lapsing lease or a retry's time: take --wait wakes
// on its own when one falls due (Store::WaitForChange waits for commits
// only), instead of sleeping to its deadline.
TEST_F(AgentServiceTest, TakeWaitWakesWhenALeaseLapsesWithoutACommit) {
  std::string wf = kWorkflow;
  wf.replace(wf.find("\"lease\": 60"), 11, "\"lease\": 0.3");
  StartRun(wf);
  Take("gone");  // never heard of again
  TakeRequest req;
  req.agent = "patient";
  req.wait_seconds = 20;
  const auto start = std::chrono::steady_clock::now();
  const AgentReply r = svc_->Take(req);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(r.exit_code, 0) << r.message << r.json;
  const Json p = Json::parse(r.json);
  EXPECT_EQ(p["task_id"], 1);
  EXPECT_EQ(p["attempt"], 2);
  EXPECT_LT(waited, std::chrono::seconds(5)) << "take slept to its deadline";
}

TEST_F(AgentServiceTest, TakeWaitWakesWhenARetrysTimeComes) {
  StartRun();
  const Json p = Take("a");
  const AgentReply f = svc_->Fail(1, p["lease"], kReasonAgentFailed, "");
  ASSERT_EQ(Json::parse(f.json)["will_retry"], true) << f.message;
  ASSERT_FALSE(TaskOf(1)["retry_at_ms"].is_null());
  TakeRequest req;
  req.wait_seconds = 20;
  const auto start = std::chrono::steady_clock::now();
  const AgentReply r = svc_->Take(req);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(r.exit_code, 0) << r.message << r.json;
  EXPECT_EQ(Json::parse(r.json)["attempt"], 2);
  EXPECT_LT(waited, std::chrono::seconds(5)) << "take slept to its deadline";
}

// A take records that the attempt it hands out started (task_started, in
// the claim's commit): a fact of the store, whichever host judges it.
TEST_F(AgentServiceTest, TakeRecordsTheAttemptAsStarted) {
  StartRun();
  Take("a");
  std::vector<Json> events;
  std::istringstream lines(Log());
  for (std::string line; std::getline(lines, line);) {
    const Json e = Json::parse(line, nullptr, false);
    if (e.is_object() &&
        (e["event"] == "task_claimed" || e["event"] == "task_started")) {
      events.push_back(e);
    }
  }
  ASSERT_EQ(events.size(), 2u) << Log();
  EXPECT_EQ(events[0]["event"], "task_claimed");
  EXPECT_EQ(events[1]["event"], "task_started");
  EXPECT_EQ(events[1]["id"], 1);
  EXPECT_EQ(events[1]["attempt"], 1);
  EXPECT_EQ(events[0].value("commit", false), false)
      << "started in the claim's own commit";
  EXPECT_EQ(events[1].value("commit", false), true);
}

TEST_F(AgentServiceTest, TakeWaitTimesOutIdle) {
  StartRun();
  Take("a");
  TakeRequest req;
  req.wait_seconds = 0.2;
  const auto start = std::chrono::steady_clock::now();
  const AgentReply r = svc_->Take(req);
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_EQ(r.json, R"({"status":"idle"})");
  EXPECT_GE(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(200));
}

}  // namespace
}  // namespace wizq
