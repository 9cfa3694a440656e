#include "cli/reuse_flags.h"

#include <CLI/CLI.hpp>

#include "orchestrator/run.h"

namespace wizq {

void AddReuseFlags(CLI::App* run_cmd, RunOptions* options) {
  run_cmd->add_option(
      "--from", options->from,
      "Run this step's tasks (a step name) or this task of the previous run "
      "(an id) live, and everything spawned beneath them (repeatable)");
  run_cmd->add_flag("--no-reuse", options->no_reuse,
                    "Run every task live: reuse nothing of the previous run");
  auto* retry = run_cmd->add_flag(
      "--retry-failed", options->retry_failed,
      "Put the run's failed tasks back to pending with a fresh attempt "
      "budget and continue the same run");
  retry->excludes("--fresh");
}

}  // namespace wizq
