#include "tasks/workflow/response.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tasks/workflow/workflow.h"

namespace wizq {
namespace {

constexpr char kWorkflow[] = R"({
  "entrypoint": "List",
  "steps": [
    {"name": "List", "action": {"kind": "Command", "script": "ls"},
     "value_schema": {"type": "object", "required": ["dir"],
                      "properties": {"dir": {"type": "string"}}},
     "next": ["Process", "Report"]},
    {"name": "Process", "action": {"kind": "Command", "script": "p"},
     "value_schema": {"type": "object", "required": ["file"],
                      "additionalProperties": false,
                      "properties": {"file": {"type": "string"},
                                     "size": {"type": "integer"}}},
     "next": []},
    {"name": "Report", "action": {"kind": "Pool", "instructions": "Sum up."}}
  ]
})";

class ResponseTest : public testing::Test {
 protected:
  void SetUp() override {
    Status s = Workflow::Parse(kWorkflow, "wf.json", &wf_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // ParseResponse for a task of `step`; expects failure, returns the message.
  std::string Invalid(const std::string& step, std::string_view out) {
    std::vector<NextTask> tasks = {{"stale", "1"}};
    Status s = ParseResponse(*wf_, *wf_->FindStep(step), out, &tasks);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_TRUE(tasks.empty());
    return s.message();
  }

  std::unique_ptr<Workflow> wf_;
};

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "no \"" << (needle) << "\" in: " << (haystack)

TEST_F(ResponseTest, ValidMultiElementResponse) {
  std::vector<NextTask> tasks;
  Status s = ParseResponse(*wf_, *wf_->FindStep("List"), R"(
      [ {"kind": "Process", "value": {"file": "a.c", "size": 3}},
        {"value": {"file": "b.c"}, "kind": "Process"},
        {"kind": "Report", "value": [1, "two", null]} ]
  )",
                           &tasks);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].kind, "Process");
  EXPECT_EQ(tasks[0].value_json, R"({"file":"a.c","size":3})");
  EXPECT_EQ(tasks[1].value_json, R"({"file":"b.c"})");
  EXPECT_EQ(tasks[2].kind, "Report");
  EXPECT_EQ(tasks[2].value_json, R"([1,"two",null])");
}

TEST_F(ResponseTest, TerminalStepWithEmptyArray) {
  std::vector<NextTask> tasks = {{"stale", "1"}};
  ASSERT_TRUE(
      ParseResponse(*wf_, *wf_->FindStep("Process"), "[]\n", &tasks).ok());
  EXPECT_TRUE(tasks.empty());
}

TEST_F(ResponseTest, TerminalStepMustPrintEmptyArray) {
  std::string msg = Invalid("Process", R"([{"kind": "Report", "value": 1}])");
  EXPECT_CONTAINS(msg, "element [0]");
  EXPECT_CONTAINS(msg, "step \"Process\" is terminal");
}

TEST_F(ResponseTest, EmptyOutput) {
  EXPECT_CONTAINS(Invalid("List", ""), "got empty output");
  EXPECT_CONTAINS(Invalid("List", " \n\t\r\n"), "got empty output");
}

TEST_F(ResponseTest, NotJson) {
  std::string msg = Invalid("List", "Listing files...\n[]");
  EXPECT_CONTAINS(msg, "stdout is not valid JSON");
  EXPECT_CONTAINS(msg, "line 1, column 1");
  EXPECT_CONTAINS(msg, "it starts with: Listing files...\\n[]");
  EXPECT_CONTAINS(Invalid("List", "[] []"), "not valid JSON");
  EXPECT_CONTAINS(Invalid("List", "[1e400]"), "number overflow");
  // A trailing comma is JSONC, not JSON.
  EXPECT_CONTAINS(Invalid("List", "[{\"kind\": \"Report\", \"value\": 1},]"),
                  "not valid JSON");
}

TEST_F(ResponseTest, NotAnArray) {
  EXPECT_CONTAINS(Invalid("List", "{\"kind\": \"Report\", \"value\": 1}"),
                  "got an object; wrap a single task in [ ]");
  EXPECT_CONTAINS(Invalid("List", "\"done\""),
                  "expected a JSON array of next tasks");
}

TEST_F(ResponseTest, KindOutsideNext) {
  std::string msg =
      Invalid("List", R"([{"kind": "List", "value": {"dir": "."}}])");
  EXPECT_CONTAINS(msg,
                  "element [0]: kind \"List\" is not a next step of "
                  "\"List\"; allowed: \"Process\", \"Report\"");
  EXPECT_CONTAINS(Invalid("List", R"([{"kind": "Nope", "value": 1}])"),
                  "kind \"Nope\" is not a next step");
}

