// `wizq status`: a truthful, read-only view of a run — a summary line with
// the counts first, whether any worker is alive (an unfinished run that no
// live worker runs is `interrupted`, with the command that resumes it), the
// waiting prompts and leased tasks, and the task tree (or the tasks a
// filter selects); `--json` is agent/run_status.h's object with the
// workers and the file sizes added. `--archived` lists the runs set aside
// (Store::ListRuns), `--archived NAME` shows one of them.
//
// It writes nothing: it works on a read-only copy of a run.
#ifndef WIZQ_CLI_STATUS_H_
#define WIZQ_CLI_STATUS_H_

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace wizq {

struct StatusArgs {
  std::string dir = ".";
  bool json = false;
  bool failed = false;        // only failed tasks
  std::string state;          // only tasks in this state ("" = any)
  std::string step;           // only tasks of this step ("" = any)
  bool archived = false;      // --archived given
  std::string archived_name;  // its value: one archived run ("" = list)
};

// Adds the `status` subcommand to `app`, filling *args when it is parsed.
CLI::App* AddStatusCommand(CLI::App& app, StatusArgs* args,
                           const std::string& version);

// Prints the status; returns the exit code (0; 2 no run or a bad filter;
// 3 an unreadable run).
int DoStatus(const StatusArgs& args);

}  // namespace wizq

#endif  // WIZQ_CLI_STATUS_H_
