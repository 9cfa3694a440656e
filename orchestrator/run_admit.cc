#include "orchestrator/run_admit.h"

#include <map>
#include <nlohmann/json.hpp>

#include "tasks/workflow/def_hash.h"
#include "tasks/workflow/workflow.h"

namespace wizq {
namespace {

using Json = nlohmann::json;

// The steps of a frozen workflow by name.
std::map<std::string, Json> StepsOf(const Json& root) {
  std::map<std::string, Json> steps;
  if (!root.is_object() || !root.contains("steps")) return steps;
  for (const Json& s : root["steps"]) {
    if (s.is_object()) steps[s.value("name", std::string())] = s;
  }
  return steps;
}

// The first difference between two frozen workflows, in words.
std::string WorkflowDifference(const std::string& run_json,
                               const std::string& mine_json) {
  const Json run = Json::parse(run_json, nullptr, false);
  const Json mine = Json::parse(mine_json, nullptr, false);
  const std::map<std::string, Json> a = StepsOf(run), b = StepsOf(mine);
  for (const auto& [name, def] : a) {
    auto it = b.find(name);
    if (it == b.end()) return "it has no step '" + name + "'";
    if (it->second != def) return "its step '" + name + "' differs";
  }
  for (const auto& [name, def] : b) {
    if (a.count(name) == 0) return "its step '" + name + "' is new";
  }
  return "its top-level options differ";
}

// The first step file that differs, in words; "" when none does.
std::string FileDifference(const RunInfo& run, const WorkerDefinition& w) {
  const Json a = Json::parse(run.def_files, nullptr, false);
  const Json b = Json::parse(w.def_files, nullptr, false);
  if (!a.is_object() || !b.is_object()) return "";
  const std::string run_id = "run " + run.run_id;
  for (const auto& [path, hash] : a.items()) {
    const std::string file = "step file '" + path + "'";
    if (!b.contains(path)) {
      return file + ", which " + run_id + " was started with, is missing " +
             "or unreadable in " + w.base_dir;
    }
    if (b[path] != hash) {
      return file + " in " + w.base_dir + " differs from the copy " + run_id +
             " was started with";
    }
  }
  for (const auto& [path, hash] : b.items()) {
    if (!a.contains(path)) {
      return "step file '" + path + "' in " + w.base_dir +
             " was not there when " + run_id + " started";
    }
  }
  return "";
}

}  // namespace

std::string DefFilesJson(const Workflow& wf, Env* env) {
  Json files = Json::object();
  for (const auto& [path, hash] : DefHasher(wf, env).Files()) {
    files[path] = hash;
  }
  return files.dump();
}

Status AdmitWorker(const RunInfo& run, const WorkerDefinition& w) {
  const std::string fix =
      ": every worker of a run must run the same definition. Make this "
      "machine's copy the same, or start the run again with --fresh (what "
      "still stands is reused)";
  const std::string theirs = "the one run " + run.run_id + " was started with";
  if (run.workflow != w.workflow_json) {
    return Status::NotSupported(
        "this worker's workflow " + w.workflow_path + " differs from " +
        theirs + " (" + WorkflowDifference(run.workflow, w.workflow_json) +
        ")" + fix);
  }
  if (run.entry_input != w.input) {
    return Status::NotSupported("this worker's --input (" + w.input +
                                ") differs from " + theirs + " (" +
                                run.entry_input + ")" + fix);
  }
  if (run.def_files.empty()) return Status::OK();  // not recorded
  const std::string diff = FileDifference(run, w);
  if (diff.empty()) return Status::OK();
  return Status::NotSupported("this worker's " + diff + fix);
}

}  // namespace wizq
