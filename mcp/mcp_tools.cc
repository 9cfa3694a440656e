#include "mcp/mcp_tools.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "agent/agent_service.h"
#include "queue/task.h"
#include "util/exit_code.h"

namespace wizq {
namespace mcp {
namespace {

// How an argument is typed; each kind has one schema and one check.
enum class ArgKind {
  kTaskId,     // integer >= 1
  kLease,      // non-empty string
  kText,       // any string
  kSeconds,    // number from 0 to kMaxWaitSeconds
  kStepNames,  // array of non-empty strings
  kResponse,   // array, or a string holding one (checked by the service)
};

struct ArgSpec {
  const char* name;
  ArgKind kind;
  bool required;
  const char* description;
};

struct ToolSpec {
  const char* name;
  const char* title;
  const char* description;
  std::vector<ArgSpec> args;
};

const std::vector<ToolSpec>& Tools() {
  static const std::vector<ToolSpec> tools = {
      {"take_task",
       "Take a task",
       "Claims the lowest-id ready Pool task of the wizq run (of the named "
       "steps, if given) under a lease and returns its payload: task "
       "{kind, value}, instructions (Markdown: what to do and which "
       "responses are valid), timeout_seconds, task_id, attempt, lease, "
       "lease_seconds, run_id, idempotency_key, install_dir (where the "
       "run's files are). Keep task_id and lease for heartbeat, "
       "submit_response, fail_task and release_task. With nothing to take it "
       "waits up to wait_seconds, then returns {\"status\": \"idle\"} (try "
       "again later) or {\"status\": \"finished\", \"run_status\": ...} "
       "(stop).",
       {{"steps", ArgKind::kStepNames, false,
         "Only take tasks of these steps (default: any Pool step)"},
        {"wait_seconds", ArgKind::kSeconds, false,
         "How long to wait for a ready task (default 0; keep it below "
         "your client's request timeout)"}}},
      {"heartbeat",
       "Renew a lease",
       "Renews the lease of a task you took; call it well within "
       "lease_seconds while you work. An error means the lease was lost: "
       "stop working on the task.",
       {{"task_id", ArgKind::kTaskId, true, "task_id from take_task"},
        {"lease", ArgKind::kLease, true, "lease from take_task"}}},
      {"submit_response",
       "Complete a task",
       "Completes the task with its response: the array of next tasks "
       "[{\"kind\": STEP, \"value\": ...}] the instructions allow ([] for a "
       "terminal step), or that array as a JSON string. Send the array "
       "alone: no Markdown fence, no text around it. An invalid response "
       "fails the attempt (the step's retry policy applies) and the error "
       "says what was wrong.",
       {{"task_id", ArgKind::kTaskId, true, "task_id from take_task"},
        {"lease", ArgKind::kLease, true, "lease from take_task"},
        {"response", ArgKind::kResponse, true,
         "The next tasks, e.g. [{\"kind\": \"Review\", \"value\": {}}]"}}},
      {"fail_task",
       "Fail a task",
       "Gives up the attempt (reason agent_failed); the step's retry "
       "policy decides whether the task is tried again.",
       {{"task_id", ArgKind::kTaskId, true, "task_id from take_task"},
        {"lease", ArgKind::kLease, true, "lease from take_task"},
        {"message", ArgKind::kText, false, "Why, for the audit log"}}},
      {"release_task",
       "Give a task back",
       "Gives the task back without being charged: it is pending again at "
       "once and the attempt does not count (refused past the step's "
       "timeout). Use it for a task you cannot work on now; use fail_task "
       "for one you tried and could not do. Tasks still held when this "
       "session ends are failed (agent_disconnected; retry policy applies).",
       {{"task_id", ArgKind::kTaskId, true, "task_id from take_task"},
        {"lease", ArgKind::kLease, true, "lease from take_task"}}},
      {"run_status",
       "Run status",
       "The wizq run's status: the object `wizq status --json` prints.",
       {}},
  };
  return tools;
}

const ToolSpec* FindTool(const std::string& name) {
  for (const ToolSpec& t : Tools()) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

Json ArgSchema(const ArgSpec& arg) {
  Json s;
  switch (arg.kind) {
    case ArgKind::kTaskId:
      s = {{"type", "integer"}, {"minimum", 1}};
      break;
    case ArgKind::kLease:
      s = {{"type", "string"}, {"minLength", 1}};
      break;
    case ArgKind::kText:
      s = {{"type", "string"}};
      break;
    case ArgKind::kSeconds:
      s = {{"type", "number"}, {"minimum", 0}, {"maximum", kMaxWaitSeconds}};
      break;
    case ArgKind::kStepNames:
      s = {{"type", "array"},
           {"items", {{"type", "string"}, {"minLength", 1}}}};
      break;
    case ArgKind::kResponse:
      s = {{"anyOf",
            {{{"type", "array"},
              {"items",
               {{"type", "object"},
                {"properties", {{"kind", {{"type", "string"}}}, {"value", {}}}},
                {"required", {"kind", "value"}}}}},
             {{"type", "string"}, {"description", "the array as JSON text"}}}}};
      break;
  }
  s["description"] = arg.description;
  return s;
}

Json InputSchema(const ToolSpec& tool) {
  Json properties = Json::object();
  Json required = Json::array();
  for (const ArgSpec& a : tool.args) {
    properties[a.name] = ArgSchema(a);
    if (a.required) required.push_back(a.name);
  }
  Json s = {{"type", "object"},
            {"properties", properties},
            {"additionalProperties", false}};
  if (!required.empty()) s["required"] = required;
  return s;
}

// Empty when `v` is a valid `arg`, else what it must be.
std::string CheckArg(const ArgSpec& arg, const Json& v) {
  switch (arg.kind) {
    case ArgKind::kTaskId:
      if (v.is_number_unsigned() && v.get<uint64_t>() >= 1 &&
          v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) {
        return "";
      }
      if (v.is_number_integer() && v.get<int64_t>() >= 1) return "";
      return "an integer >= 1";
    case ArgKind::kLease:
      return v.is_string() && !v.get_ref<const std::string&>().empty()
                 ? ""
                 : "a non-empty string";
    case ArgKind::kText:
      return v.is_string() ? "" : "a string";
    case ArgKind::kSeconds:
      if (v.is_number() && std::isfinite(v.get<double>()) &&
          v.get<double>() >= 0 && v.get<double>() <= kMaxWaitSeconds) {
        return "";
      }
      return "a number from 0 to " +
             std::to_string(static_cast<int>(kMaxWaitSeconds));
    case ArgKind::kStepNames:
      if (!v.is_array()) return "an array of step names";
      for (const Json& s : v) {
        if (!s.is_string() || s.get_ref<const std::string&>().empty()) {
          return "an array of step names (non-empty strings)";
        }
      }
      return "";
    case ArgKind::kResponse:
      return v.is_array() || v.is_string()
                 ? ""
                 : "an array of next tasks ([] for none), or a string "
                   "holding one";
  }
  return "valid";
}

// Short JSON for a message: the value, cut at 80 bytes.
std::string Shown(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// Empty when `arguments` match `tool`'s schema, else the message.
std::string CheckArguments(const ToolSpec& tool, const Json& arguments) {
  const std::string prefix = std::string(tool.name) + ": ";
  for (auto it = arguments.begin(); it != arguments.end(); ++it) {
    bool known = false;
    for (const ArgSpec& a : tool.args) known = known || it.key() == a.name;
    if (known) continue;
    std::string names;
    for (const ArgSpec& a : tool.args) {
      names += (names.empty() ? "" : ", ") + std::string(a.name);
    }
    return prefix + "unknown argument " + Shown(Json(it.key())) +
           (tool.args.empty() ? " (it takes no arguments)"
                              : " (it takes " + names + ")");
  }
  for (const ArgSpec& a : tool.args) {
    auto it = arguments.find(a.name);
    if (it == arguments.end()) {
      if (a.required) return prefix + "missing argument \"" + a.name + "\"";
      continue;
    }
    std::string want = CheckArg(a, *it);
    if (!want.empty()) {
      return prefix + "argument \"" + a.name + "\" must be " + want + ", got " +
             Shown(*it);
    }
  }
  return "";
}

Json TextContent(const std::string& text) {
  return Json::array({{{"type", "text"}, {"text", text}}});
}

Json ErrorResult(int exit_code, const std::string& message,
                 const Json* result) {
  Json structured = {{"exit_code", exit_code}, {"message", message}};
  if (result != nullptr) structured["result"] = *result;
  return {{"content", TextContent(message)},
          {"structuredContent", structured},
          {"isError", true}};
}

AgentReply Dispatch(AgentService* service, const std::string& name,
                    const Json& args, const std::string& agent) {
  if (name == "take_task") {
    TakeRequest request;
    request.agent = agent;
    if (args.contains("steps")) {
      request.steps = args["steps"].get<std::vector<std::string>>();
    }
    if (args.contains("wait_seconds")) {
      request.wait_seconds = args["wait_seconds"].get<double>();
    }
    return service->Take(request);
  }
  if (name == "run_status") return service->RunStatus();
  const int64_t task_id = args["task_id"].get<int64_t>();
  const std::string& lease = args["lease"].get_ref<const std::string&>();
  if (name == "heartbeat") return service->Heartbeat(task_id, lease);
  if (name == "submit_response") {
    const Json& response = args["response"];
    return service->Done(task_id, lease,
                         response.is_string()
                             ? response.get_ref<const std::string&>()
                             : response.dump());
  }
  if (name == "release_task") return service->Release(task_id, lease);
  return service->Fail(task_id, lease, kReasonAgentFailed,
                       args.value("message", std::string()));
}

}  // namespace

Json ToolList() {
  Json tools = Json::array();
  for (const ToolSpec& t : Tools()) {
    tools.push_back({{"name", t.name},
                     {"title", t.title},
                     {"description", t.description},
                     {"inputSchema", InputSchema(t)}});
  }
  return tools;
}

bool IsTool(const std::string& name) { return FindTool(name) != nullptr; }

Json ReplyToResult(const AgentReply& reply) {
  Json parsed = Json::parse(reply.json, nullptr, /*allow_exceptions=*/false);
  const bool has_object = !reply.json.empty() && parsed.is_object();
  if (reply.exit_code == kExitCompleted ||
      reply.exit_code == kExitNothingToTake) {
    if (!has_object) {
      return ErrorResult(kExitEnvironment,
                         "the agent service answered without a JSON object: " +
                             reply.json.substr(0, 200),
                         nullptr);
    }
    return {{"content", TextContent(reply.json)},
            {"structuredContent", parsed},
            {"isError", false}};
  }
  std::string message = reply.message;
  if (message.empty()) {
    message = "failed with exit code " + std::to_string(reply.exit_code);
  }
  return ErrorResult(reply.exit_code, message, has_object ? &parsed : nullptr);
}

Json CallTool(AgentService* service, const std::string& name,
              const Json& arguments, const std::string& agent) {
  const ToolSpec* tool = FindTool(name);
  std::string problem = CheckArguments(*tool, arguments);
  if (!problem.empty()) return ErrorResult(kExitInvalid, problem, nullptr);
  return ReplyToResult(Dispatch(service, name, arguments, agent));
}

}  // namespace mcp
}  // namespace wizq
