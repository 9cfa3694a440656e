// Tests of workflow files (tasks/workflow/workflow.h, jsonc.h): JSONC,
// parsing valid workflows, the findings of invalid ones, Function actions.
// ValidateValue's cases are in workflow_value_test.cc.
#include "tasks/workflow/workflow.h"

#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "tasks/workflow/jsonc.h"
#include "tests/test_util.h"
#include "tests/workflow_test_util.h"

namespace wizq::workflow_test {
namespace {

std::string SpecExamplePath() {
  return test::SourceDir() + "/tests/data/workflows/spec_example.jsonc";
}

// A valid two-step workflow to break in one place per test.
constexpr char kMinimal[] = R"({
  "entrypoint": "A",
  "steps": [
    {"name": "A", "action": {"kind": "Command", "script": "true"},
     "next": ["B"]},
    {"name": "B", "action": {"kind": "Pool", "instructions": "Do B."}}
  ]
})";

// kMinimal with `from` replaced by `to` (once).
std::string Edit(const std::string& from, const std::string& to) {
  std::string s = kMinimal;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

std::vector<Finding> FindingsOf(std::string_view text) {
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Status s = Workflow::Parse(text, "test.json", &wf, &findings);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(wf, nullptr);
  return findings;
}

// --- JSONC ------------------------------------------------------------------

TEST(JsoncTest, StripsCommentsButNotInsideStrings) {
  std::string in =
      "{\"a\": \"// not /* a */ comment\", // line\n"
      "/* block\n comment */ \"b\": 1}";
  std::string out;
  ASSERT_TRUE(StripJsonc(in, &out).ok());
  EXPECT_EQ(out.size(), in.size());
  EXPECT_NE(out.find("\"// not /* a */ comment\""), std::string::npos);
  EXPECT_EQ(out.find("line"), std::string::npos);
  EXPECT_EQ(out.find("block"), std::string::npos);
  // Newlines are kept, so line numbers stay right.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2);
}

TEST(JsoncTest, StripsTrailingCommas) {
  std::string out;
  ASSERT_TRUE(StripJsonc("[1, 2, /* c */ ]", &out).ok());
  EXPECT_EQ(out.find(','), 2u);
  EXPECT_EQ(out.find(',', 3), std::string::npos);
  // Only a comma after a value is trailing.
  ASSERT_TRUE(StripJsonc("[,]", &out).ok());
  EXPECT_EQ(out, "[,]");
  ASSERT_TRUE(StripJsonc("{\"a\": \",}\",\n}", &out).ok());
  EXPECT_EQ(out, "{\"a\": \",}\" \n}");
}

TEST(JsoncTest, EscapedQuoteDoesNotEndString) {
  std::string out;
  ASSERT_TRUE(StripJsonc(R"(["a\"// x", 1])", &out).ok());
  EXPECT_EQ(out, R"(["a\"// x", 1])");
}

TEST(JsoncTest, UnterminatedBlockCommentNamesLine) {
  std::string out;
  Status s = StripJsonc("{\n\n  /* open\n", &out);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("line 3, column 3"), std::string::npos)
      << s.message();
}

TEST(JsoncTest, DepthGuard) {
  EXPECT_TRUE(CheckJsonDepth(std::string(256, '[')).ok());
  EXPECT_FALSE(CheckJsonDepth(std::string(257, '[')).ok());
  // Brackets in strings do not count.
  EXPECT_TRUE(CheckJsonDepth("\"" + std::string(1000, '[') + "\"").ok());
}

TEST(JsoncTest, ExcerptEscapesUnsafeBytes) {
  EXPECT_EQ(Excerpt("a\xff\n\xc3\xa9", 80), "a\\xFF\\n\xc3\xa9");
  EXPECT_EQ(Excerpt("abcdef", 3), "abc...");
  EXPECT_EQ(FirstInvalidUtf8("ok \xc3\xa9"), std::string_view::npos);
  EXPECT_EQ(FirstInvalidUtf8("ok\xed\xa0\x80"), 2u);  // a surrogate
}

// --- Parsing valid workflows -------------------------------------------------

