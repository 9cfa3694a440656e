// `wizq agent take|heartbeat|done|fail|release|serve` (SPEC §9): the agent
// protocol on the command line. Each prints the JSON an AgentService call
// returns on stdout and its message on stderr, and exits with its code.
#ifndef WIZQ_CLI_AGENT_H_
#define WIZQ_CLI_AGENT_H_

#include <CLI/CLI.hpp>
#include <memory>

namespace wizq {

class AgentCli {
 public:
  // Adds the `agent` command and its subcommands to `app`.
  explicit AgentCli(CLI::App& app);
  ~AgentCli();
  // Whether `agent` was given (after app.parse).
  bool chosen() const;
  // Runs the chosen subcommand; returns the exit code.
  int Run();

 private:
  struct Args;
  std::unique_ptr<Args> a_;
};

}  // namespace wizq

#endif  // WIZQ_CLI_AGENT_H_
