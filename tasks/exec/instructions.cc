#include "tasks/exec/instructions.h"

#include <nlohmann/json.hpp>

#include "util/json_writer.h"

namespace wizq {
namespace {

// serde_json::to_string_pretty: two-space indent, ": " after keys, keys
// sorted (nlohmann's default object is a std::map, as serde_json's
// default Map is a BTreeMap).
std::string Pretty(const std::string& minified) {
  return nlohmann::json::parse(minified).dump(2);
}

void AppendNextStep(const Workflow& wf, const std::string& name,
                    std::string* doc) {
  const Step* next = wf.FindStep(name);
  if (next == nullptr) return;  // Barnum skips an unknown step as well
  std::string& d = *doc;
  d += "### " + name + "\n\n";
  if (next->value_schema_json.empty()) {
    d += "Accepts any JSON value.\n\n";
    d += "```json\n";
    d += "{\"kind\": \"" + name + "\", \"value\": <any>}\n";
    d += "```\n";
  } else {
    d += "Value must match schema:\n\n";
    d += "```json\n" + Pretty(next->value_schema_json) + "\n```\n\n";
    d += "Example:\n";
    d += "```json\n";
    d += "{\"kind\": \"" + name + "\", \"value\": {...}}\n";
    d += "```\n";
  }
  d += "\n";
}

}  // namespace

std::string StepInstructions(const Workflow& wf, const Step& step) {
  std::string d =
      "**IMPORTANT: This task is completely isolated. You have no memory of "
      "previous tasks. Even if this task seems related to prior work, you "
      "must complete it from scratch using only the information provided "
      "here.**\n\n";
  d += "# Current Step: " + step.name + "\n\n";
  if (step.action.kind == Action::Kind::kPool &&
      !step.action.instructions.empty()) {
    d += step.action.instructions + "\n\n";
  }
  if (step.next.empty()) {
    d += "## Terminal Step\n\n";
    d += "This is a terminal step. Return an empty array: `[]`\n";
    return d;
  }
  d += "## Valid Responses\n\n";
  d += "You must return a JSON array of tasks. Each task has `kind` and "
       "`value` fields.\n\n";
  d += "Valid next steps:\n\n";
  for (const std::string& name : step.next) AppendNextStep(wf, name, &d);
  return d;
}

std::string PoolPayload(const Workflow& wf, const Step& step, const Task& task,
                        const PayloadInfo& info) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("task").BeginObject().Field("kind", task.type);
  w.Key("value").RawValue(task.inputs).EndObject();
  w.Field("instructions", StepInstructions(wf, step));
  const std::optional<double> timeout = step.options.timeout_seconds;
  w.Key("timeout_seconds");
  if (timeout) {
    w.Double(*timeout);
  } else {
    w.Null();
  }
  w.Key("task_id").Int(task.id);
  w.Key("attempt").Int(task.attempts);
  if (!info.lease.empty()) {
    w.Field("lease", info.lease);
    w.Key("lease_seconds").Double(info.lease_seconds);
  }
  w.Field("run_id", info.run_id);
  w.Field("idempotency_key", info.idempotency_key);
  w.Field("install_dir", info.install_dir);
  w.EndObject();
  return out;
}

}  // namespace wizq
