#include "cli/mcp.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "agent/agent_service.h"
#include "cli/store_flags.h"
#include "mcp/mcp_server.h"
#include "orchestrator/run.h"
#include "orchestrator/run_loop.h"  // StopRequested
#include "util/exit_code.h"

namespace wizq {

CLI::App* AddMcpCommand(CLI::App& app, McpArgs* args,
                        const std::string& version) {
  CLI::App* cmd = app.add_subcommand(
      "mcp", "Serve the agent protocol as an MCP server on stdin/stdout");
  cmd->set_version_flag("--version", "wizq " + version);
  AddRunPlaceOptions(cmd, &args->place);
  return cmd;
}

int RunMcpCommand(const McpArgs& args, const std::string& version) {
  // The run may start after the MCP client started this server: a missing
  // directory is served too, each call refused until a run is there.
  struct stat st;
  const std::string& dir = args.place.dir;
  if (stat(dir.c_str(), &st) != 0) {
    std::fprintf(stderr, "wizq mcp: note: --dir %s: %s (yet)\n", dir.c_str(),
                 std::strerror(errno));
  } else if (!S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "wizq mcp: --dir %s: not a directory\n", dir.c_str());
    return kExitInvalid;
  }
  signal(SIGPIPE, SIG_IGN);
  // A client that stops its server (SIGTERM, as the SDKs do when the server
  // has not exited soon after its stdin closed) ends the session in order:
  // the read is interrupted (no SA_RESTART) and the session's leases are
  // handed back before the process exits.
  struct sigaction sa = {};
  sa.sa_handler = [](int) { RequestStop(); };
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  // The protocol gets a descriptor of its own and fd 1 becomes stderr, so
  // that nothing else in the process can ever write on the protocol stream.
  const int protocol_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (protocol_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::fprintf(stderr, "wizq mcp: cannot set up stdout: %s\n",
                 std::strerror(errno));
    return kExitEnvironment;
  }
  std::unique_ptr<AgentService> service = AgentService::Open(args.place);
  McpServerOptions options;
  options.server_version = version;
  options.stop_requested = [] { return StopRequested(); };
  McpServer server(service.get(), STDIN_FILENO, protocol_fd, options);
  const int code = server.Serve();
  close(protocol_fd);
  return code;
}

}  // namespace wizq