TEST_F(ResponseTest, SchemaViolationNamesElementKindAndPath) {
  std::string msg = Invalid("List", R"([
      {"kind": "Process", "value": {"file": "ok"}},
      {"kind": "Process", "value": {"file": 7, "extra": true}}])");
  EXPECT_CONTAINS(msg,
                  "element [1]: kind \"Process\": value does not match "
                  "the value_schema of step \"Process\"");
  EXPECT_CONTAINS(msg,
                  "at $.file: Value type not permitted by 'type' "
                  "constraint (got 7)");
  EXPECT_CONTAINS(msg, "'extra'");
  EXPECT_EQ(msg.find("element [0]"), std::string::npos) << msg;
}

TEST_F(ResponseTest, MalformedElements) {
  EXPECT_CONTAINS(Invalid("List", "[42]"),
                  "element [0]: expected an object {\"kind\": ..., "
                  "\"value\": ...}, got 42");
  EXPECT_CONTAINS(Invalid("List", R"([{"value": 1}])"),
                  "\"kind\" must be the name of a step (a string), but it is "
                  "missing");
  EXPECT_CONTAINS(Invalid("List", R"([{"kind": 3, "value": 1}])"), "got 3");
  EXPECT_CONTAINS(Invalid("List", R"([{"kind": "Report"}])"),
                  "missing \"value\"");
  EXPECT_CONTAINS(
      Invalid("List", R"([{"kind": "Report", "value": 1, "vaule": 2}])"),
      "unknown field \"vaule\"");
}

TEST_F(ResponseTest, EveryBadElementIsListed) {
  std::string msg = Invalid(
      "List", R"([1, {"kind": "Report", "value": 0}, 2, 3, 4, 5, 6, 7])");
  EXPECT_CONTAINS(msg, "element [0]");
  EXPECT_CONTAINS(msg, "element [2]");
  EXPECT_CONTAINS(msg, "element [5]");
  EXPECT_EQ(msg.find("element [1]"), std::string::npos);
  EXPECT_CONTAINS(msg, "and 2 more invalid elements");
}

TEST_F(ResponseTest, InvalidUtf8IsAnErrorNotACrash) {
  EXPECT_CONTAINS(Invalid("List", "[\xff]"), "not valid UTF-8");
  std::string msg =
      Invalid("List", "[{\"kind\": \"Report\", \"value\": \"a\xc3\x28\"}]");
  EXPECT_CONTAINS(msg, "not valid UTF-8 (bad byte at line 1, column 32)");
  EXPECT_CONTAINS(Invalid("List", "[\"\xed\xa0\x80\"]"), "not valid UTF-8");
}

TEST_F(ResponseTest, DeepNestingIsRejected) {
  std::string deep =
      "[{\"kind\": \"Report\", \"value\": " + std::string(100000, '[') +
      std::string(100000, ']') + "}]";
  EXPECT_CONTAINS(Invalid("List", deep), "deeper than 256 levels");
  std::string ok =
      "[{\"kind\": \"Report\", \"value\": " + std::string(200, '[') +
      std::string(200, ']') + "}]";
  std::vector<NextTask> tasks;
  EXPECT_TRUE(ParseResponse(*wf_, *wf_->FindStep("List"), ok, &tasks).ok());
}

TEST_F(ResponseTest, LargeResponse) {
  std::string out = "[";
  for (int i = 0; i < 20000; ++i) {
    out += (i ? "," : "") +
           std::string(
               "{\"kind\":\"Process\",\"value\":"
               "{\"file\":\"f") +
           std::to_string(i) + "\"}}";
  }
  out += "]";
  std::vector<NextTask> tasks;
  ASSERT_TRUE(ParseResponse(*wf_, *wf_->FindStep("List"), out, &tasks).ok());
  EXPECT_EQ(tasks.size(), 20000u);
  EXPECT_EQ(tasks.back().value_json, "{\"file\":\"f19999\"}");
}

TEST_F(ResponseTest, EveryTruncationFailsCleanly) {
  const std::string full =
      R"([{"kind": "Process", "value": {"file": "a\u00e9\"b"}}])";
  std::vector<NextTask> tasks;
  for (size_t n = 0; n < full.size(); ++n) {
    Status s =
        ParseResponse(*wf_, *wf_->FindStep("List"), full.substr(0, n), &tasks);
    EXPECT_TRUE(s.IsInvalidArgument()) << n;
  }
  EXPECT_TRUE(ParseResponse(*wf_, *wf_->FindStep("List"), full, &tasks).ok());
}

