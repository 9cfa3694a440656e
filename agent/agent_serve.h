// `wizq agent serve`: a ready-made agent loop (SPEC §9). It takes Pool
// tasks through an AgentService, runs COMMAND (no shell) with the payload
// on stdin for each, renews the lease while it runs (every third of the
// lease), and hands its stdout to `done` (exit 0) or calls `fail`
// (non-zero exit, signal, timeout), until the run has finished.
//
// Each COMMAND runs through a CommandRunner with the task's files in the
// run's local workspace (tasks/exec/attempt_files.h): its process
// tree holds the lock on its stdout and its leader is recorded in the
// run's journal, exactly as a Command task's, so when this process dies the
// next taker of the task ends the orphaned tree before it hands the task out
// again (AgentService::Take): two attempts of one task never overlap.
#ifndef WIZQ_AGENT_AGENT_SERVE_H_
#define WIZQ_AGENT_AGENT_SERVE_H_

#include <functional>
#include <string>
#include <vector>

#include "queue/run_place.h"

namespace wizq {

class Env;

struct ServeOptions {
  RunPlace place;  // the run: --dir, --store, --schema, --run-id
  std::vector<std::string> steps;    // empty: any Pool step
  int jobs = 1;                      // tasks worked on at once
  std::string agent;                 // the name recorded with each claim
  std::vector<std::string> command;  // argv, run without a shell
  Env* env = nullptr;                // nullptr: Env::Posix()
  // Where progress lines go (one line each, no newline); null: nowhere.
  std::function<void(const std::string&)> note;
};

// A serve started before its run waits for the run to appear.
// Serves until the run finishes: 0 if it completed, 1 if it failed; 3 on
// an environment error (no run, I/O), with *error saying why; 130 when
// stopped (StopRequested(), orchestrator/run.h): its commands are ended
// and their leases left to lapse (their attempts count).
int ServeAgent(const ServeOptions& options, std::string* error);

}  // namespace wizq

#endif  // WIZQ_AGENT_AGENT_SERVE_H_
