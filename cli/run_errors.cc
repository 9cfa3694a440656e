#include "cli/run_errors.h"

#include <cstdio>
#include <memory>
#include <vector>

#include "tasks/workflow.h"

namespace wizq {
namespace {

// Emits one event per finding of an invalid workflow; false if the
// workflow loads (the error was about something else).
bool EmitWorkflowFindings(int code, const std::string& path) {
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Status s = Workflow::Load(path, &wf, &findings);
  if (s.ok()) return false;
  JsonError e;
  e.code = code;
  e.file = path;
  if (findings.empty()) {
    e.message = s.message();
    EmitJsonError(e);
  }
  for (const Finding& f : findings) {
    e.field = f.path;
    e.message = f.message;
    EmitJsonError(e);
  }
  return true;
}

// The first file under a `.wizard/` directory that `message` names (a
// corrupt audit.jsonl, an unreadable queue.json), or "".
std::string WizardFileNamed(const std::string& message) {
  const size_t at = message.find("/.wizard/");
  if (at == std::string::npos) return "";
  const size_t begin = message.find_last_of(" \"'(", at);
  const size_t start = begin == std::string::npos ? 0 : begin + 1;
  size_t end = message.find_first_of(" \"'):,", at);
  if (end == std::string::npos) end = message.size();
  return message.substr(start, end - start);
}

}  // namespace

void ReportRunError(const JsonError& e, const std::string& workflow_path,
                    bool json) {
  std::fprintf(stderr, "wizq run: %s\n", e.message.c_str());
  if (!json) return;
  if (e.code == 2 && e.file.empty() && !workflow_path.empty() &&
      EmitWorkflowFindings(e.code, workflow_path)) {
    return;
  }
  JsonError out = e;
  if (out.field.empty() && out.message.rfind("--", 0) == 0) {
    out.field = out.message.substr(0, out.message.find_first_of(" :"));
  }
  if (out.file.empty()) out.file = WizardFileNamed(out.message);
  EmitJsonError(out);
}

int ReportCommandError(const char* command, int code,
                       const std::string& message, const std::string& file,
                       bool json) {
  std::fprintf(stderr, "wizq %s: %s\n", command, message.c_str());
  if (json) {
    JsonError e;
    e.code = code;
    e.message = message;
    e.file = file;
    EmitJsonError(e);
  }
  return code;
}

}  // namespace wizq
