// `wizq prune [--dir DIR] [--dry-run] [--json]`: removes the attempt files
// (`.wizard/tasks/<id>/`) of the tasks that finished successfully, keeping
// those of failed tasks (their stderr is what a person reads next) and of
// unfinished ones (a later attempt or an adoption needs them). The audit
// log and the state are not touched: status, log and report still work.
#ifndef WIZQ_CLI_PRUNE_H_
#define WIZQ_CLI_PRUNE_H_

#include <string>

#include "queue/run_place.h"

namespace CLI {
class App;
}  // namespace CLI

namespace wizq {

struct PruneArgs {
  RunPlace place;  // --dir, --store, --schema, --run-id
  bool dry_run = false;
  bool json = false;
};

CLI::App* AddPruneCommand(CLI::App& app, PruneArgs* args,
                          const std::string& version);

// Returns the exit code (0; 2 no run; 3 I/O, e.g. a read-only directory).
int DoPrune(const PruneArgs& args);

}  // namespace wizq

#endif  // WIZQ_CLI_PRUNE_H_
