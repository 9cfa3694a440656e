#include "tasks/workflow/response.h"

#include <nlohmann/json.hpp>

#include "tasks/workflow/json_messages.h"
#include "tasks/workflow/jsonc.h"
#include "tasks/workflow/value_schema.h"
#include "util/canonical_json.h"

namespace wizq {

namespace {

using Json = nlohmann::json;

constexpr size_t kMaxListedErrors = 5;

std::string QuotedList(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names)
    out += (out.empty() ? "" : ", ") + Quote(n);
  return out;
}

bool IsBlank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// Parses untrusted JSON text; `what` names it in messages.
Status ParseUntrusted(std::string_view text, const std::string& what,
                      Json* out) {
  size_t bad = FirstInvalidUtf8(text);
  if (bad != std::string_view::npos) {
    return Status::InvalidArgument(what + " is not valid UTF-8 (bad byte at " +
                                   LineColumn(text, bad) + ")");
  }
  Status s = CheckJsonDepth(text);
  if (!s.ok()) return Status::InvalidArgument(what + ": " + s.message());
  s = CheckKeysUnique(text);
  if (!s.ok()) return Status::InvalidArgument(what + ": " + s.message());
  try {
    *out = Json::parse(text);
  } catch (const Json::exception& e) {
    std::string why = e.what();
    size_t bracket = why.find("] ");
    if (bracket != std::string::npos) why = why.substr(bracket + 2);
    return Status::InvalidArgument(what + " is not valid JSON (" +
                                   Excerpt(why, 300) +
                                   "); it starts with: " + Excerpt(text, 80));
  }
  return Status::OK();
}

// Checks a value parsed by ParseUntrusted against the value_schema of step
// `kind`, as Workflow::ValidateValue does with the value's text (whose
// other checks ParseUntrusted has made).
Status ValidateValue(const Workflow& wf, std::string_view kind,
                     const Json& value) {
  const Step* step = wf.FindStep(kind);
  if (!step) return Status::InvalidArgument("unknown step " + Quote(kind));
  return ValidateStepValue(*step, value);
}

// Which kinds an element may name: the `next` of `from`, or (for a finally
// hook, from == nullptr) any step.
Status CheckKind(const Workflow& wf, const Step* from,
                 const std::string& kind) {
  if (!from) {
    if (wf.FindStep(kind)) return Status::OK();
    std::vector<std::string> names;
    for (const Step& s : wf.steps()) names.push_back(s.name);
    return Status::InvalidArgument(
        "kind " + Quote(kind) + " is not a step of the workflow" +
        Suggest(kind, names) + "; steps: " + QuotedList(names));
  }
  for (const std::string& n : from->next) {
    if (n == kind) return Status::OK();
  }
  if (from->next.empty()) {
    return Status::InvalidArgument(
        "kind " + Quote(kind) + " is not allowed: step " + Quote(from->name) +
        " is terminal (its next is []), so it must print []");
  }
  return Status::InvalidArgument(
      "kind " + Quote(kind) + " is not a next step of " + Quote(from->name) +
      Suggest(kind, from->next) + "; allowed: " + QuotedList(from->next));
}

// Checks one element of the array and fills *task.
Status CheckElement(const Workflow& wf, const Step* from, const Json& elem,
                    NextTask* task) {
  if (!elem.is_object()) {
    return Status::InvalidArgument(
        "expected an object {\"kind\": ..., \"value\": ...}, " + Got(elem));
  }
  for (auto& [key, unused] : elem.items()) {
    if (key != "kind" && key != "value") {
      return Status::InvalidArgument(
          "unknown field " + Quote(key) + Suggest(key, {"kind", "value"}) +
          "; an element has only \"kind\" and \"value\"");
    }
  }
  auto kind = elem.find("kind");
  if (kind == elem.end() || !kind->is_string()) {
    return Status::InvalidArgument(
        "\"kind\" must be the name of a step (a string), " +
        (kind == elem.end() ? std::string("but it is missing") : Got(*kind)));
  }
  task->kind = kind->get<std::string>();
  WIZQ_RETURN_IF_ERROR(CheckKind(wf, from, task->kind));
  auto value = elem.find("value");
  if (value == elem.end()) {
    return Status::InvalidArgument("kind " + Quote(task->kind) +
                                   ": missing \"value\" (use {} for none)");
  }
  task->value_json = value->dump();
  Status s = ValidateValue(wf, task->kind, *value);
  if (!s.ok()) {
    return Status::InvalidArgument("kind " + Quote(task->kind) + ": value " +
                                   s.message());
  }
  return Status::OK();
}

// Shared by ParseResponse and ParseHookResponse.
Status ParseTasks(const Workflow& wf, const Step* from, std::string_view text,
                  std::vector<NextTask>* out) {
  out->clear();
  if (IsBlank(text)) {
    return Status::InvalidArgument(
        "expected a JSON array of next tasks on stdout, got empty output "
        "(print [] to spawn nothing)");
  }
  Json root;
  WIZQ_RETURN_IF_ERROR(ParseUntrusted(text, "stdout", &root));
  if (!root.is_array()) {
    std::string hint = root.is_object() && root.contains("kind")
                           ? "; wrap a single task in [ ]"
                           : "";
    return Status::InvalidArgument(
        "expected a JSON array of next tasks [{\"kind\": ..., \"value\": "
        "...}], " +
        Got(root) + hint);
  }
  std::vector<NextTask> tasks(root.size());
  std::vector<std::string> errors;
  for (size_t i = 0; i < root.size(); ++i) {
    Status s = CheckElement(wf, from, root[i], &tasks[i]);
    if (!s.ok()) {
      errors.push_back("element [" + std::to_string(i) + "]: " + s.message());
    }
  }
  if (errors.empty()) {
    *out = std::move(tasks);
    return Status::OK();
  }
  std::string msg;
  for (size_t i = 0; i < errors.size() && i < kMaxListedErrors; ++i) {
    msg += (i ? "; " : "") + errors[i];
  }
  if (errors.size() > kMaxListedErrors) {
    msg += "; and " + std::to_string(errors.size() - kMaxListedErrors) +
           " more invalid elements";
  }
  return Status::InvalidArgument(msg);
}

}  // namespace

