// Fuzz target: a task's stdout, its response (tasks/workflow/response.h).
//
// Checked against a fixed workflow with schemas (types, required,
// additionalProperties, patterns, formats, enums, nested arrays). Any bytes:
// ParseResponse, ParseHookResponse and ValidateEntryInput return OK or
// InvalidArgument (never crash); on failure *out is empty. An accepted
// response's tasks name allowed steps, carry values that are JSON and pass
// their schema, and re-serialised as a response are accepted again with the
// same tasks.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "tasks/workflow/response.h"
#include "tasks/workflow/workflow.h"
#include "util/json_writer.h"

namespace {

using namespace wizq;

constexpr char kWorkflow[] = R"({
  "entrypoint": "List",
  "steps": [
    {"name": "List", "action": {"kind": "Command", "script": "ls"},
     "value_schema": {"type": "object", "required": ["dir"],
                      "properties": {"dir": {"type": "string"}}},
     "next": ["Process", "Report", "Any"]},
    {"name": "Process", "action": {"kind": "Command", "script": "p"},
     "value_schema": {
       "type": "object", "required": ["file", "sha256"],
       "additionalProperties": false,
       "properties": {
         "file": {"type": "string", "pattern": "^[A-Za-z0-9._-]+$",
                  "maxLength": 255},
         "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
         "size": {"type": "integer", "minimum": 0},
         "when": {"type": "string", "format": "date-time"},
         "day": {"type": "string", "format": "date"},
         "mode": {"enum": ["fast", "slow", 3, null]},
         "tags": {"type": "array", "items": {"type": "string"},
                  "uniqueItems": true, "maxItems": 8},
         "ratio": {"type": "number", "exclusiveMaximum": 1,
                   "multipleOf": 0.25},
         "nested": {"$ref": "#/definitions/node"}},
       "definitions": {"node": {"type": "object", "properties": {
         "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}}}}},
     "next": [],
     "finally": {"kind": "Command", "script": "done"}},
    {"name": "Report", "action": {"kind": "Pool", "instructions": "Sum up."},
     "value_schema": {"oneOf": [{"type": "string", "minLength": 1},
                                {"type": "array", "minItems": 1}]}},
    {"name": "Any", "action": {"kind": "Command", "script": "a"},
     "next": ["Any"]}
  ]
})";

const Workflow& Load() {
  static const std::unique_ptr<Workflow> wf = [] {
    std::unique_ptr<Workflow> out;
    Status s = Workflow::Parse(kWorkflow, "response_fuzzer", &out);
    if (!s.ok()) fuzz::Fail(__FILE__, __LINE__, "Parse", s.ToString());
    return out;
  }();
  return *wf;
}

std::string Reserialise(const std::vector<NextTask>& tasks) {
  std::string out = "[";
  for (size_t i = 0; i < tasks.size(); i++) {
    if (i) out += ",";
    out += "{\"kind\":";
    AppendJsonString(&out, tasks[i].kind);
    out += ",\"value\":" + tasks[i].value_json + "}";
  }
  return out + "]";
}

void CheckAccepted(const Workflow& wf, const Step* from,
                   const std::vector<NextTask>& tasks) {
  for (const NextTask& t : tasks) {
    const Step* target = wf.FindStep(t.kind);
    FUZZ_CHECK(target != nullptr, "unknown kind accepted: " + t.kind);
    if (from) {
      bool allowed = false;
      for (const std::string& n : from->next) allowed |= n == t.kind;
      FUZZ_CHECK(allowed, "kind not in next accepted: " + t.kind);
    }
    Status v = wf.ValidateValue(t.kind, t.value_json);
    FUZZ_CHECK(v.ok(), "an accepted value fails its schema: " + v.ToString());
  }
}

void CheckStable(const Workflow& wf, const Step* from,
                 const std::vector<NextTask>& tasks) {
  const std::string again = Reserialise(tasks);
  std::vector<NextTask> out;
  Status s = from ? ParseResponse(wf, *from, again, &out)
                  : ParseHookResponse(wf, again, &out);
  FUZZ_CHECK(s.ok(), "a re-serialised response is refused: " + s.ToString() +
                         "\n" + again);
  FUZZ_CHECK(out.size() == tasks.size(), "task count changed");
  for (size_t i = 0; i < out.size(); i++) {
    FUZZ_CHECK(
        out[i].kind == tasks[i].kind &&
            out[i].value_json == tasks[i].value_json,
        "task changed: " + tasks[i].value_json + " -> " + out[i].value_json);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Workflow& wf = Load();
  const std::string_view text = fuzz::AsText(data, size);
  for (const char* name : {"List", "Any", "Process"}) {
    const Step* from = wf.FindStep(name);
    std::vector<NextTask> out = {{"stale", "1"}};
    Status s = ParseResponse(wf, *from, text, &out);
    if (!s.ok()) {
      FUZZ_CHECK(s.IsInvalidArgument(), s.ToString());
      FUZZ_CHECK(out.empty(), "*out not cleared on error");
      continue;
    }
    CheckAccepted(wf, from, out);
    CheckStable(wf, from, out);
  }
  std::vector<NextTask> out;
  Status s = ParseHookResponse(wf, text, &out);
  if (s.ok()) {
    CheckAccepted(wf, nullptr, out);
    CheckStable(wf, nullptr, out);
  } else {
    FUZZ_CHECK(s.IsInvalidArgument(), s.ToString());
  }
  s = ValidateEntryInput(wf, text);
  FUZZ_CHECK(s.ok() || s.IsInvalidArgument(), s.ToString());
  return 0;
}
