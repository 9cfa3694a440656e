// Barnum interop on the command line (SPEC §12, docs/INTEROP.md):
// `wizq run --resume-from STATE.ndjson` and `wizq export --format barnum`.
#ifndef WIZQ_CLI_INTEROP_H_
#define WIZQ_CLI_INTEROP_H_

#include <CLI/CLI.hpp>
#include <string>

#include "orchestrator/run.h"

namespace wizq {

// Adds --resume-from to `wizq run`.
void AddResumeFromOption(CLI::App* run_cmd, std::string* state_log);

// `wizq run --resume-from`: the other run options as parsed (WORKFLOW,
// --input and --input-file must be empty). `install_signals` is called
// before the run starts. Returns the exit code.
int DoResumeFrom(const std::string& state_log, RunOptions options,
                 const std::string& input_file, bool json, bool quiet,
                 void (*install_signals)());

struct ExportArgs {
  std::string dir = ".";
  std::string format;
  std::string output;  // empty: stdout
};

// Adds `wizq export`.
CLI::App* AddExportCommand(CLI::App& app, ExportArgs* args);
int DoExport(const ExportArgs& args);

}  // namespace wizq

#endif  // WIZQ_CLI_INTEROP_H_
