// Pool steps as configured and as an agent sees them: the instructions
// generated exactly as Barnum's docs.rs does (golden files in
// tests/data/agent/), the payload, and every spelling of a Pool action
// Barnum accepts (tasks/workflow/workflow.h), linked files frozen into the run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tasks/exec/instructions.h"
#include "tasks/workflow/workflow.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using Json = nlohmann::json;

std::string AgentData(const std::string& name) {
  return test::SourceDir() + "/tests/data/agent/" + name;
}

std::unique_ptr<Workflow> LoadOk(const std::string& path) {
  std::unique_ptr<Workflow> wf;
  Status s = Workflow::Load(path, &wf);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return wf;
}

// A non-terminal step with two next steps, one with a schema (printed
// pretty with sorted keys) and one without.
TEST(AgentInstructionsTest, NonTerminalStepMatchesGolden) {
  auto wf = LoadOk(AgentData("review.json"));
  ASSERT_TRUE(wf);
  EXPECT_EQ(StepInstructions(*wf, *wf->FindStep("Review")),
            test::ReadAll(AgentData("review_step.golden.md")));
}

TEST(AgentInstructionsTest, TerminalStepMatchesGolden) {
  auto wf = LoadOk(AgentData("review.json"));
  ASSERT_TRUE(wf);
  EXPECT_EQ(StepInstructions(*wf, *wf->FindStep("Note")),
            test::ReadAll(AgentData("note_step.golden.md")));
}

// Barnum writes no instructions paragraph for empty instructions.
TEST(AgentInstructionsTest, EmptyInstructionsAddNoParagraph) {
  std::unique_ptr<Workflow> wf;
  ASSERT_TRUE(Workflow::Parse(R"({"entrypoint": "E", "steps": [
      {"name": "E", "action": {"kind": "Pool",
        "instructions": {"kind": "Inline", "value": ""}}}]})",
                              "wf", &wf)
                  .ok());
  const std::string doc = StepInstructions(*wf, *wf->FindStep("E"));
  EXPECT_NE(doc.find("# Current Step: E\n\n## Terminal Step\n"),
            std::string::npos)
      << doc;
}

TEST(AgentInstructionsTest, PayloadHasBarnumsFieldsThenWizqs) {
  auto wf = LoadOk(AgentData("review.json"));
  ASSERT_TRUE(wf);
  Task t;
  t.id = 7;
  t.type = "Review";
  t.inputs = R"({"file":"a.c"})";
  t.attempts = 2;
  PayloadInfo info;
  info.run_id = "r1";
  info.idempotency_key = "r1-5-7";
  info.lease = "tok";
  info.lease_seconds = 60;
  const std::string text = PoolPayload(*wf, *wf->FindStep("Review"), t, info);
  EXPECT_EQ(text.rfind("{\"task\":{\"kind\":\"Review\",\"value\":{\"file\":"
                       "\"a.c\"}},\"instructions\":",
                       0),
            0u)
      << text;
  const Json p = Json::parse(text);
  EXPECT_EQ(p["instructions"], StepInstructions(*wf, *wf->FindStep("Review")));
  EXPECT_TRUE(p["timeout_seconds"].is_null());
  EXPECT_EQ(p["task_id"], 7);
  EXPECT_EQ(p["attempt"], 2);
  EXPECT_EQ(p["lease"], "tok");
  EXPECT_EQ(p["lease_seconds"], 60);
  EXPECT_EQ(p["run_id"], "r1");
  EXPECT_EQ(p["idempotency_key"], "r1-5-7");
  info.lease.clear();  // `wizq run --agent`: the worker holds the claim
  const Json q =
      Json::parse(PoolPayload(*wf, *wf->FindStep("Review"), t, info));
  EXPECT_FALSE(q.contains("lease"));
  EXPECT_FALSE(q.contains("lease_seconds"));
}

// --- Barnum's spellings of a Pool action ------------------------------------

class PoolConfigTest : public ::testing::Test {
 protected:
  // Writes `workflow` (and `files`) in a scratch directory and loads it.
  Status Load(const std::string& workflow, std::unique_ptr<Workflow>* wf,
              std::vector<Finding>* findings = nullptr) {
    test::WriteAll(dir_.Join("wf.json"), workflow);
    return Workflow::Load(dir_.Join("wf.json"), wf, findings);
  }
  static std::string OneStep(const std::string& action) {
    return R"({"entrypoint": "S", "steps": [{"name": "S", "action": )" +
           action + "}]}";
  }
  test::ScratchDir dir_;
};

