// `wizq runs [--dir DIR] [--store URL] [--schema S] [--archived] [--json]`
// (SPEC §14): the runs in a store, each with its status, counts and live
// workers; with --archived the archived ones too. On the directory store,
// the run in --dir and (with --archived) its archive.
#ifndef WIZQ_CLI_RUNS_H_
#define WIZQ_CLI_RUNS_H_

#include <string>

#include "queue/run_place.h"

namespace CLI {
class App;
}  // namespace CLI

namespace wizq {

struct RunsArgs {
  RunPlace place;  // --dir, --store, --schema (its run_id unused)
  bool archived = false;
  bool json = false;
};

CLI::App* AddRunsCommand(CLI::App& app, RunsArgs* args,
                         const std::string& version);

// 0; 2 when the location holds no run; 3 when it cannot be read.
int DoRuns(const RunsArgs& args);

}  // namespace wizq

#endif  // WIZQ_CLI_RUNS_H_
