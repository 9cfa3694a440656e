// `wizq validate WORKFLOW [--graph [--format text|dot]]` (docs/CLI.md):
// the workflow's findings (exit 2), warnings about scripts that cannot
// start, and the step graph.
#ifndef WIZQ_CLI_VALIDATE_H_
#define WIZQ_CLI_VALIDATE_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace wizq {

class Workflow;

struct ValidateArgs {
  std::string workflow;
  bool graph = false;
  std::string format = "text";  // of --graph: text or dot
};

// Adds the `validate` command to `app`.
CLI::App* AddValidateCommand(CLI::App& app, ValidateArgs* args,
                             const std::string& version);
// Runs it: 0 (valid; warnings on stderr), 2 (findings on stderr).
int RunValidate(const ValidateArgs& args);

// Warnings for Command scripts (steps' and finally hooks') whose first
// word is a relative path (`./run.sh`, `bin/x`) that does not exist or is
// not executable, resolved against the workflow's base_dir (where scripts
// run). Each names the JSON path of the script.
std::vector<std::string> ScriptWarnings(const Workflow& wf);

// The step graph: one line per step, in breadth-first order from the
// entrypoint, then the steps it cannot reach.
std::string StepGraphText(const Workflow& wf);
// The same as a Graphviz digraph.
std::string StepGraphDot(const Workflow& wf);

}  // namespace wizq

#endif  // WIZQ_CLI_VALIDATE_H_
