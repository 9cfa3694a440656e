// The workflow checker (tasks/workflow/workflow_checker.h).
#include "tasks/workflow/workflow_checker.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "fs/env.h"
#include "tasks/workflow/json_messages.h"
#include "tasks/workflow/jsonc.h"
#include "tasks/workflow/prompt_parse.h"
#include "tasks/workflow/value_schema.h"

namespace wizq::internal {
namespace {

using Json = nlohmann::json;

// ---------------------------------------------------------------------------
// Message helpers

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// Walks a workflow DOM, filling a Workflow::Impl and a list of findings.
class WorkflowChecker {
 public:
  WorkflowChecker(WorkflowData* wf, std::vector<Finding>* findings)
      : wf_(wf), findings_(findings) {}

  void Check(const Json& root) {
    if (!root.is_object()) {
      Add("$",
          "a workflow must be a JSON object with \"entrypoint\" and "
          "\"steps\", " +
              Got(root));
      return;
    }
    CheckFields(root, "$", {"$schema", "entrypoint", "options", "steps"},
                "the workflow");
    const Json* schema = Find(root, "$schema");
    if (schema && !schema->is_string()) {
      Add("$.$schema",
          "must be a string (a JSON Schema URL for editors), " + Got(*schema));
    }
    ParseOptions(Find(root, "options"), "$.options", StepOptions(),
                 &wf_->default_options);
    CheckSteps(root);
    CheckEntrypoint(root);
  }

 private:
  using Fields = std::vector<std::string>;

  void Add(std::string path, std::string message) {
    findings_->push_back({std::move(path), std::move(message)});
  }

  static const Json* Find(const Json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  void CheckFields(const Json& obj, const std::string& path,
                   const Fields& allowed, const std::string& what) {
    for (auto& [key, unused] : obj.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) {
        continue;
      }
      Add(KeyPath(path, key), "unknown field " + Quote(key) + " in " + what +
                                  Suggest(key, allowed) +
                                  "; allowed fields: " + Join(allowed));
    }
  }

  // A required non-empty string field. False (with a finding) if not.
  bool GetString(const Json& obj, const std::string& path, const char* key,
                 const std::string& hint, std::string* out) {
    const Json* v = Find(obj, key);
    if (!v) {
      Add(path, std::string("missing required field \"") + key + "\"" + hint);
      return false;
    }
    if (!v->is_string() || v->get_ref<const std::string&>().empty()) {
      Add(KeyPath(path, key), "must be a non-empty string, " + Got(*v));
      return false;
    }
    *out = v->get<std::string>();
    return true;
  }

  // --- options ---

  void ParseOptions(const Json* opts, const std::string& path,
                    const StepOptions& base, StepOptions* out) {
    *out = base;
    if (!opts) return;
    if (!opts->is_object()) {
      Add(path, "must be an object of options, " + Got(*opts));
      return;
    }
    CheckFields(
        *opts, path,
        {"max_retries", "timeout", "max_concurrency", "retry_on_timeout",
         "retry_on_invalid_response", "reuse_files", "lease"},
        "options");
    for (auto& [key, v] : opts->items()) {
      ParseOption(key, v, KeyPath(path, key), out);
    }
  }

  void ParseOption(const std::string& key, const Json& v,
                   const std::string& path, StepOptions* out) {
    if (key == "max_retries") {
      int64_t n;
      if (GetInt(v, 0, StepOptions::kMaxCount, &n)) {
        out->max_retries = static_cast<int>(n);
      } else {
        Add(path, "must be an integer from 0 to " +
                      std::to_string(StepOptions::kMaxCount) +
                      " (attempts = max_retries + 1), " + Got(v));
      }
    } else if (key == "timeout") {
      ParseTimeout(v, path, out);
    } else if (key == "lease") {
      if (v.is_number() && v.get<double>() > 0 && v.get<double>() <= 1e6) {
        out->lease_seconds = v.get<double>();
      } else {
        Add(path, "must be a number of seconds greater than 0 (at most 1e6), " +
                      Got(v));
      }
    } else if (key == "max_concurrency") {
      ParseMaxConcurrency(v, path, out);
    } else if (key == "reuse_files") {
      CheckReuseFiles(v, path);
    } else if (key == "retry_on_timeout" ||
               key == "retry_on_invalid_response") {
      if (!v.is_boolean()) {
        Add(path, "must be true or false, " + Got(v));
      } else {
        (key == "retry_on_timeout" ? out->retry_on_timeout
                                   : out->retry_on_invalid_response) =
            v.get<bool>();
      }
    }
  }

