#include "cli/view_commands.h"

#include <CLI/CLI.hpp>

#include "cli/store_flags.h"
#include "queue/task.h"

namespace wizq {

CLI::App* AddStatusCommand(CLI::App& app, StatusArgs* a,
                           const std::string& version) {
  CLI::App* cmd = app.add_subcommand(
      "status", "Show a run's summary, its workers and its task tree");
  cmd->set_version_flag("--version", version);
  AddRunPlaceOptions(cmd, &a->place);
  cmd->add_flag("--json", a->json, "JSON output");
  cmd->add_flag("--failed", a->failed, "Only failed tasks");
  cmd->add_flag("--all", a->all,
                "The whole task tree (without it, its first 50 lines)");
  cmd->add_option("--state", a->state, "Only tasks in this state")
      ->check(CLI::IsMember({TaskStateName(TaskState::kPending),
                             TaskStateName(TaskState::kInProgress),
                             TaskStateName(TaskState::kDone),
                             TaskStateName(TaskState::kFailed)}));
  cmd->add_option("--step", a->step, "Only tasks of this step");
  cmd->add_option("--archived", a->archived_name,
                  "List the archived runs (.wizard/archive/; with --store, "
                  "of the run id), or show the one named")
      ->expected(0, 1);
  cmd->callback([cmd, a] { a->archived = cmd->count("--archived") > 0; });
  return cmd;
}

CLI::App* AddReportCommand(CLI::App& app, ReportArgs* a,
                           const std::string& version) {
  CLI::App* cmd = app.add_subcommand(
      "report", "Write a run's report: one self-contained HTML page");
  cmd->set_version_flag("--version", version);
  AddRunPlaceOptions(cmd, &a->place);
  cmd->add_option("-o,--output", a->output,
                  "The HTML file to write (- for "
                  "stdout)")
      ->required();
  cmd->add_option("--archived", a->archived,
                  "Report this archived run (a name from wizq status "
                  "--archived)");
  return cmd;
}

}  // namespace wizq
