// Ways out for agents, through the real `wizq agent ...` (issue 21, items
// 7-9): a Pool step's timeout enforced by the store on agents that keep
// heart-beating (and the agent processes wizq starts killed at it, with the
// same reason), `release` that gives a task back uncharged (refused past the
// timeout), responses as agents write them (a JSON string holding the
// array; a fence or prose around it named as such; a misspelt kind with a
// did-you-mean), late calls answered with what became of the task rather
// than "lease lost", and the payload's install_dir. The MCP side of the
// same is tests/mcp/sdk_agent_test.mjs (the official SDK client).
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using test::Contains;
using test::Json;
using test::RunWizq;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

// Review (a Pool step) may spawn Summary (a Pool step too), with `options`
// for both.
std::string Workflow(const std::string& options) {
  return R"({"entrypoint": "Review", "options": )" + options + R"(,
    "steps": [
      {"name": "Review", "next": ["Summary"],
       "action": {"kind": "Pool", "instructions": "Look."}},
      {"name": "Summary", "action": {"kind": "Pool", "instructions": "Sum."}}
    ]})";
}

class AgentWaysOutTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  void TearDown() override { test::ReapStrays(); }

  // Starts `wizq run` on a workflow with `options` in the background (it
  // waits for agents) and waits until the run exists.
  void StartRun(const std::string& options) {
    test::WriteAll(work_.Join("wf.json"), Workflow(options));
    run_ = std::make_unique<WizqProcess>(std::vector<std::string>{
        "wizq", "run", work_.Join("wf.json"), "--dir", dir_.path(), "--quiet"});
    ASSERT_TRUE(test::WaitFor([&] { return test::HasRun(dir_.path()); },
                              test::seconds(30)));
  }
  // `wizq agent CMD --dir DIR ARGS...`
  WizqResult Agent(const std::string& cmd,
                   const std::vector<std::string>& args = {}) {
    std::vector<std::string> argv = {"wizq", "agent", cmd, "--dir",
                                     dir_.path()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunWizq(argv);
  }
  // `wizq agent CMD --task ID --lease TOKEN ARGS...` for payload `p`.
  WizqResult OnLease(const std::string& cmd, const Json& p,
                     const std::vector<std::string>& args = {}) {
    std::vector<std::string> a = {"--task",
                                  std::to_string(p["task_id"].get<int>()),
                                  "--lease", p["lease"].get<std::string>()};
    a.insert(a.end(), args.begin(), args.end());
    return Agent(cmd, a);
  }
  Json Take() {
    const WizqResult r = Agent("take", {"--agent", "me", "--wait", "30"});
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
    return test::ParseJsonOrNull(r.out);
  }
  // The audit events named `name`.
  std::vector<Json> Events(const std::string& name) {
    std::vector<Json> out;
    for (const Json& e : test::ReadAudit(dir_.path())) {
      if (e.is_object() && e["event"] == name) out.push_back(e);
    }
    return out;
  }
  Json Task(int id) {
    return test::FindTask(test::StatusJson(dir_.path()), id);
  }

  ScratchDir dir_;   // the install directory
  ScratchDir work_;  // the workflow, scripts
  std::unique_ptr<WizqProcess> run_;
};

// --- item 9: the payload names the install directory -------------------------

TEST_F(AgentWaysOutTest, TakePayloadNamesTheInstallDirectory) {
  StartRun(R"({"max_retries": 1})");
  const Json p = Take();
  char real[PATH_MAX];
  ASSERT_NE(realpath(dir_.path().c_str(), real), nullptr);
  EXPECT_EQ(p.value("install_dir", ""), std::string(real)) << p.dump();
}

// --- item 7: the step's timeout, enforced on agents that keep heart-beating --

TEST_F(AgentWaysOutTest, HeartbeatingAgentTimesOutAtTheStepsTimeout) {
  StartRun(R"({"max_retries": 1, "timeout": 2, "lease": 60})");
  const Json p = Take();
  const auto taken = test::Clock::now();
  WizqResult hb;
  while (test::Clock::now() - taken < test::seconds(15)) {
    hb = OnLease("heartbeat", p);
    if (!(hb.exited && hb.code == 0)) break;
    std::this_thread::sleep_for(test::milliseconds(300));
  }
  ASSERT_TRUE(hb.exited && hb.code == 3)
      << "15 s of heartbeats, never timed out: " << hb.Describe();
  EXPECT_GE(test::Clock::now() - taken, test::milliseconds(1900));
  EXPECT_TRUE(Contains(hb.err, "task 1: timed out after 2s")) << hb.err;
  for (const char* cmd : {"done", "fail"}) {
    const WizqResult r =
        OnLease(cmd, p,
                cmd == std::string("done")
                    ? std::vector<std::string>{"--response", "[]"}
                    : std::vector<std::string>{});
    EXPECT_TRUE(r.exited && r.code == 3) << cmd << r.Describe();
    EXPECT_TRUE(Contains(r.err, "timed out after 2s")) << cmd << r.err;
  }
  const std::vector<Json> failed = Events("task_failed");
  ASSERT_EQ(failed.size(), 1u) << "the late done/fail recorded something";
  EXPECT_EQ(failed[0]["reason"], "timeout");
  EXPECT_EQ(failed[0]["attempt"], 1);
  EXPECT_EQ(failed[0]["will_retry"], true) << "retry_on_timeout applies";
  EXPECT_TRUE(Events("task_reset").empty()) << "not a lapsed lease";
  EXPECT_EQ(Events("task_claimed")[0]["timeout_ms"], 2000);
  // The retry: attempt 2, which completes.
  const Json p2 = Take();
  EXPECT_EQ(p2["attempt"], 2);
  const WizqResult d = OnLease("done", p2, {"--response", "[]"});
  EXPECT_TRUE(d.exited && d.code == 0) << d.Describe();
}

