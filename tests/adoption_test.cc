// Adoption of orphaned attempts (docs/PROTOCOL.md, "Orphans after a
// crash"): the real binary, SIGKILLed while a task runs, and run again.
// When only wizq died, the task's tree finishes on its own and the next
// worker adopts its result instead of running it again; only a tree that
// died without an exit record (its process group killed, a signal) or that
// outlives its timeout runs again.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration_util.h"
#include "tests/process_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Json;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

class AdoptionTest : public ::testing::Test {
 protected:
  void SetUp() override { test::BecomeSubreaper(); }
  void TearDown() override {
    // Nothing of a task may outlive its test.
    KillTaskGroups();
    test::ReapStrays();
  }

  std::string Inst() const { return dir_.Join("inst"); }
  std::string Log() const { return dir_.Join("log"); }

  // Writes the workflow (JSON text) next to the log; tasks run there.
  std::string Workflow(const std::string& json) {
    const std::string path = dir_.Join("wf.json");
    test::WriteAll(path, json);
    return path;
  }
  std::vector<std::string> Run(const std::string& wf) const {
    return {"wizq", "run", wf, "--dir", Inst(), "--quiet"};
  }
  std::vector<std::string> LogLines() const {
    return test::SplitLines(test::ReadAll(Log()));
  }
  int Count(const std::string& line) const {
    int n = 0;
    for (const std::string& l : LogLines()) n += l == line ? 1 : 0;
    return n;
  }
  // Waits until the log holds `line`.
  bool WaitForLine(const std::string& line, int seconds = 20) const {
    return test::WaitFor([&] { return Count(line) > 0; },
                         std::chrono::seconds(seconds));
  }
  // SIGKILLs wizq once the log holds `line`; true if it was killed.
  bool KillWhen(WizqProcess* p, const std::string& line) {
    if (!WaitForLine(line)) return false;
    p->Kill(SIGKILL);
    const WizqResult& r = p->Wait();
    return !r.exited && r.signal == SIGKILL;
  }
  // SIGKILLs the process group of every task attempt (their shells lead
  // them; the attempt journal names them).
  void KillTaskGroups() {
    for (long pid : test::AttemptGroups(Inst())) {
      kill(-static_cast<pid_t>(pid), SIGKILL);
    }
  }
  std::vector<Json> Events(const std::string& name) const {
    std::vector<Json> out;
    for (const Json& e : test::ReadAudit(Inst())) {
      if (e["event"] == name) out.push_back(e);
    }
    return out;
  }

  ScratchDir dir_;
};

// Reference 002's five steps; each appends its name to the log when it
// starts, and the third takes a while (`build_body`).
std::string FiveSteps(int max_retries,
                      const std::string& build_body = "sleep 1.5; ") {
  auto step = [](const std::string& name, const std::string& next,
                 const std::string& body) {
    return "{\"name\":\"" + name +
           "\",\"action\":{\"kind\":\"Command\",\"script\":\"echo " + name +
           " >> log; " + body + "echo '" +
           (next.empty()
                ? std::string("[]")
                : "[{\\\"kind\\\":\\\"" + next + "\\\",\\\"value\\\":{}}]") +
           "'\"},\"next\":[" + (next.empty() ? "" : "\"" + next + "\"") + "]}";
  };
  return "{\"entrypoint\":\"gather\",\"options\":{\"max_retries\":" +
         std::to_string(max_retries) + "},\"steps\":[" +
         step("gather", "plan", "") + "," + step("plan", "build", "") + "," +
         step("build", "verify", build_body) + "," +
         step("verify", "ship", "") + "," + step("ship", "", "") + "]}";
}

TEST_F(AdoptionTest, OnlyWizqKilledDuringStepThreeEveryStepRunsOnce) {
  // max_retries 0: nothing may be charged twice for the crash. The build
  // step ends only once the resume waits for it (however slowly wizq
  // starts: a sanitizer build on a loaded machine takes seconds), or after
  // 30 s.
  const std::string wf = Workflow(
      FiveSteps(0,
                "i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; "
                "i=$((i+1)); done; "));
  {
    WizqProcess p(Run(wf));
    ASSERT_TRUE(KillWhen(&p, "build"));
  }
  // Not --quiet: the resume says what it waits for.
  std::vector<std::string> resume = Run(wf);
  resume.pop_back();
  WizqProcess again(resume);
  EXPECT_TRUE(test::WaitFor(
      [&] { return test::Contains(again.Stderr(), "waiting for its earlier"); },
      std::chrono::seconds(30)));
  test::WriteAll(dir_.Join("go"), "");
  const WizqResult& r = again.Wait();
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(
      test::Contains(r.err,
                     "task 3 (build): waiting for its earlier attempt 1 "
                     "(process group "))
      << r.err;
  for (const char* name : {"gather", "plan", "build", "verify", "ship"}) {
    EXPECT_EQ(Count(name), 1) << name;
  }
  const std::vector<Json> adopted = Events("task_adopted");
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0]["attempt"], 1);
  EXPECT_GT(adopted[0]["waited_ms"].get<int64_t>(), 0);  // it still ran
  const std::vector<Json> resumed = Events("run_resumed");
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0]["tasks_adopted"], 1);
  EXPECT_EQ(Events("run_finished").at(0)["tasks_adopted"], 1);
}

