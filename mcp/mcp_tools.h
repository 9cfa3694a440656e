// The MCP tools of SPEC §9 (take_task, heartbeat, submit_response,
// fail_task, release_task, run_status): their descriptions and argument
// schemas for `tools/list`, and `tools/call` on an AgentService. Internal
// to mcp/.
//
// The argument schemas and the checks CallTool makes come from one table,
// so what `tools/list` promises is what a call enforces: arguments that do
// not match (a missing or unknown argument, a wrong type, a value out of
// range) are refused with a tool error (`isError: true`, exit code 2, the
// argument named) and reach no service call, so they change nothing.
#ifndef WIZQ_MCP_MCP_TOOLS_H_
#define WIZQ_MCP_MCP_TOOLS_H_

#include <nlohmann/json.hpp>
#include <string>

namespace wizq {

class AgentService;
struct AgentReply;

namespace mcp {

using Json = nlohmann::json;

// The longest take_task wait_seconds: MCP clients time requests out (the
// TypeScript SDK after 60 s by default), and the server answers nothing
// else while a take waits.
constexpr double kMaxWaitSeconds = 3600;

// The `tools` array of a `tools/list` result.
Json ToolList();

// Whether `name` is one of the tools.
bool IsTool(const std::string& name);

// Calls tool `name` with `arguments` (an object) and returns the
// CallToolResult. `agent` names the agent for take_task (shown by `wizq
// status`). REQUIRES: IsTool(name).
Json CallTool(AgentService* service, const std::string& name,
              const Json& arguments, const std::string& agent);

// The CallToolResult for a service reply: exit 0 and 5 (nothing to take)
// are results whose structuredContent is the reply's JSON object and whose
// text is that JSON; any other exit is `isError: true` with the reply's
// message as text and {"exit_code", "message"[, "result"]} as
// structuredContent.
Json ReplyToResult(const AgentReply& reply);

}  // namespace mcp
}  // namespace wizq

#endif  // WIZQ_MCP_MCP_TOOLS_H_