Status ParseResponse(const Workflow& wf, const Step& from,
                     std::string_view stdout_text, std::vector<NextTask>* out) {
  return ParseTasks(wf, &from, stdout_text, out);
}

Status ParseHookResponse(const Workflow& wf, std::string_view stdout_text,
                         std::vector<NextTask>* out) {
  return ParseTasks(wf, nullptr, stdout_text, out);
}

Status ChildrenOf(const Workflow& wf, const Task& task,
                  std::string_view response, std::vector<NewTask>* children) {
  children->clear();
  std::vector<NextTask> next;
  if (task.origin == Origin::kFinally) {
    WIZQ_RETURN_IF_ERROR(ParseHookResponse(wf, response, &next));
  } else {
    const Step* step = wf.FindStep(task.type);
    if (step == nullptr) {
      return Status::InvalidArgument("step " + Quote(task.type) +
                                     " is not in the workflow");
    }
    WIZQ_RETURN_IF_ERROR(ParseResponse(wf, *step, response, &next));
  }
  *children = ChildrenOf(wf, task, std::move(next));
  return Status::OK();
}

std::vector<NewTask> ChildrenOf(const Workflow& wf, const Task& task,
                                std::vector<NextTask> next) {
  const bool hook = task.origin == Origin::kFinally;
  std::vector<NewTask> children;
  children.reserve(next.size());
  for (NextTask& n : next) {
    const Step* target = wf.FindStep(n.kind);
    NewTask child;
    child.type = std::move(n.kind);
    child.inputs = std::move(n.value_json);
    child.parent_id = hook ? task.parent_id : task.id;
    child.origin = Origin::kSpawned;
    child.max_attempts = target->options.max_attempts();
    child.has_finally = target->finally_hook.has_value();
    children.push_back(std::move(child));
  }
  return children;
}

NewTask RootTask(const Workflow& wf, std::string input_json) {
  const Step* entry = wf.FindStep(wf.entrypoint());
  NewTask root;
  root.type = entry->name;
  root.inputs = std::move(input_json);
  root.origin = Origin::kInitial;
  root.max_attempts = entry->options.max_attempts();
  root.has_finally = entry->finally_hook.has_value();
  return root;
}

NewTask FinallyHookOf(const Workflow& wf, const Task& owner) {
  const Step* step = wf.FindStep(owner.type);
  NewTask hook;
  hook.type = owner.type;
  hook.inputs = owner.inputs;
  hook.parent_id = owner.parent_id;
  hook.origin = Origin::kFinally;
  hook.finally_for = owner.id;
  hook.max_attempts = step ? step->options.max_attempts() : 1;
  return hook;
}

Status ValidateEntryInput(const Workflow& wf, std::string_view input_json) {
  const std::string what = "the entry input";
  if (IsBlank(input_json)) {
    return Status::InvalidArgument(what +
                                   " is empty; pass a JSON value, e.g. {}");
  }
  Json value;
  WIZQ_RETURN_IF_ERROR(ParseUntrusted(input_json, what, &value));
  Status s = ValidateValue(wf, wf.entrypoint(), value);
  if (!s.ok()) {
    return Status::InvalidArgument(what + " " + s.message());
  }
  return Status::OK();
}

}  // namespace wizq
