// The flags of `wizq run` for incremental re-runs and re-running what
// failed (SPEC §11; docs/CLI.md): --from, --no-reuse, --retry-failed; and
// the command that goes on with a run such flags started.
#ifndef WIZQ_CLI_REUSE_FLAGS_H_
#define WIZQ_CLI_REUSE_FLAGS_H_

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace wizq {

struct RunOptions;

// Adds the flags to `run_cmd`, writing into *options (which must outlive
// the parse).
void AddReuseFlags(CLI::App* run_cmd, RunOptions* options);

// The `wizq run` command line `argv` as the command that goes on with the
// run it started (the pause lines say it, SPEC §10): without its --answer
// arguments, nor the flags that start a new run or change which tasks run
// (--fresh, --from, --no-reuse, --retry-failed: the run keeps what it
// recorded of them). Everything else stays (the workflow, --dir, the input,
// --run-id, --jobs, --agent, --resume-from, ...), a --store location
// without its password.
std::vector<std::string> ContinuingCommand(int argc, char** argv);

}  // namespace wizq

#endif  // WIZQ_CLI_REUSE_FLAGS_H_
