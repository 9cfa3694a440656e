// McpSession: one MCP session's JSON-RPC 2.0 layer, one message at a time,
// without I/O (McpServer reads the lines and writes the answers). Internal
// to mcp/; see mcp/mcp_server.h for the protocol it speaks.
#ifndef WIZQ_MCP_MCP_SESSION_H_
#define WIZQ_MCP_MCP_SESSION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_set>

namespace wizq {

class AgentService;

// JSON-RPC 2.0 error codes.
enum RpcError {
  kParseError = -32700,
  kInvalidRequest = -32600,
  kMethodNotFound = -32601,
  kInvalidParams = -32602,
  kInternalError = -32603,
};

class McpSession {
 public:
  using Json = nlohmann::json;
  using Logger = std::function<void(const std::string&)>;

  // REQUIRES: `service` outlives the session.
  McpSession(AgentService* service, std::string server_version, int max_nesting,
             Logger log);

  // The answer to one line of input (without its newline), as one line of
  // JSON without a newline; nullopt when nothing is to be answered (a
  // notification, a response, a blank line).
  std::optional<std::string> HandleLine(const std::string& line);

  // The error response (id null) for a line longer than the limit.
  static std::string TooLong(size_t bytes, size_t limit);

  // The client is gone (its input ended): fails the attempts of the leases
  // taken in this session and not ended by it, at once, with reason
  // agent_disconnected (charged: the retry policy applies, so a task that
  // kills its client every time still ends failed). Logs each.
  void EndSession();

 private:
  std::optional<std::string> ParseLine(const std::string& line, Json* msg);
  std::optional<std::string> HandleMessage(const Json& msg);
  std::string Dispatch(const Json& id, const std::string& method,
                       const Json& params);
  Json HandleRequest(const Json& id, const std::string& method,
                     const Json& params);
  Json Initialize(const Json& id, const Json& params);
  Json CallTool(const Json& id, const Json& params);
  void TrackLease(const std::string& tool, const Json& arguments,
                  const Json& result);
  void HandleNotification(const std::string& method);

  AgentService* const service_;
  const std::string server_version_;
  const int max_nesting_;
  const Logger log_;
  bool initialized_ = false;
  std::string protocol_version_;
  std::string agent_name_ = "mcp";
  // Every request id seen (as JSON text: 7 and "7" differ): a reused id is
  // refused, as JSON-RPC and MCP require ids unique within a session.
  std::unordered_set<std::string> seen_ids_;
  // The leases taken in this session (task id -> token) whose attempt the
  // session has not ended (done, fail, release).
  std::map<int64_t, std::string> leases_;
};

}  // namespace wizq

#endif  // WIZQ_MCP_MCP_SESSION_H_
