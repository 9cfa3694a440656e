// Signals and --halt of `wizq run` (docs/CLI.md, "Signals", "--halt").
#ifndef WIZQ_CLI_RUN_SIGNALS_H_
#define WIZQ_CLI_RUN_SIGNALS_H_

#include <string>

namespace CLI {
class App;
}

namespace wizq {

struct HaltPolicy;

// SIGINT (Ctrl+C), SIGTERM and SIGHUP (a closed terminal, a dropped SSH
// session) stop the run: its tasks are ended and put back pending, their
// attempts not counted (orchestrator/run.h: RequestStop). A second one while
// the first is handled kills the tasks' process groups at once. SIGTSTP
// (Ctrl+Z) stops the tasks' process groups with wizq, and continues them
// when wizq is continued; timeouts do not count the stopped time
// (util/job_control.h). SIGPIPE is ignored.
void InstallRunSignalHandlers();

// Parses "soon,fail=N", "now,fail=N" (N >= 1) or "never" into *halt;
// returns "" or what is wrong.
std::string ParseHalt(const std::string& text, HaltPolicy* halt);

// Adds --halt to `run_cmd`, writing into *halt (which must outlive the
// parse).
void AddHaltOption(CLI::App* run_cmd, HaltPolicy* halt);

}  // namespace wizq

#endif  // WIZQ_CLI_RUN_SIGNALS_H_
