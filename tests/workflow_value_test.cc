// Tests of Workflow::ValidateValue (tasks/workflow/workflow.h): values
// checked against a step's JSON Schema, with every violation named, long
// patterns, deep $ref chains, concurrent calls and bad input.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tasks/workflow/workflow.h"
#include "tests/workflow_test_util.h"

namespace wizq::workflow_test {
namespace {

// --- ValidateValue -----------------------------------------------------------

constexpr char kSchemaWorkflow[] = R"({
  "entrypoint": "S",
  "steps": [
    {"name": "S", "action": {"kind": "Command", "script": "x"},
     "value_schema": {
       "type": "object", "required": ["file"],
       "properties": {
         "file": {"type": "string"},
         "items": {"type": "array", "items": {"type": "integer", "minimum": 0}},
         "id": {"type": "string", "pattern": "^[a-z]+$"},
         "when": {"type": "string", "format": "date-time"},
         "tag": {"enum": ["x", "y"]}}}},
    {"name": "Free", "action": {"kind": "Command", "script": "x"}},
    {"name": "Old", "action": {"kind": "Command", "script": "x"},
     "value_schema": {"$schema": "http://json-schema.org/draft-04/schema#",
                      "type": "number", "maximum": 5,
                      "exclusiveMaximum": true}}]})";

TEST(ValidateValueTest, ValidValuePasses) {
  auto wf = MustParse(kSchemaWorkflow);
  EXPECT_TRUE(wf->ValidateValue("S", R"({"file": "a", "items": [0, 3],
      "id": "abc", "when": "2024-02-29T10:00:00.5+02:00", "tag": "x"})")
                  .ok());
  EXPECT_TRUE(wf->ValidateValue("Free", "[1, {\"any\": null}]").ok());
}

TEST(ValidateValueTest, ViolationNamesPathAndConstraint) {
  auto wf = MustParse(kSchemaWorkflow);
  Status s = wf->ValidateValue("S", R"({"file": "a", "items": [1, 2, -4]})");
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("value_schema of step \"S\""), std::string::npos);
  EXPECT_NE(s.message().find("at $.items[2]: Expected number greater than or "
                             "equal to 0"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("(got -4)"), std::string::npos) << s.message();
  // The "Failed to validate item #2" wrapper is left out.
  EXPECT_EQ(s.message().find("Failed to validate"), std::string::npos)
      << s.message();
}

TEST(ValidateValueTest, ReportsEveryViolation) {
  auto wf = MustParse(kSchemaWorkflow);
  Status s = wf->ValidateValue(
      "S", R"({"id": "ABC", "when": "yesterday", "tag": "z"})");
  ASSERT_TRUE(s.IsInvalidArgument());
  for (const char* part :
       {"at $: Missing required property 'file'",
        "at $.id: String does not "
        "match the pattern \"^[a-z]+$\"",
        "at $.when: String is not a valid "
        "date-time",
        "at $.tag: Failed to match against any enum values"}) {
    EXPECT_NE(s.message().find(part), std::string::npos)
        << part << " in " << s.message();
  }
}

TEST(ValidateValueTest, ManyViolationsAreSummarized) {
  auto wf = MustParse(kSchemaWorkflow);
  std::string items = "[-1";
  for (int i = 0; i < 50000; ++i) items += ",-1";
  Status s =
      wf->ValidateValue("S", R"({"file": "f", "items": )" + items + "]}");
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("at $.items[4]: Expected number"),
            std::string::npos);
  EXPECT_EQ(s.message().find("$.items[5]"), std::string::npos);
  EXPECT_NE(s.message().find("; and more"), std::string::npos);
  EXPECT_LT(s.message().size(), 1000u);
}

TEST(ValidateValueTest, Draft4KeywordsWork) {
  auto wf = MustParse(kSchemaWorkflow);
  EXPECT_TRUE(wf->ValidateValue("Old", "4.9").ok());
  EXPECT_FALSE(wf->ValidateValue("Old", "5").ok());
}

// std::regex recurses per character: 60,000 would overflow an 8 MiB stack.
// (ThreadSanitizer's shadow stack holds only 64K frames, whatever the real
// stack size, so a TSan build checks a shorter string.)
#if defined(__SANITIZE_THREAD__)
constexpr size_t kLongPatternSubject = 5000;
#else
constexpr size_t kLongPatternSubject = 60000;
#endif

TEST(ValidateValueTest, LongStringAgainstPatternDoesNotCrash) {
  auto wf = MustParse(kSchemaWorkflow);
  std::string id(kLongPatternSubject, 'a');
  EXPECT_TRUE(
      wf->ValidateValue("S", R"({"file": "f", "id": ")" + id + "\"}").ok());
  Status s = wf->ValidateValue("S", R"({"file": "f", "id": ")" + id + "B\"}");
  EXPECT_NE(s.message().find("does not match the pattern"), std::string::npos)
      << s.message().substr(0, 300);
  std::string huge(100000, 'a');
  s = wf->ValidateValue("S", R"({"file": "f", "id": ")" + huge + "\"}");
  EXPECT_NE(s.message().find("too long to check against a 'pattern'"),
            std::string::npos)
      << s.message().substr(0, 300);
}

