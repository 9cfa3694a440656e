// Every way `wizq run` starts a run goes through one entry point
// (orchestrator/run.h, RunWorkflowWith), so a run flag means the same
// whatever the run starts from. Through the real binary:
//   - a Barnum run continued (`--resume-from LOG`) with --agent, --answer,
//     --halt, --retry-failed, --fresh, --from and --no-reuse
//     (docs/INTEROP.md);
//   - the command a paused run prints to answer and go on continues THIS
//     run, after `--fresh --from` too, and keeps what the run chose of reuse;
//   - --from without --fresh, the hints of a finished failed run and of a
//     refused answer, and a misspelt --from (docs/CLI.md).
//
// The Barnum tasks are tests/data/barnum/task.sh, run in the directory wizq
// is started in (Barnum's rule for a resumed run), here that data folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/barnum_test_util.h"
#include "tests/integration_util.h"
#include "tests/prompt_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Json;
using test::RunWizq;
using test::ScratchDir;
using test::WizqResult;

using test::BarnumData;
using test::InBarnumData;

// A Barnum state log (v1 shape): the Config's steps, then `entries`.
std::string BarnumLog(const Json& config, const std::vector<Json>& entries) {
  std::string out = Json{{"kind", "Config"}, {"config", config}}.dump() + "\n";
  for (const Json& e : entries) out += e.dump() + "\n";
  return out;
}

Json Step(const std::string& name, const Json& action,
          const Json& next = Json::array()) {
  return {{"name", name},
          {"action", action},
          {"next", next},
          {"options",
           {{"max_retries", 0},
            {"retry_on_timeout", true},
            {"retry_on_invalid_response", true}}}};
}

Json Script() { return {{"kind", "Command"}, {"script", "./task.sh"}}; }

Json Submitted(int id, const std::string& step, const Json& value,
               int parent = -1) {
  return {{"kind", "TaskSubmitted"},
          {"task_id", id},
          {"step", step},
          {"value", value},
          {"parent_id", parent < 0 ? Json() : Json(parent)},
          {"origin", {{"kind", parent < 0 ? "Initial" : "Spawned"}}}};
}

Json Succeeded(int id, const std::vector<int>& spawned) {
  return {
      {"kind", "TaskCompleted"},
      {"task_id", id},
      {"outcome",
       {{"kind", "Success"},
        {"value",
         {{"spawned_task_ids", spawned}, {"finally_value", Json::object()}}}}}};
}

// Failed for good (Barnum dropped it: no retry).
Json Dropped(int id) {
  return {
      {"kind", "TaskCompleted"},
      {"task_id", id},
      {"outcome",
       {{"kind", "Failed"},
        {"value",
         {{"reason", {{"kind", "Timeout"}}}, {"retry_task_id", nullptr}}}}}};
}

class RunEntryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  void TearDown() override { test::ReapStrays(); }

  // Writes the log and returns its path.
  std::string WriteLog(const std::string& text) {
    const std::string log = dir_.Join("state.ndjson");
    test::WriteAll(log, text);
    return log;
  }
  WizqResult ResumeFrom(const std::string& log, std::vector<std::string> extra,
                        test::Clock::duration timeout = test::kWizqDeadline) {
    std::vector<std::string> args = {"wizq", "run",   "--resume-from",
                                     log,    "--dir", inst_};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunWizq(args, InBarnumData(), timeout);
  }
  std::vector<std::string> Ledger() const {
    return test::SplitLines(test::ReadAll(inst_ + "/ledger"));
  }
  Json Status() const { return test::StatusJson(inst_); }

  ScratchDir dir_;
  const std::string inst_ = dir_.Join("inst");
};

// --- a Barnum run continued, with every run flag -----------------------------

