// `wizq crashtest` (SPEC §15, docs/CLI.md "crashtest"): runs a workflow
// undisturbed in a copy of a template directory (--baseline-runs times:
// what differs between those runs is nondeterministic, not compared), then
// once per kill point, killing `wizq` (and, for a power cut, every task
// process tree) at that durable step and resuming with `wizq run` until
// the run ends, and compares each end state with the undisturbed one.
//
// The pieces: proc.h (the child processes: spawn, wait, kill
// every descendant), tree.h (copy, fingerprint and compare
// directories), audit.h (kill points and executions from the
// audit log), report.cc (the table, the verdict, --json).
#ifndef WIZQ_TOOLS_CRASHTEST_CRASHTEST_H_
#define WIZQ_TOOLS_CRASHTEST_CRASHTEST_H_

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace wizq {

struct CrashtestOptions {
  std::string workflow;
  std::string input;               // --input (JSON text); empty: none
  std::string input_file;          // --input-file
  std::string template_dir;        // --template; empty: start from an empty dir
  int kills = 0;                   // --kills N: test N kill points; 0: all
  bool orchestrator_only = false;  // else a power cut
  bool power_cut = false;          // the default, said explicitly
  std::vector<std::string> ignore;  // --ignore GLOB
  bool keep = false;                // --keep: leave the scratch dirs
  bool json = false;
  int jobs = 0;           // --jobs, passed to `wizq run`; 0: its default
  int baseline_runs = 3;  // --baseline-runs N
  std::string agent;      // --agent COMMAND, passed to `wizq run`
  std::vector<std::string> answers;  // --answer STEP=VALUE, passed on
};

// Adds the `crashtest` subcommand, filling `*options` when parsed.
CLI::App* AddCrashtestCommand(CLI::App* app, CrashtestOptions* options);

// Runs it; returns the exit code (docs/CLI.md): 0 every end state matches
// the undisturbed one, 1 some differ, 2 bad arguments or workflow, or a
// step it cannot run (a Pool step without --agent, a Prompt without a
// default or an --answer; nothing ran), 3 environment error, 130
// interrupted; if an undisturbed run itself does not complete, its own
// exit code.
int RunCrashtest(const CrashtestOptions& options);

}  // namespace wizq

#endif  // WIZQ_TOOLS_CRASHTEST_CRASHTEST_H_