TEST(WorkflowTest, SpecExampleLoadsWithComments) {
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Status s = Workflow::Load(SpecExamplePath(), &wf, &findings);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(findings.empty());
  EXPECT_EQ(wf->entrypoint(), "ListFiles");
  ASSERT_EQ(wf->steps().size(), 3u);

  const Step* list = wf->FindStep("ListFiles");
  ASSERT_NE(list, nullptr);
  EXPECT_EQ(list->action.kind, Action::Kind::kCommand);
  EXPECT_NE(list->action.script.find("jq -s"), std::string::npos);
  EXPECT_EQ(list->next, std::vector<std::string>{"Process"});
  EXPECT_TRUE(list->value_schema_json.empty());
  EXPECT_FALSE(list->finally_hook.has_value());

  const Step* process = wf->FindStep("Process");
  ASSERT_NE(process, nullptr);
  EXPECT_TRUE(process->next.empty());
  EXPECT_NE(process->value_schema_json.find("\"required\":[\"file\"]"),
            std::string::npos);

  const Step* review = wf->FindStep("Review");
  ASSERT_NE(review, nullptr);
  EXPECT_EQ(review->action.kind, Action::Kind::kPool);
  EXPECT_EQ(review->action.instructions, "Review the change.");
  EXPECT_EQ(wf->FindStep("Nope"), nullptr);

  char* real =
      realpath((test::SourceDir() + "/tests/data/workflows").c_str(), nullptr);
  ASSERT_NE(real, nullptr);
  EXPECT_EQ(wf->base_dir(), real);
  free(real);
}

TEST(WorkflowTest, OptionsResolveStepOverTopLevelOverDefault) {
  std::unique_ptr<Workflow> wf;
  ASSERT_TRUE(Workflow::Load(SpecExamplePath(), &wf, nullptr).ok());
  const StepOptions& list = wf->FindStep("ListFiles")->options;
  EXPECT_EQ(list.max_retries, 2);  // top level
  EXPECT_EQ(list.max_attempts(), 3);
  ASSERT_TRUE(list.timeout_seconds.has_value());
  EXPECT_DOUBLE_EQ(*list.timeout_seconds, 600);
  EXPECT_EQ(list.max_concurrency, 4);
  const StepOptions& process = wf->FindStep("Process")->options;
  EXPECT_EQ(process.max_retries, 5);  // step override
  EXPECT_EQ(process.max_attempts(), 6);
  EXPECT_DOUBLE_EQ(*process.timeout_seconds, 600);  // inherited
  EXPECT_EQ(wf->default_options().max_retries, 2);
}

TEST(WorkflowTest, DefaultsAreBarnums) {
  auto wf = MustParse(kMinimal);
  const StepOptions& o = wf->FindStep("A")->options;
  EXPECT_EQ(o.max_retries, 0);
  EXPECT_EQ(o.max_attempts(), 1);
  EXPECT_FALSE(o.timeout_seconds.has_value());
  EXPECT_EQ(o.max_concurrency, StepOptions::kUnlimited);
  EXPECT_TRUE(o.retry_on_timeout);
  EXPECT_TRUE(o.retry_on_invalid_response);
  EXPECT_TRUE(wf->FindStep("B")->next.empty());  // `next` omitted: terminal
  EXPECT_TRUE(wf->base_dir().empty());
}

TEST(WorkflowTest, ExplicitNullInStepOverridesTopLevel) {
  auto wf = MustParse(R"({
    "entrypoint": "A",
    "options": {"timeout": 5, "max_concurrency": 2, "retry_on_timeout": false},
    "steps": [
      {"name": "A", "action": {"kind": "Command", "script": "x"},
       "options": {"timeout": null, "max_concurrency": null,
                   "retry_on_invalid_response": false}},
      {"name": "B", "action": {"kind": "Command", "script": "x"},
       "options": {"timeout": 0.5}}]})");
  const StepOptions& a = wf->FindStep("A")->options;
  EXPECT_FALSE(a.timeout_seconds.has_value());
  EXPECT_EQ(a.max_concurrency, StepOptions::kUnlimited);
  EXPECT_FALSE(a.retry_on_timeout);  // inherited
  EXPECT_FALSE(a.retry_on_invalid_response);
  const StepOptions& b = wf->FindStep("B")->options;
  EXPECT_DOUBLE_EQ(*b.timeout_seconds, 0.5);
  EXPECT_EQ(b.max_concurrency, 2);
  EXPECT_TRUE(b.retry_on_invalid_response);
}

TEST(WorkflowTest, FinallyHookAndSchemaField) {
  auto wf = MustParse(R"({
    "$schema": "./barnum-config-schema.json",
    "entrypoint": "A",
    "steps": [{"name": "A", "action": {"kind": "Command", "script": "x"},
               "finally": {"kind": "Command", "script": "./done.sh"}}]})");
  const Step* a = wf->FindStep("A");
  ASSERT_TRUE(a->finally_hook.has_value());
  auto nulls = MustParse(CmdA(R"(, "finally": null, "value_schema": null)"));
  EXPECT_FALSE(nulls->FindStep("A")->finally_hook.has_value());
  EXPECT_TRUE(nulls->FindStep("A")->value_schema_json.empty());
  EXPECT_EQ(a->finally_hook->kind, Action::Kind::kCommand);
  EXPECT_EQ(a->finally_hook->script, "./done.sh");
}

