// The command lines of the views (views/): `wizq status` and `wizq
// report` parse into the views' arguments here; cli/ parses and wires,
// views/ reads the run and prints.
#ifndef WIZQ_CLI_VIEW_COMMANDS_H_
#define WIZQ_CLI_VIEW_COMMANDS_H_

#include <string>

#include "views/report.h"
#include "views/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace wizq {

// Adds the `status` subcommand to `app`, filling *args when it is parsed.
CLI::App* AddStatusCommand(CLI::App& app, StatusArgs* args,
                           const std::string& version);

// Adds the `report` subcommand to `app`, filling *args when it is parsed.
CLI::App* AddReportCommand(CLI::App& app, ReportArgs* args,
                           const std::string& version);

}  // namespace wizq

#endif  // WIZQ_CLI_VIEW_COMMANDS_H_