  // reuse_files: files or globs (relative to the workflow's directory)
  // whose content goes into the step's def_hash (tasks/workflow/def_hash.h).
  void CheckReuseFiles(const Json& v, const std::string& path) {
    if (!v.is_array()) {
      Add(path, "must be an array of file names or globs, " + Got(v));
      return;
    }
    for (size_t i = 0; i < v.size(); i++) {
      const std::string p = path + "[" + std::to_string(i) + "]";
      if (!v[i].is_string() || v[i].get<std::string>().empty()) {
        Add(p, "must be a non-empty file name or glob, " + Got(v[i]));
      } else if (v[i].get<std::string>()[0] == '/') {
        Add(p, "must be relative to the workflow's directory");
      }
    }
  }

  static bool GetInt(const Json& v, int64_t lo, int64_t hi, int64_t* out) {
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) return false;
      *out = static_cast<int64_t>(u);
    } else if (v.is_number_integer()) {
      *out = v.get<int64_t>();
    } else {
      return false;
    }
    return *out >= lo && *out <= hi;
  }

  void ParseTimeout(const Json& v, const std::string& path, StepOptions* out) {
    if (v.is_null()) {
      out->timeout_seconds.reset();
    } else if (v.is_number() && v.get<double>() > 0 &&
               v.get<double>() <= StepOptions::kMaxTimeoutSeconds) {
      out->timeout_seconds = v.get<double>();
    } else {
      Add(path,
          "must be a number of seconds greater than 0 (at most 1e9), "
          "or null for no timeout, " +
              Got(v));
    }
  }

  void ParseMaxConcurrency(const Json& v, const std::string& path,
                           StepOptions* out) {
    int64_t n;
    if (v.is_null()) {
      out->max_concurrency = StepOptions::kUnlimited;
    } else if (GetInt(v, 1, StepOptions::kMaxCount, &n)) {
      out->max_concurrency = static_cast<int>(n);
    } else {
      Add(path, "must be an integer from 1 to 1000000, or null for no limit, " +
                    Got(v));
    }
  }

  // --- actions ---

  // `finally` hooks may only be Commands or Functions.
  bool ParseAction(const Json& v, const std::string& path, bool is_hook,
                   Action* out) {
    const char* what = is_hook ? "a finally hook" : "an action";
    if (!v.is_object()) {
      Add(path, std::string("must be ") + what +
                    " object like {\"kind\": \"Command\", \"script\": "
                    "\"./run.sh\"}, " +
                    Got(v));
      return false;
    }
    std::string kind;
    if (!GetString(v, path, "kind",
                   " (\"Command\", \"Pool\", \"Prompt\" or \"Function\")",
                   &kind)) {
      return false;
    }
    // Barnum's nested form: {"kind": K, "params": {...}}.
    if (const Json* params = Find(v, "params")) {
      CheckFields(v, path, {"kind", "params"},
                  std::string(what) + " with \"params\"");
      if (!params->is_object()) {
        Add(KeyPath(path, "params"),
            "must be an object of the action's fields, " + Got(*params));
        return false;
      }
      const std::string ppath = KeyPath(path, "params");
      Json flat = *params;
      flat["kind"] = kind;
      if (kind == "Command") return ParseCommand(flat, ppath, what, out);
      if (kind == "Pool" && !is_hook) return ParsePool(flat, ppath, out);
    }
    if (kind == "Command") return ParseCommand(v, path, what, out);
    if (kind == "Pool" && !is_hook) return ParsePool(v, path, out);
    if (kind == "Prompt" && !is_hook) {
      return ParsePromptAction(v, path, findings_, out);
    }
    if (kind == "Function") return ParseFunction(v, path, what, out);
    std::string hint = is_hook ? "a finally hook must be {\"kind\": "
                                 "\"Command\", \"script\": ...} or "
                                 "{\"kind\": \"Function\"}"
                               : "use \"Command\" (with \"script\"), "
                                 "\"Pool\" (with \"instructions\"), "
                                 "\"Prompt\" (with \"mode\" and "
                                 "\"message\") or \"Function\"";
    std::vector<std::string> kinds = {"Command", "Function"};
    if (!is_hook) kinds.insert(kinds.end(), {"Pool", "Prompt"});
    Add(KeyPath(path, "kind"),
        "unknown " + std::string(is_hook ? "hook" : "action") + " kind " +
            Quote(kind) + Suggest(kind, kinds) + "; " + hint);
    return false;
  }

