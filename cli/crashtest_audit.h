// `wizq crashtest`, part: what a run's audit log (.wizard/audit.jsonl,
// docs/FORMAT.md) says about kill points and task executions.
//
// Kill points. Each commit of the undisturbed run's log is a durable step;
// crashtest kills a run at two places around it, each named by a crash
// point of util/crash_point.h, which `wizq` arms from WIZQ_CRASH_AT:
//   - "after commit i": the i-th commit is durable, nothing has acted on it
//     yet (log.after_sync:i). The claims it holds are not started yet; the
//     tasks started earlier are running.
//   - "before commit i", for each commit that carries task results (the
//     j-th such commit): those tasks' bodies have finished, their results
//     are not durable (run.before_result_commit:j). This is where a task
//     body has done all its side effects and will still run again after a
//     power cut.
//
// Executions. A task's body ran once per distinct attempt number of its
// `task_claimed` events: a claim put back because its attempt never started
// (`task_reset` with `refund`) gives the number back, so the next claim
// reuses it; a claim whose earlier attempt was adopted instead of run
// (`task_adopted` naming an older attempt) is not an execution either.
// Tasks are matched between runs by step and dedup key (their ids depend
// on the order of completions when tasks run in parallel).
#ifndef WIZQ_CLI_CRASHTEST_AUDIT_H_
#define WIZQ_CLI_CRASHTEST_AUDIT_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/status.h"

namespace wizq::crashtest {

// The events of one commit (one durable batch), in order.
using Commit = std::vector<nlohmann::json>;

// Reads `<install_dir>/.wizard/audit.jsonl`: its committed batches (free
// space and a torn tail are left out).
Status ReadCommits(const std::string& install_dir, std::vector<Commit>* out);

struct KillPoint {
  std::string crash_at;  // the WIZQ_CRASH_AT value
  std::string name;      // "after commit 7", "before commit 7"
  std::string what;      // what the step holds, e.g. "done Download#2"
};

// Every kill point of a run, in the order the run passes them.
std::vector<KillPoint> KillPointsOf(const std::vector<Commit>& commits);

// `n` of `all`, spread evenly and always the same ones (all if n <= 0 or
// n >= all.size()).
std::vector<KillPoint> Sample(const std::vector<KillPoint>& all, int n);

struct TaskRuns {
  std::string name;    // "Download#3"
  std::string step;    // "Download"
  int executions = 0;  // how many times its body started
};

// Per task ("<step> <dedup key>"), how many times its body ran.
std::map<std::string, TaskRuns> ExecutionsOf(const std::vector<Commit>& log);

// How the run ended: `run_finished`'s status ("" if it has none) and the
// tasks that failed for good, as "Download#3 (worker_lost)".
struct RunEnd {
  std::string status;
  std::vector<std::string> failed;
};
RunEnd EndOf(const std::vector<Commit>& log);

}  // namespace wizq::crashtest

#endif  // WIZQ_CLI_CRASHTEST_AUDIT_H_
