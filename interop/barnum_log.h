// Reading a Barnum state log (docs/INTEROP.md).
//
// Barnum (barnum-circus/barnum) writes one JSON object a line: a `Config`
// first, then task submissions and completions. Three shapes exist, told
// apart by the log itself, never by the user:
//   kReference  the documented examples: "origin":"Initial",
//               {"Retry":{"replaces":2}}, Success without finally_value;
//   kV1         Barnum's runner at 904ef2ab: every task a top-level
//               TaskSubmitted with parent_id and an internally tagged
//               origin ({"kind":"Retry","replaces":2}); Success carries
//               spawned_task_ids and finally_value; Failed retry_task_id;
//   kV2         Barnum's runner at 328ddeb1/886c5c8a: only seeds are
//               top-level; children and retries are embedded in the
//               completion that made them; hooks are FinallyRun entries;
//               the Config is the resolved form (actions with `params`).
// ReadBarnumLog normalises all three into one BarnumLog. A torn last line
// (a crash mid-write: no newline and not JSON) is set aside; anything else
// malformed is InvalidArgument "<file>:<line>: <field>: <problem>".
#ifndef WIZQ_INTEROP_BARNUM_LOG_H_
#define WIZQ_INTEROP_BARNUM_LOG_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace wizq {

enum class BarnumFormat { kReference, kV1, kV2 };
const char* BarnumFormatName(BarnumFormat f);  // "barnum", "barnum-v1", ...

// A task as submitted (top-level or embedded), with its parent resolved.
struct BarnumTask {
  enum class Origin { kInitial, kSpawned, kRetry, kFinally };
  uint32_t id = 0;
  std::string step;
  nlohmann::json value;
  std::optional<uint32_t> parent;  // v2 retries: the replaced task's parent
  Origin origin = Origin::kInitial;
  uint32_t replaces = 0;     // kRetry
  uint32_t finally_for = 0;  // kFinally (v1 and reference only)
  int line = 0;              // where it was submitted
};

struct BarnumCompletion {
  uint32_t id = 0;
  bool success = false;
  // Success: the children it spawned (v1 spawned_task_ids; v2 the ids of
  // its embedded children), and the value its finally hook gets.
  std::vector<uint32_t> spawned;
  nlohmann::json finally_value;  // null when the log has none
  // Failed: Barnum's reason (Timeout, AgentLost, InvalidResponse), its
  // message (InvalidResponse only) and the replacement task, if any.
  std::string reason;
  std::string message;
  std::optional<uint32_t> retry;
  int line = 0;
};

// v2: a finally hook ran for `finally_for` and spawned `children`.
struct BarnumFinallyRun {
  uint32_t finally_for = 0;
  std::vector<uint32_t> children;
  int line = 0;
};

struct BarnumLog {
  std::string path;  // for messages
  BarnumFormat format = BarnumFormat::kV1;
  nlohmann::json config;
  std::map<uint32_t, BarnumTask> tasks;
  std::map<uint32_t, BarnumCompletion> completions;
  std::map<uint32_t, BarnumFinallyRun> finally_runs;
  int lines = 0;           // lines read, the torn one excluded
  bool torn_tail = false;  // a torn last line was set aside
};

// Parses `text` (the file's bytes) as a Barnum state log. `path` names the
// file in messages.
Status ReadBarnumLog(const std::string& path, std::string_view text,
                     BarnumLog* log);

// "<path>:<line>: <what>": the message of every error about a log line.
Status BarnumLineError(const std::string& path, int line,
                       const std::string& what);

}  // namespace wizq

#endif  // WIZQ_INTEROP_BARNUM_LOG_H_