  // {"kind": "Function"} or {"kind": "Function", "handler": NAME}; the
  // default name (the step's) is filled in by ParseStep.
  bool ParseFunction(const Json& v, const std::string& path, const char* what,
                     Action* out) {
    CheckFields(v, path, {"kind", "handler"},
                std::string(what) + " of kind Function");
    out->kind = Action::Kind::kFunction;
    if (Find(v, "handler") == nullptr) return true;
    if (!GetString(v, path, "handler", " (the name a program registers)",
                   &out->handler)) {
      return false;
    }
    if (out->handler.empty()) {
      Add(KeyPath(path, "handler"),
          "must be a non-empty name (or leave it out: the step's name)");
      return false;
    }
    return true;
  }

  bool ParseCommand(const Json& v, const std::string& path, const char* what,
                    Action* out) {
    CheckFields(v, path, {"kind", "script"},
                std::string(what) + " of kind Command");
    out->kind = Action::Kind::kCommand;
    if (!GetString(v, path, "script", " (the shell command to run)",
                   &out->script)) {
      return false;
    }
    // Linux caps one argument of exec at 128 KiB (MAX_ARG_STRLEN).
    constexpr size_t kMaxScript = 128 * 1024 - 1;
    if (out->script.size() > kMaxScript) {
      Add(KeyPath(path, "script"),
          "is " + std::to_string(out->script.size()) +
              " bytes; a script passed to sh -c can be at most " +
              std::to_string(kMaxScript) +
              " bytes: put the commands in a file and run that file");
      return false;
    }
    // exec passes C strings: sh would run only what comes before a NUL.
    const size_t nul = out->script.find('\0');
    if (nul != std::string::npos) {
      Add(KeyPath(path, "script"),
          "holds a NUL character (\\u0000) at byte " + std::to_string(nul) +
              "; sh -c would run only the text before it: remove it");
      return false;
    }
    return true;
  }

  // `path` is the action's, or its params' for the nested form (where
  // Barnum's `pool`, `root` and `timeout` are allowed too).
  bool ParsePool(const Json& v, const std::string& path, Action* out) {
    const bool nested =
        path.size() > 7 && path.compare(path.size() - 7, 7, ".params") == 0;
    Fields allowed = {"kind", "instructions"};
    if (nested) allowed = {"kind", "instructions", "pool", "root", "timeout"};
    CheckFields(v, path, allowed, "an action of kind Pool");
    out->kind = Action::Kind::kPool;
    if (nested) ParsePoolExtras(v, path);
    const Json* ins = Find(v, "instructions");
    if (ins == nullptr || !ins->is_object()) {
      return GetString(v, path, "instructions", " (markdown for the agent)",
                       &out->instructions);
    }
    return ParseLinked(*ins, KeyPath(path, "instructions"), &out->instructions);
  }

  void ParsePoolExtras(const Json& v, const std::string& path) {
    for (const char* key : {"pool", "root"}) {
      const Json* f = Find(v, key);
      if (f && !f->is_null() && !f->is_string()) {
        Add(KeyPath(path, key), "must be a string or null, " + Got(*f));
      }
    }
    const Json* t = Find(v, "timeout");
    if (t && !t->is_null()) {
      StepOptions o;
      ParseTimeout(*t, KeyPath(path, "timeout"), &o);
      pool_timeout_ = o.timeout_seconds;
    }
  }

