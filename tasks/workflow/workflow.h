// Workflow: a parsed and validated workflow file (SPEC §2).
//
// A workflow is a JSON or JSONC document of named steps. Each step has an
// action (a shell `Command`, an agent `Pool`, a `Prompt` for a person or a
// `Function` an embedding program registers), the steps it may spawn tasks
// on (`next`), an optional JSON Schema for its tasks' values
// (`value_schema`), per-step option overrides and an optional `finally`
// hook. The format is Barnum's, so a Barnum config runs unchanged:
//
//   {
//     "$schema": "...",              // optional, ignored (editor support)
//     "entrypoint": "ListFiles",     // required: the step given --input
//     "options": { ... },            // optional defaults for every step
//     "steps": [                     // required, at least one
//       { "name": "ListFiles",                               // required
//         "action": { "kind": "Command", "script": "ls" },   // required
//         "next": ["Process"],      // optional, default [] (terminal step)
//         "value_schema": { ... },  // optional JSON Schema (draft 7 or 4)
//         "options": { ... },       // optional overrides of the defaults
//         "finally": { "kind": "Command", "script": "./done.sh" } } ]
//   }
//
// `value_schema` and `finally` may also be null (= absent). Comments and
// trailing commas are allowed (JSONC, see tasks/workflow/jsonc.h).
//
// A Pool action may be spelt any way Barnum accepts: {"kind": "Pool",
// "instructions": "text"}, with instructions {"kind": "Inline", "value":
// "text"} or {"kind": "Link", "path": "file.md"} (a file next to the
// workflow, read by Load; its text is frozen into the run as Inline), or
// nested as {"kind": "Pool", "params": {"instructions": ..., "timeout": N,
// "pool": ..., "root": ...}} (a params timeout is the step's timeout, over
// its options; pool and root are accepted and ignored).
// A Command may likewise be {"kind": "Command", "params": {"script": ...}}.
// A Function action is {"kind": "Function"} or {"kind": "Function",
// "handler": "Name"}; it is run by the handler a program that embeds wizq
// registers under that name (docs/EMBEDDING.md), and `finally` may be one
// too.
//
// Options and their defaults (Barnum's defaults, see StepOptions):
//   max_retries                0     attempts = max_retries + 1
//   timeout                    null  seconds, > 0; null = no timeout
//   max_concurrency            null  tasks of a step running at once per
//                                    process, >= 1; null = no per-step limit
//   retry_on_timeout           true
//   retry_on_invalid_response  true
//   lease                      60    seconds an agent's claim lasts without
//                                    a heartbeat (wizq's; Pool steps)
// A step's option is its own `options` value if present, else the top-level
// `options` value, else the default. An explicit `"timeout": null` (or
// `"max_concurrency": null`) in a step means "none" and overrides the
// top-level value; only an absent field inherits.
//
// Validation is strict and complete: Parse reports every problem at once,
// each with the JSON path of the offending value ($.steps[2].next[0]).
// Unknown fields anywhere are errors (so typos are caught), as are duplicate
// keys in one object. Deliberate differences from Barnum: `entrypoint` is
// required (wizq has no --initial-state, so a run always starts from the
// entrypoint with --input), `value_schema` is compiled when the workflow
// is parsed, so a broken schema fails `wizq validate`, not a run, and an
// explicit null option in a step overrides the top level (Barnum treats it
// as absent).
//
// value_schema: JSON Schema draft 7, or draft 4 when its "$schema" names
// draft-04 (later drafts are read with draft-7 rules). Only local $refs
// resolve. `format` checks date, time and date-time (RFC 3339) and ignores
// other formats. `pattern` is an ECMAScript regex (std::regex, matching
// bytes, not code points) checked only on strings up to 64 KiB; longer
// strings fail it with a message saying so.
//
// Thread-safety: a Workflow is immutable after Parse/Load (set_base_dir
// aside); its const methods may be called from several threads at once.
#ifndef WIZQ_TASKS_WORKFLOW_H_
#define WIZQ_TASKS_WORKFLOW_H_

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace wizq {

class Env;
class ValueSchema;
struct PromptSpec;

// Resolved options of one step: step override > top-level > default.
struct StepOptions {
  // "No per-step limit" (max_concurrency null or absent).
  static constexpr int kUnlimited = std::numeric_limits<int>::max();
  // Upper bound of max_retries and max_concurrency in a workflow, to keep
  // arithmetic on them safe.
  static constexpr int kMaxCount = 1000000;
  static constexpr double kMaxTimeoutSeconds = 1e9;  // ~31 years

  int max_retries = 0;
  std::optional<double> timeout_seconds;  // unset = no timeout
  int max_concurrency = kUnlimited;
  bool retry_on_timeout = true;
  bool retry_on_invalid_response = true;
  // wizq's `lease` option (Pool steps, SPEC §9): how long an agent's claim
  // lasts without a heartbeat, seconds, > 0.
  static constexpr double kDefaultLeaseSeconds = 60;
  double lease_seconds = kDefaultLeaseSeconds;

  int max_attempts() const { return max_retries + 1; }
};

struct Action {
  enum class Kind { kCommand, kPool, kPrompt, kFunction };
  Kind kind = Kind::kCommand;
  std::string script;        // kCommand: run as `sh -c script` in base_dir
  std::string instructions;  // kPool: markdown for the agent (resolved)
  // kPrompt: the question for a person (tasks/exec/prompt.h, SPEC §10).
  std::shared_ptr<const PromptSpec> prompt = nullptr;
  // kFunction: the name of the handler an embedding program registers for
  // it (include/wizq/wizard.h): the action's "handler" field, else the
  // step's name (a finally hook's: "STEP.finally").
  std::string handler = "";
};

// The kind's name as workflows spell it: "Command", "Pool", "Prompt",
// "Function" (for `wizq validate` and the completion of step names).
inline const char* ActionKindName(Action::Kind kind) {
  switch (kind) {
    case Action::Kind::kCommand:
      return "Command";
    case Action::Kind::kPool:
      return "Pool";
    case Action::Kind::kPrompt:
      return "Prompt";
    case Action::Kind::kFunction:
      return "Function";
  }
  return "?";
}

struct Step {
  std::string name;
  Action action;
  std::vector<std::string> next;  // steps it may spawn; empty = terminal
  // The schema as minified JSON; empty if the step has none (any value).
  std::string value_schema_json;
  // The schema compiled (tasks/workflow/value_schema.h); null if the step has
  // none.
  std::shared_ptr<const ValueSchema> value_schema;
  StepOptions options;  // resolved
  // A kCommand or kFunction action; fires when a task and all it spawned
  // are done.
  std::optional<Action> finally_hook;
};

// One problem found in a workflow.
struct Finding {
  std::string path;     // JSON path of the offending value, e.g. $.steps[2]
  std::string message;  // what is wrong and what to do about it
};

class Workflow {
 public:
  ~Workflow();
  Workflow(const Workflow&) = delete;
  Workflow& operator=(const Workflow&) = delete;

  // Parses JSON or JSONC text. `source` (the file name) prefixes messages.
  // On success *out holds the workflow, with an empty base_dir. Otherwise
  // returns InvalidArgument whose message lists every finding ("source: N
  // problem(s):" then one "  path: message" line each), fills *findings (if
  // not null) with them, and leaves *out untouched.
  static Status Parse(std::string_view text, const std::string& source,
                      std::unique_ptr<Workflow>* out,
                      std::vector<Finding>* findings = nullptr);

  // Reads `path` and parses it; base_dir becomes the canonical absolute
  // directory of the file. A file that cannot be read is NotFound/IOError
  // (no findings); an invalid one is as for Parse. Reads through `env`
  // (nullptr: Env::Posix()).
  static Status Load(const std::string& path, std::unique_ptr<Workflow>* out,
                     std::vector<Finding>* findings = nullptr,
                     Env* env = nullptr);

  const std::string& entrypoint() const;
  // In file order.
  const std::vector<Step>& steps() const;
  // nullptr if no step has that name.
  const Step* FindStep(std::string_view name) const;
  // The top-level options resolved over the defaults (what a step without
  // overrides gets). Lets a caller treat top-level max_concurrency as a
  // process-wide cap, as Barnum does.
  const StepOptions& default_options() const;

  // The workflow as minified JSON without comments (object keys sorted):
  // what gets frozen into a run. Parse(frozen_json()) yields the same
  // workflow, and equal workflows give equal text.
  const std::string& frozen_json() const;

  // Where Command scripts run. Empty after Parse; set by Load, or by the
  // caller for a workflow thawed from a run.
  const std::string& base_dir() const;
  void set_base_dir(std::string dir);

  // Checks `value_json` (JSON text) against the value_schema of step `step`.
  // OK if the text is JSON and the step has no schema. InvalidArgument if
  // the step is unknown, the text is not JSON (or nests deeper than
  // kMaxJsonDepth), or the value violates the schema; the message names
  // each violation's JSON path inside the value and the constraint, e.g.
  // `does not match the value_schema of step "Process": at $.file: Value
  // type not permitted by 'type' constraint. (got 3)`.
  Status ValidateValue(std::string_view step,
                       std::string_view value_json) const;

 private:
  struct Impl;
  explicit Workflow(std::unique_ptr<Impl> impl);
  // Parse, with linked files read from `base_dir` (empty: none allowed).
  static Status ParseIn(std::string_view text, const std::string& source,
                        const std::string& base_dir, Env* env,
                        std::unique_ptr<Workflow>* out,
                        std::vector<Finding>* findings);
  std::unique_ptr<Impl> impl_;
};

}  // namespace wizq

#endif  // WIZQ_TASKS_WORKFLOW_H_