TEST_F(AgentWaysOutTest, TimeoutWithoutRetryOnTimeoutFailsTheTaskForGood) {
  StartRun(R"({"max_retries": 2, "timeout": 1, "retry_on_timeout": false})");
  const Json p = Take();
  std::this_thread::sleep_for(test::milliseconds(1500));
  const WizqResult r = OnLease("done", p, {"--response", "[]"});
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "timed out after 1s")) << r.err;
  EXPECT_TRUE(Contains(r.err, "the task failed for good")) << r.err;
  const WizqResult& end = run_->Wait(test::seconds(30));
  EXPECT_TRUE(end.exited && end.code == 1) << end.Describe();
  const Json t = Task(1);
  EXPECT_EQ(t["state"], "failed");
  EXPECT_EQ(t["attempts"], 1) << "attempts were left; the option said no";
}

// `wizq agent serve` kills its COMMAND at the step's timeout, as `wizq run
// --agent` does; both record the attempt as reason timeout.
TEST_F(AgentWaysOutTest, ServeKillsItsCommandAtTheTimeoutAsTimeout) {
  StartRun(R"({"max_retries": 0, "timeout": 1})");
  const std::string agent = work_.Join("agent.sh");
  test::WriteAll(agent,
                 "#!/bin/sh\necho $$ > \"$WIZQ_INSTALL_DIR/pid\"\n"
                 "exec sleep 60\n");
  chmod(agent.c_str(), 0755);
  const WizqResult r =
      RunWizq({"wizq", "agent", "serve", "--dir", dir_.path(), "--", agent});
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  const WizqResult& end = run_->Wait(test::seconds(30));
  EXPECT_TRUE(end.exited && end.code == 1) << end.Describe();
  const std::vector<Json> failed = Events("task_failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["reason"], "timeout") << failed[0].dump();
  // Under load the timeout may strike before the shell's first line ran:
  // then there is no pid to look at, and nothing outlived anything.
  const std::string pid_text = test::ReadAll(dir_.Join("pid"));
  if (pid_text.empty()) return;
  const pid_t pid = std::stoi(pid_text);
  EXPECT_TRUE(
      test::WaitFor([&] { return test::ProcessDead(pid); }, test::seconds(5)))
      << "the agent command outlived its timeout";
}

TEST_F(AgentWaysOutTest, RunAgentKillsItsCommandAtTheTimeoutAsTimeout) {
  test::WriteAll(work_.Join("wf.json"),
                 Workflow(R"({"max_retries": 0, "timeout": 1})"));
  const WizqResult r =
      RunWizq({"wizq", "run", work_.Join("wf.json"), "--dir", dir_.path(),
               "--quiet", "--agent", "exec sleep 60"});
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  const std::vector<Json> failed = Events("task_failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["reason"], "timeout") << failed[0].dump();
}

// --- item 8: release ---------------------------------------------------------

TEST_F(AgentWaysOutTest, ReleaseGivesTheTaskBackUncharged) {
  StartRun(R"({"max_retries": 0})");
  const Json p = Take();
  const WizqResult r = OnLease("release", p);
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(test::ParseJsonOrNull(r.out),
            Json::parse(R"({"task_id": 1, "status": "released"})"));
  const Json t = Task(1);
  EXPECT_EQ(t["state"], "pending");
  EXPECT_EQ(t["attempts"], 0) << "the attempt was charged";
  const std::vector<Json> resets = Events("task_reset");
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0]["reason"], "released");
  EXPECT_EQ(resets[0]["refund"], true);
  // Pending at once: taken again as attempt 1 (its only one), and done.
  const Json p2 = Take();
  EXPECT_EQ(p2["attempt"], 1);
  const WizqResult late = OnLease("done", p, {"--response", "[]"});
  EXPECT_TRUE(late.exited && late.code == 3) << late.Describe();
  EXPECT_TRUE(Contains(late.err, "its agent gave it back (released)"))
      << late.err;
  const WizqResult d = OnLease("done", p2, {"--response", "[]"});
  EXPECT_TRUE(d.exited && d.code == 0) << d.Describe();
  const WizqResult& end = run_->Wait(test::seconds(30));
  EXPECT_TRUE(end.exited && end.code == 0) << end.Describe();
}