  // Barnum's MaybeLinked instructions: {"kind": "Inline", "value": text} or
  // {"kind": "Link", "path": file}, a file relative to the workflow's
  // directory. A Link is resolved here and remembered, so that Parse
  // freezes its text (as Inline) into the run.
  bool ParseLinked(const Json& v, const std::string& path, std::string* out) {
    std::string kind;
    if (!GetString(v, path, "kind", " (\"Inline\" or \"Link\")", &kind)) {
      return false;
    }
    if (kind == "Inline") {
      CheckFields(v, path, {"kind", "value"}, "inline instructions");
      const Json* value = Find(v, "value");
      if (value == nullptr || !value->is_string()) {
        Add(value ? KeyPath(path, "value") : path,
            value ? "must be a string (the instructions), " + Got(*value)
                  : "missing required field \"value\" (the instructions)");
        return false;
      }
      *out = value->get<std::string>();
      return true;
    }
    if (kind != "Link") {
      Add(KeyPath(path, "kind"),
          "unknown instructions kind " + Quote(kind) +
              Suggest(kind, {"Inline", "Link"}) +
              "; use {\"kind\": \"Inline\", \"value\": text} or "
              "{\"kind\": \"Link\", \"path\": \"file.md\"}");
      return false;
    }
    CheckFields(v, path, {"kind", "path"}, "linked instructions");
    std::string file;
    if (!GetString(v, path, "path", " (a file next to the workflow)", &file)) {
      return false;
    }
    if (wf_->base_dir.empty()) {
      Add(KeyPath(path, "path"),
          "linked instructions are read from a workflow file's directory; "
          "load the workflow from its file");
      return false;
    }
    const std::string full = file[0] == '/' ? file : wf_->base_dir + "/" + file;
    Status s = (env_ ? env_ : Env::Posix())->ReadUserFile(full, out);
    if (!s.ok()) {
      Add(KeyPath(path, "path"), "cannot read the linked instructions file " +
                                     Quote(full) + ": " + s.message());
      return false;
    }
    links_.push_back({path, *out});
    return true;
  }

  // --- steps ---

  void CheckSteps(const Json& root) {
    const Json* steps = Find(root, "steps");
    if (!steps) {
      Add("$",
          "missing required field \"steps\" (a non-empty array of "
          "steps)");
      return;
    }
    if (!steps->is_array() || steps->empty()) {
      Add("$.steps", "must be a non-empty array of steps, " + Got(*steps));
      return;
    }
    for (size_t i = 0; i < steps->size(); ++i) {
      ParseStep((*steps)[i], IndexPath("$.steps", i));
    }
    for (size_t i = 0; i < wf_->steps.size(); ++i) CheckNext(i);
  }

  void ParseStep(const Json& v, const std::string& path) {
    if (!v.is_object()) {
      Add(path,
          "a step must be an object with \"name\" and \"action\", " + Got(v));
      return;
    }
    CheckFields(
        v, path,
        {"name", "action", "next", "value_schema", "options", "finally"},
        "a step");
    Step step;
    GetString(v, path, "name", "", &step.name);
    if (const Json* action = Find(v, "action")) {
      ParseAction(*action, KeyPath(path, "action"), false, &step.action);
    } else {
      Add(path, "missing required field \"action\"");
    }
    const Json* hook = Find(v, "finally");
    if (hook && !hook->is_null()) {  // null = none, as in Barnum
      step.finally_hook.emplace();
      ParseAction(*hook, KeyPath(path, "finally"), true, &*step.finally_hook);
    }
    ParseOptions(Find(v, "options"), KeyPath(path, "options"),
                 wf_->default_options, &step.options);
    if (pool_timeout_) step.options.timeout_seconds = *pool_timeout_;
    pool_timeout_.reset();
    ParseNextList(Find(v, "next"), KeyPath(path, "next"), &step.next);
    ParseSchema(Find(v, "value_schema"), KeyPath(path, "value_schema"), &step);
    CheckPromptStep(step, path, findings_);
    NameFunctions(&step);
    AddStep(path, std::move(step));
  }

  // A Function action without "handler" is named after its step.
  static void NameFunctions(Step* step) {
    Action& a = step->action;
    if (a.kind == Action::Kind::kFunction && a.handler.empty()) {
      a.handler = step->name;
    }
    if (step->finally_hook &&
        step->finally_hook->kind == Action::Kind::kFunction &&
        step->finally_hook->handler.empty()) {
      step->finally_hook->handler = step->name + ".finally";
    }
  }