TEST(WorkflowTest, FrozenJsonRoundTrips) {
  std::unique_ptr<Workflow> wf;
  ASSERT_TRUE(Workflow::Load(SpecExamplePath(), &wf, nullptr).ok());
  const std::string& frozen = wf->frozen_json();
  EXPECT_EQ(frozen.find("//"), std::string::npos);
  EXPECT_EQ(frozen.find('\n'), std::string::npos);
  auto again = MustParse(frozen);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->frozen_json(), frozen);
  EXPECT_EQ(again->entrypoint(), wf->entrypoint());
  ASSERT_EQ(again->steps().size(), wf->steps().size());
  for (size_t i = 0; i < wf->steps().size(); ++i) {
    const Step& x = wf->steps()[i];
    const Step& y = again->steps()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.action.script, y.action.script);
    EXPECT_EQ(x.action.instructions, y.action.instructions);
    EXPECT_EQ(x.next, y.next);
    EXPECT_EQ(x.value_schema_json, y.value_schema_json);
    EXPECT_EQ(x.options.max_retries, y.options.max_retries);
    EXPECT_EQ(x.options.timeout_seconds, y.options.timeout_seconds);
  }
}

TEST(WorkflowTest, LoadMissingFileIsNotAFinding) {
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Status s = Workflow::Load("/nonexistent/wf.json", &wf, &findings);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(s.IsInvalidArgument());
  EXPECT_TRUE(findings.empty());
}

// --- Findings ----------------------------------------------------------------

struct FindingCase {
  const char* name;
  std::string json;
  std::string path;
  std::string message_part;
};

