#include "mcp/mcp_session.h"

#include <algorithm>
#include <utility>

#include "agent/agent_service.h"
#include "mcp/mcp_server.h"
#include "mcp/mcp_tools.h"
#include "queue/task.h"
#include "util/exit_code.h"

namespace wizq {
namespace {

using Json = nlohmann::json;

constexpr const char* kInstructions =
    "Work the Pool tasks of a wizq run: call take_task, do what the "
    "payload's instructions say, then call submit_response with the array "
    "of next tasks they ask for (or fail_task; release_task gives a task "
    "back untried). Call heartbeat within lease_seconds while you work. "
    "Repeat until take_task returns {\"status\": \"finished\"}.";

std::string Dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json ErrorResponse(const Json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"},
          {"id", id},
          {"error", {{"code", code}, {"message", message}}}};
}

Json ResultResponse(const Json& id, Json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

// Whether arrays and objects in `s` nest deeper than `limit` (strings
// skipped). Checked before parsing so that no deep recursion ever happens
// on hostile input.
bool NestsDeeperThan(const std::string& s, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// nlohmann's message without its "[json.exception.parse_error.101] ".
std::string ParseMessage(const std::exception& e) {
  std::string m = e.what();
  const size_t close = m.find("] ");
  if (m.rfind("[json.exception.", 0) == 0 && close != std::string::npos) {
    m = m.substr(close + 2);
  }
  return m;
}

bool ValidId(const Json& id) {
  return id.is_string() || id.is_number_integer();
}

}  // namespace

McpSession::McpSession(AgentService* service, std::string server_version,
                       int max_nesting, Logger log)
    : service_(service),
      server_version_(std::move(server_version)),
      max_nesting_(max_nesting),
      log_(std::move(log)) {}

std::string McpSession::TooLong(size_t bytes, size_t limit) {
  return Dump(ErrorResponse(nullptr, kInvalidRequest,
                            "Invalid Request: message of " +
                                std::to_string(bytes) + " bytes or more (" +
                                "the limit is " + std::to_string(limit) +
                                " bytes); skipped"));
}

std::optional<std::string> McpSession::HandleLine(const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) {
    return std::nullopt;
  }
  Json msg;
  std::optional<std::string> refused = ParseLine(line, &msg);
  if (refused) return refused;
  return HandleMessage(msg);
}

// One line as a JSON-RPC message object, or the error response that
// refuses it (it does not parse, nests too deep, is a batch or no object).
std::optional<std::string> McpSession::ParseLine(const std::string& line,
                                                 Json* msg) {
  if (NestsDeeperThan(line, max_nesting_)) {
    return Dump(ErrorResponse(nullptr, kParseError,
                              "Parse error: JSON nested deeper than " +
                                  std::to_string(max_nesting_) + " levels"));
  }
  try {
    *msg = Json::parse(line);
  } catch (const Json::parse_error& e) {
    return Dump(
        ErrorResponse(nullptr, kParseError, "Parse error: " + ParseMessage(e)));
  }
  if (msg->is_array()) {
    return Dump(ErrorResponse(nullptr, kInvalidRequest,
                              "Invalid Request: batches (JSON arrays) are not "
                              "supported; send one message per line"));
  }
  if (!msg->is_object()) {
    return Dump(ErrorResponse(nullptr, kInvalidRequest,
                              "Invalid Request: a message must be a JSON "
                              "object"));
  }
  return std::nullopt;
}

namespace {

// What is wrong with a message's envelope ("" if nothing).
std::string EnvelopeProblem(const Json& msg) {
  auto version_it = msg.find("jsonrpc");
  auto method_it = msg.find("method");
  auto id_it = msg.find("id");
  if (version_it == msg.end() || *version_it != "2.0") {
    return "\"jsonrpc\" must be \"2.0\"";
  }
  if (method_it == msg.end() || !method_it->is_string()) {
    return "\"method\" must be a string";
  }
  if (id_it != msg.end() && !ValidId(*id_it)) {
    return "\"id\" must be a string or an integer";
  }
  return "";
}

}  // namespace

// A parsed message: a response (ignored), a notification (never
// answered), or a request (answered once per id).
std::optional<std::string> McpSession::HandleMessage(const Json& msg) {
  auto id_it = msg.find("id");
  const bool has_id = id_it != msg.end();
  const Json id = has_id && ValidId(*id_it) ? *id_it : Json(nullptr);
  if (!msg.contains("method") &&
      (msg.contains("result") || msg.contains("error"))) {
    // A response; this server sends no requests, so it answers nothing.
    log_("ignored a response to no request (id " + Dump(id) + ")");
    return std::nullopt;
  }
  const std::string problem = EnvelopeProblem(msg);
  if (!has_id) {
    // A notification: never answered, even when malformed.
    if (!problem.empty()) {
      log_("ignored a malformed notification: " + problem);
    } else {
      HandleNotification(msg["method"].get<std::string>());
    }
    return std::nullopt;
  }
  if (!problem.empty()) {
    return Dump(
        ErrorResponse(id, kInvalidRequest, "Invalid Request: " + problem));
  }
  if (!seen_ids_.insert(Dump(id)).second) {
    return Dump(ErrorResponse(
        id, kInvalidRequest,
        "Invalid Request: id " + Dump(id) +
            " was already used in this session; ids must be unique"));
  }
  auto params_it = msg.find("params");
  Json params = Json::object();
  if (params_it != msg.end() && !params_it->is_null()) {
    if (!params_it->is_object()) {
      return Dump(ErrorResponse(id, kInvalidParams,
                                "Invalid params: \"params\" must be an "
                                "object"));
    }
    params = *params_it;
  }
  return Dispatch(id, msg["method"].get<std::string>(), params);
}

// Answers a well-formed request; a failure inside a call (out of memory, a
// bug) ends the request, not the session.
std::string McpSession::Dispatch(const Json& id, const std::string& method,
                                 const Json& params) {
  try {
    return Dump(HandleRequest(id, method, params));
  } catch (const std::exception& e) {
    log_(std::string("internal error: ") + e.what());
    return Dump(ErrorResponse(id, kInternalError,
                              std::string("Internal error: ") + e.what()));
  }
}

void McpSession::HandleNotification(const std::string& method) {
  // notifications/initialized, notifications/cancelled (each call is
  // answered before the next is read, so there is nothing to cancel), and
  // any other notification: nothing to do.
  if (method != "notifications/initialized" &&
      method != "notifications/cancelled") {
    log_("ignored notification " + Dump(Json(method)));
  }
}

Json McpSession::HandleRequest(const Json& id, const std::string& method,
                               const Json& params) {
  if (method == "initialize") return Initialize(id, params);
  if (method == "ping") return ResultResponse(id, Json::object());
  const bool known = method == "tools/list" || method == "tools/call";
  if (known && !initialized_) {
    return ErrorResponse(id, kInvalidRequest,
                         "Invalid Request: the session is not initialized; "
                         "send \"initialize\" first");
  }
  if (method == "tools/list") {
    return ResultResponse(id, {{"tools", mcp::ToolList()}});
  }
  if (method == "tools/call") return CallTool(id, params);
  return ErrorResponse(id, kMethodNotFound,
                       "Method not found: " + Dump(Json(method)));
}

Json McpSession::Initialize(const Json& id, const Json& params) {
  if (initialized_) {
    return ErrorResponse(id, kInvalidRequest,
                         "Invalid Request: the session is already "
                         "initialized");
  }
  auto version = params.find("protocolVersion");
  if (version == params.end() || !version->is_string()) {
    return ErrorResponse(id, kInvalidParams,
                         "Invalid params: \"protocolVersion\" must be a "
                         "string");
  }
  const auto& supported = McpServer::SupportedProtocolVersions();
  const std::string& asked = version->get_ref<const std::string&>();
  protocol_version_ =
      std::find(supported.begin(), supported.end(), asked) != supported.end()
          ? asked
          : supported.front();
  auto info = params.find("clientInfo");
  if (info != params.end() && info->is_object() && info->contains("name") &&
      (*info)["name"].is_string()) {
    agent_name_ = "mcp:" + (*info)["name"].get<std::string>().substr(0, 64);
  }
  initialized_ = true;
  log_("session initialized: protocol " + protocol_version_ + ", client " +
       agent_name_);
  return ResultResponse(
      id, {{"protocolVersion", protocol_version_},
           {"capabilities", {{"tools", {{"listChanged", false}}}}},
           {"serverInfo",
            {{"name", "wizq"},
             {"title", "wizq agent protocol"},
             {"version", server_version_}}},
           {"instructions", kInstructions}});
}

Json McpSession::CallTool(const Json& id, const Json& params) {
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    return ErrorResponse(id, kInvalidParams,
                         "Invalid params: \"name\" must be a string");
  }
  if (!mcp::IsTool(name->get<std::string>())) {
    return ErrorResponse(id, kInvalidParams,
                         "Invalid params: unknown tool " + Dump(*name) +
                             "; the tools are take_task, heartbeat, "
                             "submit_response, fail_task, release_task, "
                             "run_status");
  }
  Json arguments = Json::object();
  auto args = params.find("arguments");
  if (args != params.end() && !args->is_null()) {
    if (!args->is_object()) {
      return ErrorResponse(id, kInvalidParams,
                           "Invalid params: \"arguments\" must be an object");
    }
    arguments = *args;
  }
  Json result =
      mcp::CallTool(service_, name->get<std::string>(), arguments, agent_name_);
  TrackLease(name->get<std::string>(), arguments, result);
  return ResultResponse(id, std::move(result));
}

