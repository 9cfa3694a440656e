// The human gate (SPEC §10) through the real `wizq` binary, off a terminal:
// pausing with exit 4 once everything else ran, the lines and events that
// say how to answer, `--answer` by id and by step name, `wizq answer`
// (also while a run is live), defaults, and bad answers that write nothing.
// Parsing of Prompt actions and of answers is tested at the end.
#include "tasks/exec/prompt.h"

#include <gtest/gtest.h>

#include "tasks/workflow/workflow.h"
#include "tests/prompt_util.h"

namespace wizq {
namespace {

using test::Json;
using test::ScratchDir;
using test::WizqResult;

class PromptTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  void TearDown() override { test::ReapStrays(); }

  // Writes the workflow and returns the args of `wizq run` on it.
  void Use(const std::string& root_children, const std::string& ask) {
    wf_ = scratch_.Join("wf.json");
    test::WriteAll(wf_, test::GateWorkflow(root_children, ask));
    dir_ = scratch_.Join("install");
  }
  WizqResult Run(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"wizq", "run", wf_, "--dir", dir_};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::RunWizq(args);
  }
  WizqResult Answer(std::vector<std::string> answers) {
    std::vector<std::string> args = {"wizq", "answer", "--dir", dir_};
    args.insert(args.end(), answers.begin(), answers.end());
    return test::RunWizq(args);
  }
  std::vector<Json> Installs() { return test::InstallLines(dir_); }

  ScratchDir scratch_;
  std::string wf_, dir_;
};

const char kOneAsk[] =
    R"([{"kind":"Ask","value":{"n":1}},{"kind":"Work","value":{"i":1}},)"
    R"({"kind":"Work","value":{"i":2}}])";

TEST_F(PromptTest, OffATerminalPausesAfterEverythingElseRan) {
  Use(kOneAsk, test::kConfirmAsk);
  const WizqResult r = Run();
  ASSERT_TRUE(r.exited && r.code == 4) << r.Describe();
  // Both Work branches ran before the pause.
  const std::string ledger = test::ReadAll(dir_ + "/ledger");
  EXPECT_TRUE(test::Contains(ledger, "work 3")) << ledger;
  EXPECT_TRUE(test::Contains(ledger, "work 4")) << ledger;
  EXPECT_TRUE(test::Contains(r.err, "paused: 1 task(s) wait for an answer"))
      << r.err;
  EXPECT_TRUE(test::Contains(
      r.err, "task 2 Ask (confirm): Install into the directory?"))
      << r.err;
  EXPECT_TRUE(test::Contains(
      r.err, "run " + wf_ + " --dir " + dir_ + " --answer 2=yes  (or 2=no)"))
      << r.err;
  // On a store the run is named: the answer may come from another machine.
  const std::string run_id =
      test::OnPgStore()
          ? " --run-id " + test::StatusJson(dir_)["run_id"].get<std::string>()
          : "";
  EXPECT_TRUE(test::Contains(r.err, "answer --dir " + dir_ + run_id + " 2=yes"))
      << r.err;
  const std::vector<Json> paused = test::Events(dir_, "run_paused");
  ASSERT_EQ(paused.size(), 1u);
  EXPECT_EQ(paused[0]["waiting"],
            Json::parse(R"([{"id":2,"step":"Ask","mode":"confirm",)"
                        R"("message":"Install into the directory?"}])"));
  EXPECT_EQ(test::StatusJson(dir_)["status"], "paused");
  EXPECT_EQ(test::StatusJson(dir_)["waiting_prompts"], Json::array({2}));
  EXPECT_EQ(test::ReadQueue(dir_)["status"], "paused");
  const WizqResult st = test::RunWizq({"wizq", "status", "--dir", dir_});
  EXPECT_TRUE(test::Contains(st.out, "paused")) << st.out;
  EXPECT_TRUE(test::Contains(st.out, "waiting for an answer:")) << st.out;
  EXPECT_TRUE(test::Contains(st.out, "#2 Ask (confirm)")) << st.out;
}

TEST_F(PromptTest, ReRunsWithoutAnswersPauseAndAppendOnlyTheAttempt) {
  Use(kOneAsk, test::kConfirmAsk);
  ASSERT_EQ(Run().code, 4);
  for (int i = 0; i < 2; i++) {
    const size_t before = test::ReadAudit(dir_).size();
    const WizqResult r = Run();
    EXPECT_TRUE(r.exited && r.code == 4) << r.Describe();
    EXPECT_EQ(test::EventNames(dir_, before),
              (std::vector<std::string>{"run_resumed", "worker_joined",
                                        "run_paused", "worker_left"}));
  }
  EXPECT_EQ(test::ReadAll(dir_ + "/ledger").size(), 14u) << "work ran again";
}