TEST_F(AdoptionTest, ProcessGroupKilledTooOnlyStepThreeRunsTwice) {
  // A lost attempt is charged: one retry lets it run again.
  const std::string wf = Workflow(FiveSteps(1));
  {
    WizqProcess p(Run(wf));
    ASSERT_TRUE(KillWhen(&p, "build"));
  }
  KillTaskGroups();
  const WizqResult r = test::RunWizq(Run(wf));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Count("build"), 2);
  for (const char* name : {"gather", "plan", "verify", "ship"}) {
    EXPECT_EQ(Count(name), 1) << name;
  }
  EXPECT_TRUE(Events("task_adopted").empty());
  const Json build = test::FindTasks(test::StatusJson(Inst()), "build").at(0);
  EXPECT_EQ(build["attempts"], 2);
}

// One Command step; `script` runs with the task in the log directory.
std::string OneStep(const std::string& script, const std::string& options) {
  return "{\"entrypoint\":\"S\",\"options\":{" + options +
         "},\"steps\":[{\"name\":\"S\",\"action\":{\"kind\":\"Command\","
         "\"script\":\"" +
         script + "\"},\"next\":[]}]}";
}

TEST_F(AdoptionTest, TheAgentOfADeadRunAgentIsAdoptedNotAskedAgain) {
  // `wizq run --agent CMD` runs the agent like a Command; max_retries 0.
  const std::string wf = Workflow(
      R"({"entrypoint": "Ask", "steps": [{"name": "Ask", "action":
          {"kind": "Pool", "instructions": "Look."}}]})");
  std::vector<std::string> args = Run(wf);
  args.push_back("--agent");
  args.push_back("cat > /dev/null; echo agent >> " + Log() +
                 "; sleep 1.5; echo []");
  {
    WizqProcess p(args);
    ASSERT_TRUE(KillWhen(&p, "agent"));
  }
  const WizqResult r = test::RunWizq(args);
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Count("agent"), 1);
  ASSERT_EQ(Events("task_adopted").size(), 1u);
  EXPECT_EQ(Events("task_adopted")[0]["attempt"], 1);
}

TEST_F(AdoptionTest, AnOrphanThatOutlivesItsTimeoutIsEndedAndRetried) {
  const std::string wf =
      Workflow(OneStep("echo start-$WIZQ_ATTEMPT >> log; "
                       "if [ $WIZQ_ATTEMPT = 1 ]; then sleep 60; fi; echo []",
                       "\"timeout\": 2, \"max_retries\": 1"));
  const auto start = std::chrono::steady_clock::now();
  {
    WizqProcess p(Run(wf));
    ASSERT_TRUE(KillWhen(&p, "start-1"));
  }
  const WizqResult r = test::RunWizq(Run(wf));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(Count("start-1"), 1);
  EXPECT_EQ(Count("start-2"), 1);
  const std::vector<Json> failed = Events("task_failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["reason"], "timeout");
  EXPECT_EQ(test::ReadAll(Inst() + "/.wizard/tasks/1.1.stdout"), "");
}

TEST_F(AdoptionTest, AnOrphanKilledByASignalAfterWizqDiedRunsAgain) {
  const std::string wf = Workflow(
      OneStep("echo start >> log; echo $$ > shell.pid; sleep 2; echo []",
              "\"max_retries\": 1"));
  {
    WizqProcess p(Run(wf));
    ASSERT_TRUE(KillWhen(&p, "start"));
  }
  const long shell = std::atol(test::ReadAll(dir_.Join("shell.pid")).c_str());
  ASSERT_GT(shell, 1);
  kill(static_cast<pid_t>(shell), SIGKILL);  // the shell only, not its group
  const WizqResult r = test::RunWizq(Run(wf));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Count("start"), 2);
  EXPECT_TRUE(Events("task_adopted").empty());
}

TEST_F(AdoptionTest, AScriptThatExecsIsAdopted) {
  const std::string wf =
      Workflow(OneStep("exec sh -c 'echo start >> log; sleep 1; echo []'", ""));
  {
    WizqProcess p(Run(wf));
    ASSERT_TRUE(KillWhen(&p, "start"));
  }
  const WizqResult r = test::RunWizq(Run(wf));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Count("start"), 1);
  EXPECT_EQ(Events("task_adopted").size(), 1u);
}