// Keeps leases_ to what the session holds: a take adds its lease; a done,
// fail or release of it that the service answered (exit 0, or 1: the
// response was invalid and the attempt failed) ends it. A lease the service
// refused (exit 3) is kept: EndSession's call is then refused as well, and
// records nothing.
void McpSession::TrackLease(const std::string& tool, const Json& arguments,
                            const Json& result) {
  const bool error = result.value("isError", false);
  const Json out = result.value("structuredContent", Json::object());
  if (tool == "take_task") {
    if (!error && out.contains("lease") && out.contains("task_id")) {
      leases_[out["task_id"].get<int64_t>()] = out["lease"].get<std::string>();
    }
    return;
  }
  if (tool == "heartbeat" || tool == "run_status") return;
  const int code =
      error ? out.value("exit_code", int{kExitEnvironment}) : kExitCompleted;
  if (code != kExitCompleted && code != kExitTaskFailed) return;
  auto it = leases_.find(arguments["task_id"].get<int64_t>());
  if (it != leases_.end() && it->second == arguments["lease"]) {
    leases_.erase(it);
  }
}

void McpSession::EndSession() {
  for (const auto& [task_id, lease] : leases_) {
    const AgentReply r = service_->Fail(
        task_id, lease, kReasonAgentDisconnected,
        "the MCP session of " + agent_name_ +
            " ended (its client disconnected) while it held the task");
    log_("task " + std::to_string(task_id) + ": " +
         (r.exit_code == kExitCompleted
              ? "handed back, charged (agent_disconnected): " + r.json
              : "not handed back: " + r.message));
  }
  leases_.clear();
}

}  // namespace wizq
