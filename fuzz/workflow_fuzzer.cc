// Fuzz target: the workflow file (tasks/workflow/workflow.h), JSON or JSONC.
//
// Workflow::Parse must accept the text or return InvalidArgument with at
// least one finding; never crash. For an accepted workflow:
//  - every `next` names a step and the entrypoint exists;
//  - frozen_json() parses again to a workflow with the same frozen_json()
//    (a run freezes it into queue.json and thaws it on resume);
//  - ValidateValue of a few values against each step's compiled schema
//    returns OK or InvalidArgument, as does a response naming each step.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "tasks/workflow/response.h"
#include "tasks/workflow/workflow.h"
#include "util/json_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wizq;
  const std::string_view text = fuzz::AsText(data, size);
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Status s = Workflow::Parse(text, "wf.jsonc", &wf, &findings);
  if (!s.ok()) {
    FUZZ_CHECK(s.IsInvalidArgument(), s.ToString());
    FUZZ_CHECK(!findings.empty(), "an error without findings: " + s.ToString());
    FUZZ_CHECK(wf == nullptr, "*out set on error");
    FUZZ_CHECK(s.message().rfind("wf.jsonc", 0) == 0,
               "the message does not start with the source: " + s.ToString());
    return 0;
  }
  FUZZ_CHECK(wf != nullptr, "OK without a workflow");
  FUZZ_CHECK(!wf->steps().empty(), "no steps");
  FUZZ_CHECK(wf->FindStep(wf->entrypoint()) != nullptr, "no entrypoint step");
  for (const Step& step : wf->steps()) {
    FUZZ_CHECK(wf->FindStep(step.name) == &step, "FindStep(" + step.name + ")");
    for (const std::string& n : step.next) {
      FUZZ_CHECK(wf->FindStep(n) != nullptr, "next names no step: " + n);
    }
    FUZZ_CHECK(step.options.max_retries >= 0 &&
                   step.options.max_retries <= StepOptions::kMaxCount,
               "max_retries out of range");
    FUZZ_CHECK(step.options.max_concurrency >= 1, "max_concurrency < 1");
    if (step.options.timeout_seconds) {
      FUZZ_CHECK(
          *step.options.timeout_seconds > 0 &&
              *step.options.timeout_seconds <= StepOptions::kMaxTimeoutSeconds,
          "timeout out of range");
    }
  }

  std::unique_ptr<Workflow> thawed;
  s = Workflow::Parse(wf->frozen_json(), "frozen", &thawed);
  FUZZ_CHECK(s.ok(), "the frozen workflow does not parse: " + s.ToString() +
                         "\n" + wf->frozen_json());
  FUZZ_CHECK(thawed->frozen_json() == wf->frozen_json(),
             "freezing is not stable:\n" + wf->frozen_json() + "\n" +
                 thawed->frozen_json());

  static const char* const kValues[] = {
      "{}",
      "null",
      "[1,\"x\",{}]",
      "\"2024-02-29T12:00:00Z\"",
      "{\"file\":\"a.txt\",\"n\":3,\"name\":\"x\",\"i\":-1}",
      "1e308"};
  size_t checked = 0;
  for (const Step& step : wf->steps()) {
    if (checked++ == 16) break;  // keep each input cheap
    for (const char* v : kValues) {
      Status vs = wf->ValidateValue(step.name, v);
      FUZZ_CHECK(vs.ok() || vs.IsInvalidArgument(), vs.ToString());
    }
    std::string response = "[{\"kind\":";
    AppendJsonString(&response, step.name);
    response += ",\"value\":{}}]";
    std::vector<NextTask> out;
    Status rs = ParseHookResponse(*wf, response, &out);
    FUZZ_CHECK(rs.ok() || rs.IsInvalidArgument(), rs.ToString());
    FUZZ_CHECK(rs.ok() == (wf->ValidateValue(step.name, "{}").ok()),
               "a response and ValidateValue disagree on {} for " + step.name);
  }
  Status es = ValidateEntryInput(*wf, "{}");
  FUZZ_CHECK(es.ok() || es.IsInvalidArgument(), es.ToString());
  return 0;
}
