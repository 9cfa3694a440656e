#include "cli/reuse_flags.h"

#include <CLI/CLI.hpp>

#include "orchestrator/run.h"
#include "queue/pg/pg_location.h"

namespace wizq {

void AddReuseFlags(CLI::App* run_cmd, RunOptions* options) {
  run_cmd
      ->add_option("--from", options->from,
                   "Start a fresh run (as --fresh) in which this step's tasks "
                   "(a step name) or this task of the previous run (an id), "
                   "and everything spawned beneath them, run live "
                   "(repeatable)")
      ->allow_extra_args(false);
  run_cmd->add_flag("--no-reuse", options->no_reuse,
                    "Run every task live: reuse nothing of the previous run");
  auto* retry = run_cmd->add_flag(
      "--retry-failed", options->retry_failed,
      "Put the run's failed tasks back to pending with a fresh attempt "
      "budget and continue the same run");
  retry->excludes("--fresh");
  retry->excludes("--from");
}

std::vector<std::string> ContinuingCommand(int argc, char** argv) {
  static const char* const kWithValue[] = {"--answer", "--from"};
  static const char* const kFlags[] = {"--fresh", "--no-reuse",
                                       "--retry-failed"};
  // `--name` alone, or `--name=...`.
  auto is = [](const std::string& arg, const std::string& name) {
    return arg == name || arg.rfind(name + "=", 0) == 0;
  };
  std::vector<std::string> out;
  for (int i = 0; i < argc; i++) {
    const std::string a = argv[i];
    bool drop = false;
    for (const char* f : kWithValue) {
      if (a == f) i++;  // and its value
      drop = drop || is(a, f);
    }
    for (const char* f : kFlags) drop = drop || is(a, f);
    if (drop) continue;
    // A store location keeps its place, never its password (SPEC §14):
    // the command, run, finds it where it belongs.
    if (a == "--store" && i + 1 < argc) {
      out.push_back(a);
      out.push_back(PgLocationWithoutPassword(argv[++i]));
    } else if (a.rfind("--store=", 0) == 0) {
      out.push_back("--store=" + PgLocationWithoutPassword(a.substr(8)));
    } else {
      out.push_back(a);
    }
  }
  return out;
}

}  // namespace wizq