  void ParseNextList(const Json* next, const std::string& path,
                     std::vector<std::string>* out) {
    if (!next) return;  // Barnum's default: [] (terminal)
    if (!next->is_array()) {
      Add(path, "must be an array of step names ([] for a terminal step), " +
                    Got(*next));
      return;
    }
    for (size_t j = 0; j < next->size(); ++j) {
      const Json& n = (*next)[j];
      if (n.is_string()) {
        out->push_back(n.get<std::string>());
        next_paths_.push_back(IndexPath(path, j));
      } else {
        Add(IndexPath(path, j), "must be a step name (string), " + Got(n));
      }
    }
  }

  // Compiles the value_schema `v` (if any) of `step`.
  void ParseSchema(const Json* v, const std::string& path, Step* step) {
    if (!v || v->is_null()) return;  // null = none, as in Barnum
    std::unique_ptr<ValueSchema> compiled;
    Status s = ValueSchema::Compile(*v, &compiled);
    if (!s.ok()) {
      Add(path, s.message());
      return;
    }
    step->value_schema_json = v->dump();
    step->value_schema = std::move(compiled);
  }

  void AddStep(const std::string& path, Step step) {
    if (!step.name.empty()) {
      auto [it, inserted] = wf_->index.emplace(step.name, wf_->steps.size());
      if (!inserted) {
        Add(KeyPath(path, "name"), "duplicate step name " + Quote(step.name) +
                                       " (also at " +
                                       IndexPath("$.steps", it->second) +
                                       "); step names must be unique");
      }
    }
    step_next_paths_.push_back(std::move(next_paths_));
    next_paths_.clear();
    wf_->steps.push_back(std::move(step));
  }

  std::vector<std::string> StepNames() const {
    std::vector<std::string> names;
    for (size_t i = 0; i < wf_->steps.size(); ++i) {
      const std::string& name = wf_->steps[i].name;
      auto it = wf_->index.find(name);
      if (it != wf_->index.end() && it->second == i) names.push_back(name);
    }
    return names;
  }

  std::string Undefined(const std::string& name) const {
    std::vector<std::string> names = StepNames();
    return "step " + Quote(name) + " is not defined" + Suggest(name, names) +
           "; defined steps are: " + Join(names);
  }

  void CheckNext(size_t i) {
    const Step& step = wf_->steps[i];
    for (size_t j = 0; j < step.next.size(); ++j) {
      if (wf_->index.count(step.next[j]) == 0) {
        Add(step_next_paths_[i][j], Undefined(step.next[j]));
      }
    }
  }

  void CheckEntrypoint(const Json& root) {
    const Json* entry = Find(root, "entrypoint");
    if (!entry) {
      Add("$",
          "missing required field \"entrypoint\": name the step that "
          "receives --input (one of: " +
              Join(StepNames()) + ")");
      return;
    }
    if (!entry->is_string()) {
      Add("$.entrypoint", "must be a step name (string), " + Got(*entry));
      return;
    }
    wf_->entrypoint = entry->get<std::string>();
    // With no usable steps, the "steps" finding already says it all.
    if (!wf_->steps.empty() && wf_->index.count(wf_->entrypoint) == 0) {
      Add("$.entrypoint", Undefined(wf_->entrypoint));
    }
  }

  WorkflowData* wf_;
  std::vector<Finding>* findings_;

 public:
  Env* env_ = nullptr;  // reads linked files; nullptr: Env::Posix()
  // Linked instructions read: the JSON path of each Link object and its
  // text, to freeze in its place.
  std::vector<std::pair<std::string, std::string>> links_;

 private:
  std::vector<std::string> next_paths_;  // of the step being parsed
  // A Pool action's params.timeout, for the step being parsed.
  std::optional<std::optional<double>> pool_timeout_;
  std::vector<std::vector<std::string>> step_next_paths_;
};

}  // namespace

void CheckWorkflow(const Json& root, Env* env, WorkflowData* wf,
                   std::vector<Finding>* findings,
                   std::vector<std::pair<std::string, std::string>>* links) {
  WorkflowChecker checker(wf, findings);
  checker.env_ = env;
  checker.Check(root);
  *links = std::move(checker.links_);
}

}  // namespace wizq::internal