TEST_F(AgentWaysOutTest, ReleaseIsRefusedPastTheTimeout) {
  StartRun(R"({"max_retries": 1, "timeout": 1})");
  const Json p = Take();
  std::this_thread::sleep_for(test::milliseconds(1500));
  const WizqResult r = OnLease("release", p);
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "timed out after 1s")) << r.err;
  EXPECT_TRUE(Events("task_reset").empty()) << "released past the timeout";
  EXPECT_EQ(Task(1)["attempts"], 1) << "the timed-out attempt is charged";
}

// --- item 9: responses as agents write them
// -----------------------------------

TEST_F(AgentWaysOutTest, DoneAcceptsAJsonStringHoldingTheArray) {
  StartRun(R"({"max_retries": 1})");
  const Json p = Take();
  const std::string array = R"([{"kind": "Summary", "value": {"n": 1}}])";
  const WizqResult r = OnLease("done", p, {"--response", Json(array).dump()});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const Json child = Task(2);
  EXPECT_EQ(child["type"], "Summary");
  EXPECT_EQ(child["inputs"], Json::parse(R"({"n": 1})"));
}

TEST_F(AgentWaysOutTest, DoneRefusesAFencedArrayAndSaysSo) {
  StartRun(R"({"max_retries": 1})");
  const Json p = Take();
  const WizqResult r = OnLease("done", p, {"--response", "```json\n[]\n```\n"});
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err,
                       "the response is the array inside a ```json fence: "
                       "send the array alone"))
      << r.err;
}

TEST_F(AgentWaysOutTest, DoneRefusesProseAroundTheArrayAndSaysSo) {
  StartRun(R"({"max_retries": 1})");
  const Json p = Take();
  const WizqResult r = OnLease(
      "done", p, {"--response", "Here is my review:\n[]\nHope it helps."});
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err,
                       "the response has text around the array (before it: "
                       "\"Here is my review:\"; after it: \"Hope it helps.\"): "
                       "send the array alone"))
      << r.err;
}

TEST_F(AgentWaysOutTest, MisspeltKindGetsADidYouMean) {
  StartRun(R"({"max_retries": 1})");
  const Json p = Take();
  const WizqResult r = OnLease(
      "done", p, {"--response", R"([{"kind": "Sumary", "value": {}}])"});
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err,
                       "kind \"Sumary\" is not a next step of \"Review\" "
                       "(did you mean \"Summary\"?)"))
      << r.err;
}

// --- item 9: what a late call is told ----------------------------------------

TEST_F(AgentWaysOutTest, DoneOnATaskNeverTakenSaysSo) {
  StartRun(R"({"max_retries": 1})");
  const WizqResult r =
      Agent("done", {"--task", "1", "--lease", "made-up", "--response", "[]"});
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "task 1 was never taken")) << r.err;
  EXPECT_FALSE(Contains(r.err, "lease lost")) << r.err;
}

TEST_F(AgentWaysOutTest, DoneAfterTheAttemptFailedNamesTheAttemptAndReason) {
  StartRun(R"({"max_retries": 1})");
  const Json p = Take();
  WizqResult r = OnLease("fail", p, {"--message", "no access"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  r = OnLease("done", p, {"--response", "[]"});
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err,
                       "task 1: attempt 1 already failed "
                       "(agent_failed: no access); it is pending again"))
      << r.err;
  EXPECT_FALSE(Contains(r.err, "lease lost")) << r.err;
  // Attempt 2, the last, fails too: the task failed for good.
  const Json p2 = Take();
  r = OnLease("fail", p2, {"--message", "still no access"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  r = OnLease("heartbeat", p2);
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err,
                       "task 1: attempt 2 already failed (agent_failed: "
                       "still no access); the task failed for good"))
      << r.err;
}

TEST_F(AgentWaysOutTest, DoneOnACompletedTaskSaysCompleted) {
  StartRun(R"({"max_retries": 1})");
  const Json p = Take();
  WizqResult r = OnLease("done", p, {"--response", "[]"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  r = OnLease("done", p, {"--response", "[]"});
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "task 1 is already completed")) << r.err;
}

TEST_F(AgentWaysOutTest, DoneAfterTheLeaseLapsedSaysPutBack) {
  StartRun(R"({"max_retries": 1, "lease": 1})");
  const Json p = Take();
  std::this_thread::sleep_for(test::milliseconds(1500));
  const WizqResult r = OnLease("done", p, {"--response", "[]"});
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err,
                       "lease lost: task 1: its lease lapsed and it was "
                       "put back; it is pending again"))
      << r.err;
}

}  // namespace
}  // namespace wizq