// --agent drives the Pool tasks of the imported run, as it does any run's
// (before: the run waited for outside agents forever).
TEST_F(RunEntryTest, ResumeFromWithAgentRunsThePoolTasks) {
  const Json config = {
      {"steps",
       {Step("Review", {{"kind", "Pool"}, {"instructions", "Review it."}})}}};
  const std::string log =
      WriteLog(BarnumLog(config, {Submitted(0, "Review", {{"n", 1}}),
                                  Submitted(1, "Review", {{"n", 2}})}));
  const std::string agent =
      "cat >/dev/null; echo \"agent $WIZQ_TASK_ID\" >> "
      "\"$WIZQ_INSTALL_DIR/ledger\"; echo '[]'";
  const WizqResult r =
      ResumeFrom(log, {"--agent", agent}, std::chrono::seconds(30));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  std::vector<std::string> ledger = Ledger();
  std::sort(ledger.begin(), ledger.end());
  EXPECT_EQ(ledger, (std::vector<std::string>{"agent 1", "agent 2"}));
  EXPECT_EQ(Status()["status"], "completed");
  EXPECT_FALSE(test::Contains(r.err, "waiting for agents")) << r.err;
}

// --answer for a task of the import that is no Prompt: exit 2, nothing
// recorded (before: accepted and ignored).
TEST_F(RunEntryTest, ResumeFromAnswerForATaskThatIsNoPromptIsExit2) {
  const WizqResult r =
      ResumeFrom(BarnumData("fanout.v1.ndjson"), {"--answer", "2=yes"});
  EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err,
                             "--answer 2=yes: task 2 (Refactor) is not a "
                             "Prompt task"))
      << r.err;
  EXPECT_FALSE(fs::exists(inst_ + "/.wizard")) << "nothing is recorded";
}

