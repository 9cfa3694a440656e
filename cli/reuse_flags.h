// The flags of `wizq run` for incremental re-runs and re-running what
// failed (SPEC §11; docs/CLI.md): --from, --no-reuse, --retry-failed.
#ifndef WIZQ_CLI_REUSE_FLAGS_H_
#define WIZQ_CLI_REUSE_FLAGS_H_

namespace CLI {
class App;
}

namespace wizq {

struct RunOptions;

// Adds the flags to `run_cmd`, writing into *options (which must outlive
// the parse).
void AddReuseFlags(CLI::App* run_cmd, RunOptions* options);

}  // namespace wizq

#endif  // WIZQ_CLI_REUSE_FLAGS_H_
