#include "views/run_errors.h"

#include <cstdio>
#include <vector>

namespace wizq {

std::string FileNamedIn(const std::string& message) {
  const size_t at = message.find("/.wizard/");
  if (at == std::string::npos) return "";
  const size_t begin = message.find_last_of(" \"'(", at);
  const size_t start = begin == std::string::npos ? 0 : begin + 1;
  size_t end = message.find_first_of(" \"'):,", at);
  if (end == std::string::npos) end = message.size();
  return message.substr(start, end - start);
}

void ReportRunError(const JsonError& e, bool json,
                    const std::vector<Finding>& findings) {
  std::fprintf(stderr, "wizq run: %s\n", e.message.c_str());
  if (!json) return;
  JsonError out = e;
  for (const Finding& f : findings) {
    out.field = f.path;
    out.message = f.message;
    EmitJsonError(out);
  }
  if (!findings.empty()) return;
  if (out.file.empty()) out.file = FileNamedIn(out.message);
  EmitJsonError(out);
}

void ReportRunError(int code, const RunError& error, bool json) {
  JsonError e;
  e.code = code;
  e.message = error.message;
  e.file = error.file;
  e.field = error.field;
  ReportRunError(e, json, error.findings);
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
