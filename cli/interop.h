// Barnum interop on the command line (SPEC §12, docs/INTEROP.md):
// `wizq run --resume-from STATE.ndjson` and `wizq export --format barnum`.
#ifndef WIZQ_CLI_INTEROP_H_
#define WIZQ_CLI_INTEROP_H_

#include <CLI/CLI.hpp>
#include <string>

#include "interop/barnum_import.h"
#include "orchestrator/run.h"
#include "queue/run_place.h"

namespace wizq {

// Adds --resume-from to `wizq run`.
void AddResumeFromOption(CLI::App* run_cmd, std::string* state_log);

// `wizq run --resume-from STATE_LOG`: a Barnum run continued is started
// as any run, through RunWorkflowWith with *extras (docs/INTEROP.md). This
// checks the options that cannot go with it (WORKFLOW, --input,
// --input-file: the workflow and the tasks come from the log), reads the
// log into *import (which *extras then points to), says on stderr what it
// holds (not with `quiet`), derives options->run_id from the log's bytes
// unless one was given, and names the workflow in messages. Every other
// option is left as parsed. Returns 0, or 2 after reporting the error (and
// nothing is written).
int PrepareResumeFrom(const std::string& state_log,
                      const std::string& input_file, bool json, bool quiet,
                      RunOptions* options, BarnumImport* import,
                      RunExtras* extras);

struct ExportArgs {
  RunPlace place;  // --dir, --store, --schema, --run-id
  std::string format;
  std::string output;  // empty: stdout
};

// Adds `wizq export`.
CLI::App* AddExportCommand(CLI::App& app, ExportArgs* args);
int DoExport(const ExportArgs& args);

}  // namespace wizq

#endif  // WIZQ_CLI_INTEROP_H_