TEST_F(PoolConfigTest, EveryFormGivesTheSameInstructions) {
  test::WriteAll(dir_.Join("s.md"), "Do it.");
  for (
      const char* action : {
          R"({"kind": "Pool", "instructions": "Do it."})",
          R"({"kind": "Pool", "instructions": {"kind": "Inline", "value": "Do it."}})",
          R"({"kind": "Pool", "instructions": {"kind": "Link", "path": "s.md"}})",
          R"({"kind": "Pool", "params": {"instructions": "Do it."}})",
          R"({"kind": "Pool", "params": {"instructions": {"kind": "Inline", "value": "Do it."}}})",
          R"({"kind": "Pool", "params": {"instructions": {"kind": "Link", "path": "s.md"}, "pool": null, "root": "x"}})",
      }) {
    std::unique_ptr<Workflow> wf;
    Status s = Load(OneStep(action), &wf);
    ASSERT_TRUE(s.ok()) << action << ": " << s.ToString();
    const Step& step = wf->steps()[0];
    EXPECT_EQ(step.action.kind, Action::Kind::kPool) << action;
    EXPECT_EQ(step.action.instructions, "Do it.") << action;
  }
}

// The linked text is frozen into the run: the frozen workflow parses on
// its own (no file needed) and keeps the text even if the file changes.
TEST_F(PoolConfigTest, LinkedTextIsFrozenAsInline) {
  test::WriteAll(dir_.Join("s.md"), "Version one.");
  std::unique_ptr<Workflow> wf;
  ASSERT_TRUE(Load(OneStep(R"({"kind": "Pool", "params": {"instructions":
                   {"kind": "Link", "path": "s.md"}}})"),
                   &wf)
                  .ok());
  const Json frozen = Json::parse(wf->frozen_json());
  EXPECT_EQ(frozen["steps"][0]["action"]["params"]["instructions"],
            Json::parse(R"({"kind": "Inline", "value": "Version one."})"));
  test::WriteAll(dir_.Join("s.md"), "Version two.");
  std::unique_ptr<Workflow> thawed;
  ASSERT_TRUE(Workflow::Parse(wf->frozen_json(), "frozen", &thawed).ok());
  EXPECT_EQ(thawed->steps()[0].action.instructions, "Version one.");
}

TEST_F(PoolConfigTest, MissingLinkedFileIsAFindingWithItsPath) {
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Status s = Load(OneStep(R"({"kind": "Pool", "instructions":
                  {"kind": "Link", "path": "missing.md"}})"),
                  &wf, &findings);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].path, "$.steps[0].action.instructions.path");
  EXPECT_NE(findings[0].message.find("missing.md"), std::string::npos)
      << findings[0].message;
}

TEST_F(PoolConfigTest, NestedTimeoutAndCommandParams) {
  std::unique_ptr<Workflow> wf;
  Status s = Load(R"({"entrypoint": "A", "options": {"timeout": 5}, "steps": [
      {"name": "A", "action": {"kind": "Command", "params": {"script": "echo []"}},
       "next": ["P"]},
      {"name": "P", "action": {"kind": "Pool",
        "params": {"instructions": "x", "timeout": 30}},
       "options": {"lease": 2.5}}]})",
                  &wf);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(wf->FindStep("A")->action.script, "echo []");
  EXPECT_EQ(wf->FindStep("A")->options.timeout_seconds, 5);
  EXPECT_EQ(wf->FindStep("P")->options.timeout_seconds, 30);
  EXPECT_EQ(wf->FindStep("P")->options.lease_seconds, 2.5);
  EXPECT_EQ(wf->FindStep("A")->options.lease_seconds, 60);
}

TEST_F(PoolConfigTest, BadFormsAreFindingsWithPaths) {
  const struct {
    const char* action;
    const char* path;
  } cases[] = {
      {R"({"kind": "Pool", "instructions": {"kind": "Url", "path": "x"}})",
       "$.steps[0].action.instructions.kind"},
      {R"({"kind": "Pool", "instructions": {"kind": "Inline", "value": 3}})",
       "$.steps[0].action.instructions.value"},
      {R"({"kind": "Pool", "params": {"instructions": "x", "colour": 1}})",
       "$.steps[0].action.params.colour"},
      {R"({"kind": "Pool", "params": "x"})", "$.steps[0].action.params"},
      {R"({"kind": "Pool", "params": {"instructions": "x"}, "extra": 1})",
       "$.steps[0].action.extra"},
      {R"({"kind": "Command", "params": {"script": 1}})",
       "$.steps[0].action.params.script"},
      {R"({"kind": "Pool", "params": {"instructions": "x", "timeout": -1}})",
       "$.steps[0].action.params.timeout"},
  };
  for (const auto& c : cases) {
    std::unique_ptr<Workflow> wf;
    std::vector<Finding> findings;
    EXPECT_FALSE(Load(OneStep(c.action), &wf, &findings).ok()) << c.action;
    ASSERT_FALSE(findings.empty()) << c.action;
    EXPECT_EQ(findings[0].path, c.path)
        << c.action << ": " << findings[0].message;
  }
}

TEST_F(PoolConfigTest, LeaseOptionIsChecked) {
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  EXPECT_FALSE(Load(R"({"entrypoint": "S", "options": {"lease": 0}, "steps": [
      {"name": "S", "action": {"kind": "Pool", "instructions": "x"}}]})",
                    &wf, &findings)
                   .ok());
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].path, "$.options.lease");
}

}  // namespace
}  // namespace wizq