// A Config in the workflow-file form may hold a Prompt step: its gate is
// answered by --answer on the first run (the task is the import's), and a
// pause prints a command that continues the imported run.
TEST_F(RunEntryTest, ResumeFromAnswersARealGate) {
  const Json config = {
      {"entrypoint", "Root"},
      {"steps",
       {{{"name", "Root"}, {"action", Script()}, {"next", {"Ask"}}},
        {{"name", "Ask"},
         {"action",
          {{"kind", "Prompt"}, {"mode", "confirm"}, {"message", "Go on?"}}},
         {"next", {"Done"}}},
        {{"name", "Done"}, {"action", Script()}, {"next", Json::array()}}}}};
  const std::string log = WriteLog(BarnumLog(
      config, {Submitted(0, "Root", Json::object()), Succeeded(0, {1}),
               Submitted(1, "Ask", {{"q", 1}}, 0)}));
  // By id, on the run that imports: wizq task 2 is Barnum task 1.
  WizqResult r = ResumeFrom(log, {"--answer", "2=yes"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  ASSERT_EQ(Ledger().size(), 1u);
  EXPECT_TRUE(test::Contains(Ledger()[0], "run [\"Done\"")) << Ledger()[0];
  // Without an answer it pauses; the printed command answers and goes on.
  fs::remove_all(inst_);
  r = ResumeFrom(log, {});
  ASSERT_TRUE(r.exited && r.code == 4) << r.Describe();
  const std::string prefix = "answer and go on: ";
  const size_t at = r.err.find(prefix);
  ASSERT_NE(at, std::string::npos) << r.err;
  std::string cmd = r.err.substr(at + prefix.size());
  cmd = cmd.substr(0, cmd.find("  (or"));
  EXPECT_TRUE(test::Contains(cmd, "--resume-from")) << cmd;
  r = RunWizq({"/bin/sh", "-c", cmd}, InBarnumData());
  ASSERT_TRUE(r.exited && r.code == 0) << cmd << "\n" << r.Describe();
  EXPECT_EQ(Ledger().size(), 1u);
  EXPECT_EQ(Status()["status"], "completed");
}

// --halt stops the imported run after N failures, the rest left pending
// (before: every task ran).
TEST_F(RunEntryTest, ResumeFromHaltStopsAfterTheFirstFailure) {
  const Json fails = {{"fail_times", 9}};
  const std::string log = WriteLog(
      BarnumLog({{"steps", {Step("Work", Script())}}},
                {Submitted(0, "Work", fails), Submitted(1, "Work", fails),
                 Submitted(2, "Work", fails)}));
  const WizqResult r =
      ResumeFrom(log, {"--jobs", "1", "--halt", "soon,fail=1"});
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_EQ(Ledger().size(), 1u);
  EXPECT_EQ(Status()["counts"]["failed"], 1);
  EXPECT_EQ(Status()["counts"]["pending"], 2);
}

// --retry-failed puts back the tasks Barnum dropped, on the run that
// imports them as on a resumed one (before: ignored, exit 1).
TEST_F(RunEntryTest, ResumeFromRetryFailedRunsTheDroppedTasksAgain) {
  const std::string log =
      WriteLog(BarnumLog({{"steps", {Step("Work", Script())}}},
                         {Submitted(0, "Work", {{"fail_times", 1}}), Dropped(0),
                          Submitted(1, "Work", {{"n", 2}})}));
  const WizqResult r = ResumeFrom(log, {"--retry-failed"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Ledger().size(), 2u);
  EXPECT_EQ(Status()["status"], "completed");
  EXPECT_EQ(test::Events(inst_, "task_retried").size(), 1u);
}

// --fresh imports the log again (the run in DIR archived, what wizq ran
// reused), --from STEP runs that step live again, --no-reuse everything
// (before: --fresh was refused, --from and --no-reuse ignored).
TEST_F(RunEntryTest, ResumeFromFreshFromAndNoReuseStartOverFromTheLog) {
  const std::string log = BarnumData("fanout.v1.ndjson");
  ASSERT_EQ(ResumeFrom(log, {}).code, 0);
  ASSERT_EQ(Ledger().size(), 3u);  // Refactor b and c, ListFiles' hook
  WizqResult r = ResumeFrom(log, {"--fresh"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "archived the previous run")) << r.err;
  // b and c are reused; the hook runs (its owner came from the log).
  EXPECT_EQ(Ledger().size(), 4u);
  EXPECT_EQ(Status()["reused"], 2);
  r = ResumeFrom(log, {"--from", "Refactor"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Ledger().size(), 7u);
  EXPECT_EQ(Status()["reused"], 0);
  r = ResumeFrom(log, {"--fresh", "--no-reuse"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Ledger().size(), 10u);
  EXPECT_EQ(Status()["reused"], 0);
  // Each start imported the log once.
  EXPECT_EQ(test::Events(inst_, "run_imported").size(), 1u);
}

// --- the command that answers a paused run and goes on -----------------------

class PausedRunTest : public RunEntryTest {
 protected:
  void SetUp() override {
    wf_ = dir_.Join("wf.json");
    test::WriteAll(wf_,
                   test::GateWorkflow(R"([{"kind":"Ask","value":{"n":1}},)"
                                      R"({"kind":"Work","value":{"i":1}}])",
                                      test::kConfirmAsk));
  }
  WizqResult Run(std::vector<std::string> extra) {
    std::vector<std::string> args = {"wizq", "run", wf_, "--dir", inst_};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunWizq(args);
  }
  int Archives() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(inst_ + "/.wizard/archive")) {
      n += e.is_directory();
    }
    return n;
  }
  std::string wf_;
};

// After `--fresh --from Ask` pauses, the printed command (and the
// run_paused event's) continues this run: no --fresh or --from, so it
// neither archives the run again nor loses the answer's task; and the run
// keeps what --from chose, so Install (beneath Ask) runs live rather than
// being reused from the previous run.
TEST_F(PausedRunTest, FreshFromPauseContinuesWithThePrintedCommand) {
  ASSERT_EQ(Run({"--answer", "Ask=yes"}).code, 0);
  ASSERT_EQ(test::InstallLines(inst_).size(), 1u);
  WizqResult r = Run({"--fresh", "--from", "Ask", "--jobs", "2", "--json"});
  ASSERT_TRUE(r.exited && r.code == 4) << r.Describe();
  ASSERT_EQ(Archives(), 1);
  const std::string prefix = "answer and go on: ";
  const size_t at = r.err.find(prefix);
  ASSERT_NE(at, std::string::npos) << r.err;
  std::string cmd = r.err.substr(at + prefix.size());
  cmd = cmd.substr(0, cmd.find("  (or"));
  std::string event_cmd;
  for (const Json& e : test::ParseJsonLines(r.out)) {
    if (e.value("event", "") == "run_paused") {
      event_cmd = e["waiting"][0]["command"];
    }
  }
  EXPECT_EQ(event_cmd, cmd);
  for (const char* gone : {"--fresh", "--from"}) {
    EXPECT_FALSE(test::Contains(cmd, gone)) << cmd;
  }
  EXPECT_TRUE(test::Contains(cmd, "--jobs 2 --json --answer 2=yes")) << cmd;
  r = RunWizq({"/bin/sh", "-c", cmd + " >/dev/null"});
  ASSERT_TRUE(r.exited && r.code == 0) << cmd << "\n" << r.Describe();
  EXPECT_EQ(Archives(), 1) << "the run was archived again";
  EXPECT_EQ(test::StatusJson(inst_)["status"], "completed");
  EXPECT_EQ(test::InstallLines(inst_).size(), 2u)
      << "Install, beneath Ask, must run live as --from asked";
}

// --- --from, and the hints that name the flag to use -----------------------

// --from without --fresh starts a fresh run of those steps (before: the
// finished run was left as it was and nothing ran).
TEST_F(PausedRunTest, FromWithoutFreshStartsAFreshRun) {
  ASSERT_EQ(Run({"--answer", "Ask=yes"}).code, 0);
  const size_t works =
      test::SplitLines(test::ReadAll(inst_ + "/ledger")).size();
  const WizqResult r = Run({"--from", "Work"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "archived the previous run")) << r.err;
  EXPECT_EQ(test::SplitLines(test::ReadAll(inst_ + "/ledger")).size(),
            works + 1)
      << "Work ran again, live";
  EXPECT_EQ(test::InstallLines(inst_).size(), 1u) << "the rest is reused";
}

// The line of a finished run that failed names --retry-failed.
TEST_F(RunEntryTest, FinishedFailedRunHintNamesRetryFailed) {
  const std::vector<std::string> args = {
      "wizq", "run", test::DataFile("one_fails.jsonc"), "--dir", inst_};
  ASSERT_EQ(RunWizq(args).code, 1);
  const WizqResult r = RunWizq(args);
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "has already finished")) << r.err;
  EXPECT_TRUE(test::Contains(r.err, "use --retry-failed")) << r.err;
}

// A refused change of a recorded answer says how to be asked again.
TEST_F(PausedRunTest, RefusedAnswerChangeSaysHowToAskAgain) {
  ASSERT_EQ(Run({"--answer", "Ask=yes"}).code, 0);
  const WizqResult r = Run({"--answer", "2=no"});
  EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "a recorded answer is never replaced"))
      << r.err;
  EXPECT_TRUE(test::Contains(r.err, "--fresh --from Ask")) << r.err;
}

// A misspelt --from step gets the closest step, and nothing is touched.
TEST_F(PausedRunTest, FromAnUnknownStepSuggestsTheClosest) {
  ASSERT_EQ(Run({"--answer", "Ask=yes"}).code, 0);
  const std::string log = test::ReadAll(inst_ + "/.wizard/audit.jsonl");
  const WizqResult r = Run({"--fresh", "--from", "Wrok"});
  EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "--from Wrok: not a step")) << r.err;
  EXPECT_TRUE(test::Contains(r.err, "did you mean Work?")) << r.err;
  EXPECT_EQ(test::ReadAll(inst_ + "/.wizard/audit.jsonl"), log);
}

}  // namespace
}  // namespace wizq
