// McpServer: the agent protocol of SPEC §9 as a Model Context Protocol
// server (`wizq mcp`). It speaks JSON-RPC 2.0 over a pair of file
// descriptors, one message per line (the MCP stdio transport): nothing but
// protocol is written to the output, diagnostics go to the log descriptor.
//
// The session follows the MCP lifecycle: `initialize` (protocol-version
// negotiation: the client's version when it is one of
// SupportedProtocolVersions(), else the latest), then `tools/list` and
// `tools/call` for the tools of SPEC §9 (take_task, heartbeat,
// submit_response, fail_task, release_task, run_status), each a call on an
// AgentService. When the input ends (the client closed stdin or went
// away), the leases the session still holds are failed at once with
// reason agent_disconnected (McpSession::EndSession), charged: the retry
// policy applies.
// A tool's result carries the JSON the CLI prints, as `structuredContent`
// and as text; a call the service refuses is a result with `isError: true`
// and the CLI's message. Malformed messages get the JSON-RPC error they
// deserve (-32700, -32600, -32601, -32602) and the session goes on.
// Notifications are never answered. Batches (JSON arrays) are refused: the
// MCP revisions since 2025-06-18 removed them.
//
// Thread-safety: one thread calls Serve().
#ifndef WIZQ_MCP_MCP_SERVER_H_
#define WIZQ_MCP_MCP_SERVER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace wizq {

class AgentService;
class McpSession;

struct McpServerOptions {
  // serverInfo.version in the `initialize` result.
  std::string server_version = "0";
  // A longer line is answered with -32600 and skipped (the service's
  // response limit is 16 MiB; a response array travels as JSON, not as an
  // escaped string, so it fits).
  size_t max_message_bytes = 32u << 20;
  // Deeper JSON nesting (arrays and objects) is refused with -32700 before
  // it is parsed.
  int max_nesting = 512;
  // Where diagnostics go (one line each, prefixed "wizq mcp: "); -1: none.
  int log_fd = 2;
  // Asked when a read of the input is interrupted by a signal: true ends
  // the session as if the input had ended (a client that stops its server
  // with SIGTERM). Null: never.
  std::function<bool()> stop_requested;
};

class McpServer {
 public:
  // REQUIRES: `service` outlives the server. `in_fd` and `out_fd` stay open
  // until Serve() returns; the server does not close them. SIGPIPE is
  // ignored when `out_fd` is a pipe (else a vanished client kills the
  // process instead of ending Serve() with 3).
  McpServer(AgentService* service, int in_fd, int out_fd,
            McpServerOptions options = McpServerOptions());
  ~McpServer();
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  // Reads and answers messages until the input ends (or a stop is
  // requested), then ends the session (its leases are failed,
  // agent_disconnected). Returns 0 when it ended (an unfinished last line
  // is discarded, and logged), 130 when stopped, 3 when reading the input
  // or writing the output failed.
  int Serve();

  // The protocol revisions this server speaks, newest first.
  static const std::vector<std::string>& SupportedProtocolVersions();

 private:
  // Serve() until the input ends or fails.
  int ReadAndAnswer();
  bool Emit(const std::string& message);
  void Log(const std::string& line) const;

  const int in_fd_;
  const int out_fd_;
  const McpServerOptions options_;
  std::unique_ptr<McpSession> session_;
};

}  // namespace wizq

#endif  // WIZQ_MCP_MCP_SERVER_H_
