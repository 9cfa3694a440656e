// Helpers of the workflow tests (workflow_test.cc, workflow_value_test.cc):
// one-step workflow texts, and MustParse, a workflow parsed from text that
// must be valid.
#ifndef WIZQ_TESTS_WORKFLOW_TEST_UTIL_H_
#define WIZQ_TESTS_WORKFLOW_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "tasks/workflow/workflow.h"

namespace wizq::workflow_test {

inline std::string StepA(const std::string& fields) {
  return R"({"entrypoint": "A", "steps": [{"name": "A", )" + fields + "}]}";
}

inline std::string CmdA(const std::string& extra) {
  return StepA(R"("action": {"kind": "Command", "script": "x"})" + extra);
}

inline std::unique_ptr<Workflow> MustParse(std::string_view text) {
  std::unique_ptr<Workflow> wf;
  Status s = Workflow::Parse(text, "test.json", &wf);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return wf;
}

}  // namespace wizq::workflow_test

#endif  // WIZQ_TESTS_WORKFLOW_TEST_UTIL_H_