TEST_F(PromptTest, JsonEventNamesTheCommand) {
  Use(kOneAsk, test::kConfirmAsk);
  const WizqResult r = Run({"--json"});
  ASSERT_EQ(r.code, 4) << r.Describe();
  Json paused;
  for (const Json& e : test::ParseJsonLines(r.out)) {
    if (e["event"] == "run_paused") paused = e;
  }
  ASSERT_TRUE(paused.is_object()) << r.out;
  EXPECT_EQ(paused["waiting"][0]["id"], 2);
  EXPECT_EQ(paused["waiting"][0]["command"], test::WizqPath() + " run " + wf_ +
                                                 " --dir " + dir_ +
                                                 " --json --answer 2=yes");
}

TEST_F(PromptTest, AnswerByIdResumesAndFalseReachesTheNextStep) {
  Use(kOneAsk, test::kConfirmAsk);
  ASSERT_EQ(Run().code, 4);
  const WizqResult r = Run({"--answer", "2=No"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  ASSERT_EQ(Installs().size(), 1u);
  EXPECT_EQ(Installs()[0],
            Json::parse(R"({"kind":"Install","value":{"answer":false,)"
                        R"("value":{"n":1}}})"));
  const std::vector<Json> answered = test::Events(dir_, "task_answered");
  ASSERT_EQ(answered.size(), 1u);
  EXPECT_EQ(answered[0]["id"], 2);
  EXPECT_EQ(answered[0]["answer"], false);
  EXPECT_EQ(answered[0]["source"], "flag");
  // A recorded "no" never becomes a "yes"; the same answer again is a no-op.
  const auto before = test::RunState(dir_);
  WizqResult again = Run({"--answer", "2=yes"});
  EXPECT_TRUE(again.exited && again.code == 2) << again.Describe();
  EXPECT_TRUE(test::Contains(again.err, "already answered false")) << again.err;
  EXPECT_EQ(test::RunState(dir_), before);
  again = Run({"--answer", "Ask=no"});
  EXPECT_TRUE(again.exited && again.code == 0) << again.Describe();
}

TEST_F(PromptTest, AStepNameAnswerBindsToTheFirstTaskThatReachesTheGate) {
  Use(kOneAsk, test::kConfirmAsk);
  // One pass, as a CI job would run it: the Ask task does not exist yet.
  const WizqResult r = Run({"--answer", "Ask=yes", "--answer", "Ask=y"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  ASSERT_EQ(Installs().size(), 1u);
  EXPECT_EQ(Installs()[0]["value"]["answer"], true);
  EXPECT_EQ(test::Events(dir_, "task_answered").size(), 1u);
  EXPECT_EQ(test::Events(dir_, "run_paused").size(), 0u);
}

TEST_F(PromptTest, DefaultsAreTakenOffATerminal) {
  Use(kOneAsk, std::string(test::kConfirmAsk) + R"(, "default": true)");
  const WizqResult r = Run();
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  ASSERT_EQ(Installs().size(), 1u);
  EXPECT_EQ(Installs()[0]["value"]["answer"], true);
  const std::vector<Json> answered = test::Events(dir_, "task_answered");
  ASSERT_EQ(answered.size(), 1u);
  EXPECT_EQ(answered[0]["source"], "default");
}

// Each kind of bad answer is exit 2 and leaves .wizard/ byte for byte.
TEST_F(PromptTest, BadAnswersAreExit2AndWriteNothing) {
  Use(R"([{"kind":"Ask","value":{"n":1}},{"kind":"Pick","value":{"p":1}},)"
      R"({"kind":"Ask","value":{"n":2}}])",
      test::kConfirmAsk);
  ASSERT_EQ(Run().code, 4);  // tasks 2 and 4 (Ask), 3 (Pick) wait
  const auto before = test::RunState(dir_);
  const std::vector<std::vector<std::string>> bad = {
      {"2=maybe"},        // not a boolean
      {"2=[1]"},          // not a boolean
      {"3=huge"},         // not a choice
      {"1=yes"},          // not a Prompt task
      {"99=yes"},         // no such task
      {"Ask=yes"},        // two Ask tasks wait
      {"Nope=yes"},       // no such step
      {"2=yes", "2=no"},  // two different answers
      {"2"},              // no value
  };
  for (const auto& answers : bad) {
    std::vector<std::string> flags;
    for (const std::string& a : answers) {
      flags.push_back("--answer");
      flags.push_back(a);
    }
    const WizqResult r = Run(flags);
    EXPECT_TRUE(r.exited && r.code == 2) << answers[0] << ": " << r.Describe();
    EXPECT_EQ(test::RunState(dir_), before) << answers[0];
    const WizqResult a = Answer(answers);
    EXPECT_TRUE(a.exited && a.code == 2) << answers[0] << ": " << a.Describe();
    EXPECT_EQ(test::RunState(dir_), before) << answers[0];
  }
  // Answered by `wizq answer`, then refused a second time.
  WizqResult a = Answer({"3=full", "2=true"});
  ASSERT_TRUE(a.exited && a.code == 0) << a.Describe();
  const auto answered = test::RunState(dir_);
  a = Answer({"3=minimal"});
  EXPECT_TRUE(a.exited && a.code == 2) << a.Describe();
  EXPECT_EQ(test::RunState(dir_), answered);
  // The last Ask is answered by step name (only one waits now).
  const WizqResult r = Run({"--answer", "Ask=no"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  std::multiset<std::string> got;
  for (const Json& i : Installs()) got.insert(i["value"].dump());
  EXPECT_EQ(got,
            (std::multiset<std::string>{R"({"answer":"full","value":{"p":1}})",
                                        R"({"answer":false,"value":{"n":2}})",
                                        R"({"answer":true,"value":{"n":1}})"}));
}

TEST_F(PromptTest, WizqAnswerWhileARunIsLive) {
  Use(R"([{"kind":"Ask","value":{"n":1}},)"
      R"({"kind":"Work","value":{"i":1,"wait":true}}])",
      test::kConfirmAsk);
  test::WizqProcess run({"wizq", "run", wf_, "--dir", dir_});
  // The gate is reached while the Work task still waits for `go`.
  ASSERT_TRUE(test::WaitFor(
      [&] {
        if (!test::HasRun(dir_)) return false;
        const Json st = test::StatusJson(dir_);
        if (!st.is_object()) return false;
        for (const Json& t : st["tasks"]) {
          if (t["type"] == "Work" && t["state"] == "in_progress") return true;
        }
        return false;
      },
      std::chrono::seconds(20)));
  const WizqResult a = Answer({"Ask=yes"});
  EXPECT_TRUE(a.exited && a.code == 0) << a.Describe();
  test::WriteAll(dir_ + "/go", "");
  const WizqResult& r = run.Wait();
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  ASSERT_EQ(Installs().size(), 1u);
  EXPECT_EQ(Installs()[0]["value"]["answer"], true);
  EXPECT_EQ(test::Events(dir_, "run_paused").size(), 0u);
}

// --- parsing -----------------------------------------------------------------

// SPEC §11 applied to the gate (docs/CLI.md "Answers are reused too"): a
// fresh run reuses an unchanged prompt's answer; --from STEP asks again.
TEST_F(PromptTest, AFreshRunReusesTheAnswerAndFromAsksAgain) {
  Use(kOneAsk, test::kConfirmAsk);
  ASSERT_EQ(Run().code, 4);
  ASSERT_EQ(Run({"--answer", "2=yes"}).code, 0);
  ASSERT_EQ(Installs().size(), 1u);
  WizqResult r = Run({"--fresh"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(test::Events(dir_, "task_answered").empty())
      << "the reused answer is not asked or recorded again";
  bool ask_reused = false;
  for (const Json& e : test::Events(dir_, "task_completed")) {
    if (e["id"] == 2) ask_reused = e.contains("reused");
  }
  EXPECT_TRUE(ask_reused);
  EXPECT_EQ(Installs().size(), 1u) << "Install is reused with it";
  r = Run({"--fresh", "--from", "Ask"});
  EXPECT_TRUE(r.exited && r.code == 4) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "task 2 Ask (confirm)")) << r.err;
}

std::vector<Finding> Findings(const std::string& action) {
  const std::string text =
      R"({"entrypoint":"A","steps":[{"name":"A","action":)" + action +
      R"(,"next":["B"]},{"name":"B","action":{"kind":"Command","script":"x"}}]})";
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Workflow::Parse(text, "wf", &wf, &findings).IgnoreError();
  return findings;
}

TEST(PromptParseTest, FindingsNameTheField) {
  auto one = [](const std::string& action) {
    std::vector<Finding> f = Findings(action);
    return f.size() == 1 ? f[0].path + ": " + f[0].message
                         : std::to_string(f.size()) + " findings";
  };
  EXPECT_TRUE(
      test::Contains(one(R"({"kind":"Prompt","message":"m"})"),
                     "$.steps[0].action: missing required field \"mode\""));
  EXPECT_TRUE(
      test::Contains(one(R"({"kind":"Prompt","mode":"ask","message":"m"})"),
                     "$.steps[0].action.mode: must be"));
  EXPECT_TRUE(test::Contains(one(R"({"kind":"Prompt","mode":"confirm"})"),
                             "missing required field \"message\""));
  EXPECT_TRUE(test::Contains(
      one(R"({"kind":"Prompt","mode":"confirm","message":"m","default":"x"})"),
      "$.steps[0].action.default: does not fit"));
  EXPECT_TRUE(test::Contains(
      one(R"({"kind":"Prompt","mode":"choice","message":"m","choices":["a","a"]})"),
      "$.steps[0].action.choices[1]: duplicate choice"));
  EXPECT_TRUE(
      test::Contains(one(R"({"kind":"Prompt","mode":"choice","message":"m"})"),
                     "missing required field \"choices\""));
  EXPECT_TRUE(test::Contains(
      one(R"({"kind":"Prompt","mode":"confirm","message":"m","choices":["a"]})"),
      "$.steps[0].action.choices: is only for mode \"choice\""));
  EXPECT_TRUE(test::Contains(
      one(R"({"kind":"Prompt","mode":"input","message":"m","answer_schema":{"type":7}})"),
      "$.steps[0].action.answer_schema"));
  EXPECT_TRUE(test::Contains(
      one(R"({"kind":"Prompt","mode":"input","message":"m","colour":1})"),
      "$.steps[0].action.colour: unknown field"));
  EXPECT_TRUE(Findings(R"({"kind":"Prompt","mode":"choice","message":"m",)"
                       R"("choices":["a","b"],"default":"b"})")
                  .empty());
}

TEST(PromptParseTest, APromptPassesItsAnswerToOneStep) {
  const std::string text = R"({"entrypoint":"A","steps":[
    {"name":"A","action":{"kind":"Prompt","mode":"confirm","message":"m"},
     "next":["B","C"]},
    {"name":"B","action":{"kind":"Command","script":"x"}},
    {"name":"C","action":{"kind":"Command","script":"x"}}]})";
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  EXPECT_FALSE(Workflow::Parse(text, "wf", &wf, &findings).ok());
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].path, "$.steps[0].next");
}

TEST(PromptParseTest, RepliesAndFlags) {
  PromptSpec confirm;
  std::string a;
  for (const char* yes : {"y", "YES", "True", " yes "}) {
    ASSERT_TRUE(AnswerFromReply(confirm, yes, &a).ok()) << yes;
    EXPECT_EQ(a, "true") << yes;
  }
  for (const char* no : {"n", "No", "FALSE", ""}) {
    ASSERT_TRUE(AnswerFromReply(confirm, no, &a).ok()) << no;
    EXPECT_EQ(a, "false") << no;
  }
  EXPECT_FALSE(AnswerFromReply(confirm, "maybe", &a).ok());
  EXPECT_TRUE(AnswerFromFlag(confirm, "false", &a).ok());
  EXPECT_EQ(a, "false");
  EXPECT_FALSE(AnswerFromFlag(confirm, "\"yes\"x", &a).ok());
  PromptSpec choice;
  choice.mode = PromptSpec::Mode::kChoice;
  choice.choices = {"minimal", "full"};
  ASSERT_TRUE(AnswerFromReply(choice, "2", &a).ok());
  EXPECT_EQ(a, "\"full\"");
  ASSERT_TRUE(AnswerFromReply(choice, "minimal", &a).ok());
  EXPECT_EQ(a, "\"minimal\"");
  EXPECT_FALSE(AnswerFromReply(choice, "3", &a).ok());
  EXPECT_FALSE(AnswerFromReply(choice, "", &a).ok());
  PromptSpec input;
  input.mode = PromptSpec::Mode::kInput;
  ASSERT_TRUE(AnswerFromFlag(input, "hello world", &a).ok());
  EXPECT_EQ(a, "\"hello world\"");
  EXPECT_FALSE(AnswerFromFlag(input, "42", &a).ok()) << "42 is a number";
  ASSERT_TRUE(AnswerFromFlag(input, "\"42\"", &a).ok());
}

}  // namespace
}  // namespace wizq