TEST(ValidateValueTest, PatternWorksThroughRefsAndPropertyNames) {
  auto wf = MustParse(CmdA(R"(, "value_schema": {
      "definitions": {"id": {"type": "string", "pattern": "^[0-9]+$"}},
      "type": "object",
      "propertyNames": {"pattern": "^[a-z]+$"},
      "properties": {"pattern": {"$ref": "#/definitions/id"},
                     "format": {"enum": [{"pattern": "("}]}}})"));
  EXPECT_TRUE(wf->ValidateValue("A", R"({"pattern": "123"})").ok());
  Status s = wf->ValidateValue("A", R"({"pattern": "12x"})");
  EXPECT_NE(s.message().find("at $.pattern: String does not match"),
            std::string::npos)
      << s.message();
  EXPECT_FALSE(wf->ValidateValue("A", R"({"Upper": 1})").ok());
  // Data keywords are left alone: {"pattern": "("} is a value, not a regex.
  EXPECT_TRUE(wf->ValidateValue("A", R"({"format": {"pattern": "("}})").ok());
}

// valijson's parser recurses once per $ref it follows through a real
// schema: 20,000 links (~1.3 MB of workflow) overflowed the main stack at
// 6,000. Compiled on a stack sized for the schema, they work, and values
// are checked through the whole chain.
TEST(ValidateValueTest, VeryLongRefChainCompilesAndValidates) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer needs tens of GB for a recursion this deep (OOM-killed
  // on a 24 GiB machine); the stack sizing is checked in the other builds.
  GTEST_SKIP() << "too deep a recursion for ThreadSanitizer";
#endif
  constexpr int kLinks = 20000;
  std::string defs;
  for (int i = 0; i < kLinks; i++) {
    if (i > 0) defs += ",";
    const std::string next = i + 1 < kLinks ? R"({"$ref":"#/definitions/a)" +
                                                  std::to_string(i + 1) + "\"}"
                                            : R"({"type":"integer"})";
    defs += "\"a" + std::to_string(i) +
            R"(":{"type":"array","maxItems":1,"items":)" + next + "}";
  }
  auto wf = MustParse(CmdA(R"(, "value_schema": {"definitions": {)" + defs +
                           R"(}, "$ref": "#/definitions/a0"})"));
  EXPECT_TRUE(wf->ValidateValue("A", "[]").ok());
  EXPECT_TRUE(wf->ValidateValue("A", "[[[]]]").ok());
  Status s = wf->ValidateValue("A", "[[1]]");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at $[0][0]"), std::string::npos)
      << s.message().substr(0, 300);
}

TEST(ValidateValueTest, ConcurrentCallsAreSafe) {
  auto wf = MustParse(kSchemaWorkflow);
  std::string good =
      R"({"file": "f", "id": ")" + std::string(5000, 'a') + "\"}";
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        if (!wf->ValidateValue("S", good).ok()) ++failures;
        if (wf->ValidateValue("S", R"({"id": "X"})").ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
}

TEST(ValidateValueTest, FormatIgnoresNonStrings) {
  auto wf = MustParse(CmdA(R"(, "value_schema": {"format": "date"})"));
  EXPECT_TRUE(wf->ValidateValue("A", "5").ok());
  EXPECT_TRUE(wf->ValidateValue("A", "\"2023-02-28\"").ok());
  EXPECT_FALSE(wf->ValidateValue("A", "\"2023-02-29\"").ok());
  EXPECT_FALSE(
      wf->ValidateValue("A", "\"" + std::string(50000, '1') + "\"").ok());
}

TEST(ValidateValueTest, BadInputIsAnErrorNotACrash) {
  auto wf = MustParse(kSchemaWorkflow);
  EXPECT_TRUE(wf->ValidateValue("Nope", "{}").IsInvalidArgument());
  EXPECT_TRUE(wf->ValidateValue("S", "{").IsInvalidArgument());
  EXPECT_TRUE(wf->ValidateValue("Free", "not json").IsInvalidArgument());
  EXPECT_TRUE(
      wf->ValidateValue("Free", std::string(10000, '[')).IsInvalidArgument());
}

TEST(ValidateValueTest, BooleanSchemas) {
  auto wf = MustParse(R"({"entrypoint": "T", "steps": [
      {"name": "T", "action": {"kind": "Command", "script": "x"},
       "value_schema": true},
      {"name": "F", "action": {"kind": "Command", "script": "x"},
       "value_schema": false}]})");
  EXPECT_TRUE(wf->ValidateValue("T", "1").ok());
  EXPECT_TRUE(wf->ValidateValue("F", "1").IsInvalidArgument());
}

}  // namespace
}  // namespace wizq::workflow_test
