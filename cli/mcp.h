// `wizq mcp [--dir DIR]`: the agent protocol as an MCP server on stdin and
// stdout (mcp/mcp_server.h, docs/AGENTS.md "MCP").
#ifndef WIZQ_CLI_MCP_H_
#define WIZQ_CLI_MCP_H_

#include <CLI/CLI.hpp>
#include <string>

#include "queue/run_place.h"

namespace wizq {

struct McpArgs {
  RunPlace place;  // --dir, --store, --schema, --run-id
};

// Adds the `mcp` subcommand to `app`, filling `args` when it is parsed.
CLI::App* AddMcpCommand(CLI::App& app, McpArgs* args,
                        const std::string& version);

// Serves MCP on stdin/stdout until stdin ends. Returns the exit code: 0 when
// stdin ended, 2 when --dir is a file, 3 on an I/O error.
int RunMcpCommand(const McpArgs& args, const std::string& version);

}  // namespace wizq

#endif  // WIZQ_CLI_MCP_H_