TEST_F(ResponseTest, HookResponseMayNameAnyStep) {
  std::vector<NextTask> tasks;
  Status s = ParseHookResponse(
      *wf_, R"([{"kind": "List", "value": {"dir": "x"}}])", &tasks);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].kind, "List");
  s = ParseHookResponse(*wf_, R"([{"kind": "Ghost", "value": 1}])", &tasks);
  EXPECT_CONTAINS(s.message(), "kind \"Ghost\" is not a step of the workflow");
  s = ParseHookResponse(*wf_, R"([{"kind": "List", "value": {}}])", &tasks);
  EXPECT_CONTAINS(s.message(), "Missing required property 'dir'");
  EXPECT_TRUE(tasks.empty());
}

TEST_F(ResponseTest, EntryInput) {
  EXPECT_TRUE(ValidateEntryInput(*wf_, R"({"dir": "src"})").ok());
  Status s = ValidateEntryInput(*wf_, R"({"dir": ["src"]})");
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_CONTAINS(s.message(),
                  "the entry input does not match the "
                  "value_schema of step \"List\": at $.dir");
  EXPECT_CONTAINS(ValidateEntryInput(*wf_, "").message(), "is empty");
  EXPECT_CONTAINS(ValidateEntryInput(*wf_, "{dir: 1}").message(),
                  "the entry input is not valid JSON");
  EXPECT_CONTAINS(ValidateEntryInput(*wf_, "\"\xff\"").message(),
                  "not valid UTF-8");
}

// Response -> children: a task's children attach to it, with their step's
// attempts and finally flag; a finally hook's attach to its owner's parent.
TEST_F(ResponseTest, ChildrenOfATaskAttachToIt) {
  Task list;
  list.id = 4;
  list.parent_id = 1;
  list.type = "List";
  list.origin = Origin::kSpawned;
  std::vector<NewTask> children;
  ASSERT_TRUE(ChildrenOf(*wf_, list,
                         R"([{"kind":"Process","value":{"file":"a"}},)"
                         R"({"kind":"Report","value":1}])",
                         &children)
                  .ok());
  ASSERT_EQ(children.size(), 2u);
  EXPECT_EQ(children[0].type, "Process");
  EXPECT_EQ(children[0].inputs, R"({"file":"a"})");
  EXPECT_EQ(children[0].parent_id, 4);
  EXPECT_EQ(children[0].origin, Origin::kSpawned);
  EXPECT_EQ(children[0].max_attempts, 1);
  EXPECT_FALSE(children[0].has_finally);
  EXPECT_EQ(children[1].type, "Report");

  Task hook = list;
  hook.origin = Origin::kFinally;
  hook.finally_for = 2;
  ASSERT_TRUE(ChildrenOf(*wf_, hook, R"([{"kind":"List","value":{"dir":"x"}}])",
                         &children)
                  .ok());
  ASSERT_EQ(children.size(), 1u);
  EXPECT_EQ(children[0].parent_id, 1);  // the hook's parent: owner's parent
}

TEST_F(ResponseTest, ChildrenOfAnInvalidResponseIsAnError) {
  Task process;
  process.id = 2;
  process.type = "Process";
  std::vector<NewTask> children;
  Status s =
      ChildrenOf(*wf_, process, R"([{"kind":"List","value":{}}])", &children);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(children.empty());
  process.type = "Gone";
  EXPECT_TRUE(ChildrenOf(*wf_, process, "[]", &children).IsInvalidArgument());
}

TEST_F(ResponseTest, RootTaskAndFinallyHook) {
  const NewTask root = RootTask(*wf_, R"({"dir":"."})");
  EXPECT_EQ(root.type, "List");
  EXPECT_EQ(root.inputs, R"({"dir":"."})");
  EXPECT_EQ(root.parent_id, 0);
  EXPECT_EQ(root.origin, Origin::kInitial);
  Task owner;
  owner.id = 3;
  owner.parent_id = 1;
  owner.type = "Process";
  owner.inputs = R"({"file":"a"})";
  const NewTask hook = FinallyHookOf(*wf_, owner);
  EXPECT_EQ(hook.type, "Process");
  EXPECT_EQ(hook.inputs, owner.inputs);
  EXPECT_EQ(hook.parent_id, 1);
  EXPECT_EQ(hook.origin, Origin::kFinally);
  EXPECT_EQ(hook.finally_for, 3);
}

}  // namespace
}  // namespace wizq
