// Helpers of the human gate's tests (prompt_test.cc, prompt_crash_test.cc):
// small workflows with Prompt steps, written into a scratch directory, and
// a byte-for-byte picture of `.wizard/`.
#ifndef WIZQ_TESTS_PROMPT_UTIL_H_
#define WIZQ_TESTS_PROMPT_UTIL_H_

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace test {

// A workflow: Root spawns `root_children` (a JSON array text); Work tasks
// record themselves in $WIZQ_INSTALL_DIR/ledger (and wait for the file
// `go` there when their value has "wait": true); Ask is a Prompt step with
// the given action fields, whose answer goes to Install, which appends the
// value it gets to $WIZQ_INSTALL_DIR/installs; Pick is a choice prompt.
inline std::string GateWorkflow(const std::string& root_children,
                                const std::string& ask_fields) {
  const std::string echo = "echo '" + root_children + "'";
  return R"({"entrypoint": "Root", "steps": [
  {"name": "Root", "action": {"kind": "Command", "script": )" +
         Json(echo).dump() + R"(},
   "next": ["Work", "Ask", "Pick"]},
  {"name": "Work", "action": {"kind": "Command", "script":
    "v=$(cat); case \"$v\" in *wait*) while [ ! -e \"$WIZQ_INSTALL_DIR/go\" ]; do sleep 0.02; done;; esac; echo \"work $WIZQ_TASK_ID\" >> \"$WIZQ_INSTALL_DIR/ledger\"; echo '[]'"}},
  {"name": "Ask", "action": {"kind": "Prompt", )" +
         ask_fields + R"(}, "next": ["Install"]},
  {"name": "Pick", "action": {"kind": "Prompt", "mode": "choice",
    "message": "Which edition?", "choices": ["minimal", "full"]},
   "next": ["Install"]},
  {"name": "Install", "action": {"kind": "Command", "script":
    "cat >> \"$WIZQ_INSTALL_DIR/installs\"; echo >> \"$WIZQ_INSTALL_DIR/installs\"; echo '[]'"}}
]})";
}

inline const char kConfirmAsk[] =
    R"("mode": "confirm", "message": "Install into the directory?")";

// What Install tasks received, one JSON value each.
inline std::vector<Json> InstallLines(const std::string& dir) {
  std::vector<Json> out;
  for (const std::string& line : SplitLines(ReadAll(dir + "/installs"))) {
    if (!line.empty()) out.push_back(ParseJsonOrNull(line));
  }
  return out;
}

// The names of the audit events from index `from` on.
inline std::vector<std::string> EventNames(const std::string& dir,
                                           size_t from = 0) {
  std::vector<std::string> out;
  const std::vector<Json> audit = ReadAudit(dir);
  for (size_t i = from; i < audit.size(); i++) {
    out.push_back(audit[i]["event"]);
  }
  return out;
}

inline std::vector<Json> Events(const std::string& dir,
                                const std::string& name) {
  std::vector<Json> out;
  for (const Json& e : ReadAudit(dir)) {
    if (e["event"] == name) out.push_back(e);
  }
  return out;
}

}  // namespace test
}  // namespace wizq

#endif  // WIZQ_TESTS_PROMPT_UTIL_H_