std::vector<FindingCase> FindingCases() {
  return {
      {"NotAnObject", "[1, 2]", "$", "must be a JSON object"},
      {"MissingSteps", R"({"entrypoint": "A"})", "$", "\"steps\""},
      {"EmptySteps", R"({"entrypoint": "A", "steps": []})", "$.steps",
       "non-empty array"},
      {"StepsNotArray", R"({"entrypoint": "A", "steps": {}})", "$.steps",
       "non-empty array"},
      {"MissingEntrypoint", Edit(R"("entrypoint": "A",)", ""), "$",
       "\"entrypoint\""},
      {"EntrypointNotString",
       Edit(R"("entrypoint": "A")", R"("entrypoint": 1)"), "$.entrypoint",
       "must be a step name"},
      {"UnknownEntrypoint",
       Edit(R"("entrypoint": "A")", R"("entrypoint": "C")"), "$.entrypoint",
       "defined steps are: A, B"},
      {"DuplicateStepName", Edit(R"("name": "B")", R"("name": "A")"),
       "$.steps[1].name", "duplicate step name \"A\" (also at $.steps[0])"},
      {"UnknownTopField", Edit(R"("steps")", R"("stepz": 1, "steps")"),
       "$.stepz", "did you mean \"steps\"?"},
      {"UnknownStepField", Edit(R"("next")", R"("nxt": [], "next")"),
       "$.steps[0].nxt", "allowed fields: name, action, next"},
      {"UnknownActionField",
       Edit(R"("script": "true")", R"("script": "true", "instructions": "")"),
       "$.steps[0].action.instructions", "allowed fields: kind, script"},
      {"UnknownOptionsField",
       Edit(R"("steps")", R"("options": {"retries": 1}, "steps")"),
       "$.options.retries", "max_retries"},
      {"UnknownStepOptionsField", CmdA(R"(, "options": {"foo": 1})"),
       "$.steps[0].options.foo", "unknown field \"foo\""},
      {"OddKeyPathIsQuoted", CmdA(R"(, "a b": 1)"), "$.steps[0][\"a b\"]",
       "unknown field"},
      {"NameNotString", Edit(R"("name": "A")", R"("name": 7)"),
       "$.steps[0].name", "must be a non-empty string, got 7"},
      {"NameEmpty", Edit(R"("name": "A")", R"("name": "")"), "$.steps[0].name",
       "non-empty string"},
      {"StepNotObject", Edit(R"({"name": "B")", R"(5, {"name": "B")"),
       "$.steps[1]", "must be an object"},
      {"MissingAction", StepA(R"("next": [])"), "$.steps[0]",
       "missing required field \"action\""},
      {"NextNotArray", Edit(R"(["B"])", R"("B")"), "$.steps[0].next",
       "must be an array of step names"},
      {"NextElementNotString", Edit(R"(["B"])", R"(["B", 3])"),
       "$.steps[0].next[1]", "must be a step name"},
      {"NextUnknownStep", Edit(R"(["B"])", R"(["C"])"), "$.steps[0].next[0]",
       "step \"C\" is not defined; defined steps are: A, B"},
      {"NextTypoSuggests", Edit(R"(["B"])", R"(["A", "b"])"),
       "$.steps[0].next[1]", "did you mean \"B\"?"},
      {"UnknownActionKind",
       Edit(R"("kind": "Command")", R"("kind": "command")"),
       "$.steps[0].action.kind", "did you mean \"Command\"?"},
      {"ActionNotObject", StepA(R"("action": "ls")"), "$.steps[0].action",
       "must be an action object"},
      {"CommandWithoutScript", StepA(R"("action": {"kind": "Command"})"),
       "$.steps[0].action", "missing required field \"script\""},
      {"CommandEmptyScript",
       StepA(R"("action": {"kind": "Command", "script": ""})"),
       "$.steps[0].action.script", "non-empty string"},
      {"PoolWithoutInstructions", StepA(R"("action": {"kind": "Pool"})"),
       "$.steps[0].action", "missing required field \"instructions\""},
      {"ActionWithoutKind", StepA(R"("action": {"script": "x"})"),
       "$.steps[0].action", "missing required field \"kind\""},
      {"SchemaUnknownType", CmdA(R"(, "value_schema": {"type": "strnig"})"),
       "$.steps[0].value_schema", "strnig"},
      {"SchemaNotObject", CmdA(R"(, "value_schema": 5)"),
       "$.steps[0].value_schema", "must be a JSON Schema object"},
      {"SchemaBadRequired", CmdA(R"(, "value_schema": {"required": "x"})"),
       "$.steps[0].value_schema", "not a valid JSON Schema"},
      {"SchemaBadPattern", CmdA(R"(, "value_schema": {"pattern": "("})"),
       "$.steps[0].value_schema", "not a valid regex"},
      {"SchemaBadPatternProperties",
       CmdA(R"(, "value_schema": {"patternProperties": {"[": {}}})"),
       "$.steps[0].value_schema", "not a valid regex"},
      {"SchemaRemoteRef",
       CmdA(R"(, "value_schema": {"$ref": "http://example.com/s.json"})"),
       "$.steps[0].value_schema", "remote JSON References"},
      {"NegativeMaxRetries",
       Edit(R"("steps")", R"("options": {"max_retries": -1}, "steps")"),
       "$.options.max_retries", "integer from 0"},
      {"FractionalMaxRetries", CmdA(R"(, "options": {"max_retries": 1.5})"),
       "$.steps[0].options.max_retries", "got 1.5"},
      {"ZeroTimeout",
       Edit(R"("steps")", R"("options": {"timeout": 0}, "steps")"),
       "$.options.timeout", "greater than 0"},
      {"StringTimeout", CmdA(R"(, "options": {"timeout": "10"})"),
       "$.steps[0].options.timeout", "got \"10\""},
      {"ZeroMaxConcurrency", CmdA(R"(, "options": {"max_concurrency": 0})"),
       "$.steps[0].options.max_concurrency", "from 1"},
      {"RetryFlagNotBool", CmdA(R"(, "options": {"retry_on_timeout": "yes"})"),
       "$.steps[0].options.retry_on_timeout", "true or false"},
      {"OptionsNotObject", CmdA(R"(, "options": [])"), "$.steps[0].options",
       "must be an object"},
      {"FinallyPool",
       CmdA(R"(, "finally": {"kind": "Pool", "instructions": "x"})"),
       "$.steps[0].finally.kind", "a finally hook must be"},
      {"FinallyNotObject", CmdA(R"(, "finally": "./done.sh")"),
       "$.steps[0].finally", "must be a finally hook object"},
      {"FinallyWithoutScript", CmdA(R"(, "finally": {"kind": "Command"})"),
       "$.steps[0].finally", "\"script\""},
      {"DuplicateKey", Edit(R"("name": "A",)", R"("name": "A", "name": "A",)"),
       "$.steps[0].name", "duplicate key"},
      {"SchemaFieldNotString", Edit(R"("steps")", R"("$schema": 1, "steps")"),
       "$.$schema", "must be a string"},
      {"SyntaxError", "{\n  \"entrypoint\": \"A\",\n  \"steps\": [,]\n}", "$",
       "line 3, column 13"},
      {"SyntaxErrorAfterComments", "// c\n/* c\n c */ {\"entrypoint\" \"A\"}",
       "$", "line 3, column 23"},
      {"UnterminatedComment", "{ /* x", "$", "unterminated /* comment"},
      {"InvalidUtf8", "{\"entrypoint\": \"\xff\"}", "$", "\\xFF"},
      {"NumberOverflow", CmdA(R"(, "options": {"timeout": 1e400})"), "$",
       "number overflow"},
      {"TooDeep", "{\"entrypoint\": " + std::string(300, '[') + "}", "$",
       "deeper than 256"},
  };
}

class FindingTest : public testing::TestWithParam<FindingCase> {};

TEST_P(FindingTest, ReportsPathAndMessage) {
  const FindingCase& c = GetParam();
  std::vector<Finding> findings = FindingsOf(c.json);
  bool found = false;
  std::string all;
  for (const Finding& f : findings) {
    all += "\n  " + f.path + ": " + f.message;
    if (f.path == c.path && f.message.find(c.message_part) != std::string::npos)
      found = true;
  }
  EXPECT_TRUE(found) << "want " << c.path << ": ..." << c.message_part
                     << "...; got:" << all;
}

INSTANTIATE_TEST_SUITE_P(All, FindingTest, testing::ValuesIn(FindingCases()),
                         [](const auto& info) { return info.param.name; });

TEST(WorkflowTest, AllFindingsReportedAtOnce) {
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Status s = Workflow::Parse(R"({
    "entrypoint": "Nope",
    "extra": true,
    "options": {"max_retries": -3},
    "steps": [
      {"name": "A", "action": {"kind": "Command"}, "next": ["Ghost"]},
      {"name": "A", "action": {"kind": "Pool", "instructions": "x"},
       "value_schema": {"type": 5}}]})",
                             "wf.json", &wf, &findings);
  ASSERT_TRUE(s.IsInvalidArgument());
  std::vector<std::string> want = {
      "$.extra",           "$.options.max_retries",
      "$.steps[0].action", "$.steps[0].next[0]",
      "$.steps[1].name",   "$.steps[1].value_schema",
      "$.entrypoint"};
  ASSERT_EQ(findings.size(), want.size()) << s.message();
  for (const std::string& path : want) {
    bool found = false;
    for (const Finding& f : findings) found = found || f.path == path;
    EXPECT_TRUE(found) << path;
    EXPECT_NE(s.message().find("\n  " + path + ": "), std::string::npos)
        << s.message();
  }
  EXPECT_EQ(s.message().rfind("wf.json: 7 problems:", 0), 0u) << s.message();
}

TEST(WorkflowTest, FindingsClearedOnSuccess) {
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings = {{"$", "stale"}};
  ASSERT_TRUE(Workflow::Parse(kMinimal, "t", &wf, &findings).ok());
  EXPECT_TRUE(findings.empty());
}

// Function actions (docs/EMBEDDING.md): named after their step unless they
// say "handler"; a finally hook may be one ("STEP.finally").
TEST(WorkflowTest, FunctionActionsAndHooks) {
  auto wf = MustParse(R"({"entrypoint": "A", "steps": [
      {"name": "A", "action": {"kind": "Function"}, "next": ["B"],
       "finally": {"kind": "Function"}},
      {"name": "B", "action": {"kind": "Function", "handler": "Bee"},
       "finally": {"kind": "Function", "handler": "Done"}}]})");
  const Step* a = wf->FindStep("A");
  EXPECT_EQ(a->action.kind, Action::Kind::kFunction);
  EXPECT_EQ(a->action.handler, "A");
  EXPECT_EQ(a->finally_hook->handler, "A.finally");
  EXPECT_EQ(wf->FindStep("B")->action.handler, "Bee");
  EXPECT_EQ(wf->FindStep("B")->finally_hook->handler, "Done");
}

TEST(WorkflowTest, FunctionActionFindings) {
  std::vector<Finding> f;
  std::unique_ptr<Workflow> wf;
  EXPECT_FALSE(Workflow::Parse(R"({"entrypoint": "A", "steps": [
      {"name": "A", "action": {"kind": "Function", "script": "x"}},
      {"name": "B", "action": {"kind": "Function", "handler": ""}},
      {"name": "C", "action": {"kind": "Functoin"}}]})",
                               "wf.json", &wf, &f)
                   .ok());
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].path, "$.steps[0].action.script");
  EXPECT_EQ(f[1].path, "$.steps[1].action.handler");
  EXPECT_EQ(f[2].path, "$.steps[2].action.kind");
  EXPECT_NE(f[2].message.find("did you mean \"Function\""), std::string::npos)
      << f[2].message;
}

}  // namespace
}  // namespace wizq::workflow_test
