// Progress output of `wizq run` (SPEC §7): a live line on a terminal, one
// plain line per event otherwise, NDJSON events on stdout with --json, and
// nothing but errors with --quiet.
#ifndef WIZQ_CLI_PROGRESS_H_
#define WIZQ_CLI_PROGRESS_H_

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "orchestrator/observer.h"
#include "queue/run_place.h"

namespace wizq {

struct ProgressOptions {
  bool quiet = false;
  bool json = false;      // NDJSON events on stdout
  bool terminal = false;  // stderr is a terminal: one live line
  // For the lines that say how to answer a paused run (SPEC §10): the
  // command as it was run, without its --answer arguments, and the
  // install directory as given.
  std::vector<std::string> command;
  std::string install_dir = ".";
  // The run's store (--store, --schema; its dir is install_dir's).
  RunPlace place;
};

std::unique_ptr<RunObserver> NewProgressPrinter(const ProgressOptions& o);

}  // namespace wizq

#endif  // WIZQ_CLI_PROGRESS_H_