TEST_F(AdoptionTest, AnOrphanWithAnInvalidResponseIsJudgedInvalid) {
  const std::string wf =
      Workflow(OneStep("echo start >> log; sleep 1; echo not-json", ""));
  {
    WizqProcess p(Run(wf));
    ASSERT_TRUE(KillWhen(&p, "start"));
  }
  const WizqResult r = test::RunWizq(Run(wf));
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_EQ(Count("start"), 1);
  EXPECT_EQ(Events("task_adopted").size(), 1u);
  const Json task = test::FindTask(test::StatusJson(Inst()), 1);
  EXPECT_EQ(task["error"]["reason"], "invalid_response") << task.dump();
  EXPECT_EQ(task["attempts"], 1);
}

TEST_F(AdoptionTest, AFinishedShellWhoseBackgroundChildHoldsStdoutIsAdopted) {
  const std::string wf = Workflow(
      OneStep("(sleep 60; echo late) & echo $! > bg.pid; echo start >> log; "
              "sleep 1; echo []",
              ""));
  {
    WizqProcess p(Run(wf));
    ASSERT_TRUE(KillWhen(&p, "start"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // it ends
  const auto start = std::chrono::steady_clock::now();
  const WizqResult r = test::RunWizq(Run(wf));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(Count("start"), 1);
  EXPECT_EQ(Events("task_adopted").size(), 1u);
  const long bg = std::atol(test::ReadAll(dir_.Join("bg.pid")).c_str());
  ASSERT_GT(bg, 1);
  EXPECT_TRUE(test::WaitFor([&] { return test::ProcessDead(bg); },
                            std::chrono::seconds(5)));
}

TEST_F(AdoptionTest, ASecondLiveWorkerAdopts) {
  // The step ends only once the test says so: after the second worker
  // joined and the first was killed, however slowly they start (a
  // sanitizer build on a loaded machine takes seconds).
  const std::string wf = Workflow(OneStep(
      "echo start >> log; while [ ! -e go ]; do sleep 0.05; done; echo []",
      ""));
  WizqProcess a(Run(wf));
  ASSERT_TRUE(WaitForLine("start"));
  WizqProcess b(Run(wf));  // joins the live run; nothing to claim yet
  ASSERT_TRUE(test::WaitFor([&] { return Events("worker_joined").size() >= 2; },
                            std::chrono::seconds(20)));
  a.Kill(SIGKILL);
  a.Wait();
  test::WriteAll(dir_.Join("go"), "");
  const WizqResult& r = b.Wait();
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Count("start"), 1);
  const std::vector<Json> adopted = Events("task_adopted");
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0]["worker"], Events("worker_joined").at(1)["worker"]);
  EXPECT_TRUE(Events("run_resumed").empty());
}

TEST_F(AdoptionTest, AKillDuringTheAdoptionItselfAdoptsAgain) {
  const std::string wf =
      Workflow(OneStep("echo start >> log; sleep 2; echo []", ""));
  {
    WizqProcess p(Run(wf));
    ASSERT_TRUE(KillWhen(&p, "start"));
  }
  {
    WizqProcess adopter(Run(wf));
    ASSERT_TRUE(
        test::WaitFor([&] { return Events("worker_joined").size() >= 2; },
                      std::chrono::seconds(20)));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    adopter.Kill(SIGKILL);
    ASSERT_FALSE(adopter.Wait().exited);
  }
  const WizqResult r = test::RunWizq(Run(wf));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Count("start"), 1);
  EXPECT_EQ(Events("task_adopted").size(), 1u);
  EXPECT_EQ(test::FindTask(test::StatusJson(Inst()), 1)["attempts"], 1);
}

// --fresh after a crash: the old run's attempt is ended before the new run
// starts, and the new run's idempotency keys differ.
TEST_F(AdoptionTest, FreshEndsTheOldRunsOrphansAndNeverReusesItsKeys) {
  const std::string wf =
      Workflow(OneStep("echo start-$WIZQ_IDEMPOTENCY_KEY >> log; sleep 2; "
                       "echo end-$WIZQ_IDEMPOTENCY_KEY >> log; echo []",
                       ""));
  {
    WizqProcess p(Run(wf));
    ASSERT_TRUE(test::WaitFor([&] { return !LogLines().empty(); },
                              std::chrono::seconds(20)));
    p.Kill(SIGKILL);
    ASSERT_FALSE(p.Wait().exited);
  }
  const std::string old_key = LogLines().at(0).substr(6);
  std::vector<std::string> fresh = Run(wf);
  fresh.push_back("--fresh");
  const WizqResult r = test::RunWizq(fresh);
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const std::vector<std::string> lines = LogLines();
  ASSERT_EQ(lines.size(), 3u) << test::ReadAll(Log());
  EXPECT_EQ(Count("end-" + old_key), 0) << "the old attempt kept running";
  EXPECT_NE(lines[1], "start-" + old_key) << "a key was reused";
}

// A run of the previous layout: tests/legacy_layout_test.cc.

}  // namespace
}  // namespace wizq
