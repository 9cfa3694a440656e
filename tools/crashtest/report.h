// `wizq crashtest`, part: the results and how they are printed (a table
// and a verdict, or one JSON object with --json).
#ifndef WIZQ_TOOLS_CRASHTEST_REPORT_H_
#define WIZQ_TOOLS_CRASHTEST_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tools/crashtest/audit.h"
#include "tools/crashtest/tree.h"

namespace wizq::crashtest {

// What happened at one kill point.
struct CaseResult {
  KillPoint point;
  bool crashed = false;  // wizq died there (false: the run never got there)
  int resumes = 0;       // `wizq run` again, until the run ended
  std::string status;    // the run's end: "completed", "failed"
  int exit_code = -1;    // of the last `wizq run`
  std::vector<TaskRuns> reexecuted;  // ran more often than undisturbed
  std::vector<std::string> adopted;  // tasks whose attempt was adopted
  // The paths that differ from the undisturbed run (but the
  // nondeterministic ones), and the text files whose lines are only in
  // another order (not a difference: tasks ran in another order).
  std::vector<PathDiff> differences;
  std::vector<std::string> reordered;
  std::vector<std::string> failed;  // tasks failed for good
  std::string error;     // the run could not be finished (timeout, exit 3...)
  bool matches = false;  // same files and same run status as undisturbed
};

// A path whose end state differs between two undisturbed runs: `diff`
// against the first, in undisturbed run number `run`.
struct Nondeterministic {
  PathDiff diff;
  int run = 0;
};

struct Report {
  std::string workflow;
  std::string mode;  // "power_cut" or "orchestrator_only"
  size_t kill_points_total = 0;
  std::string undisturbed_status;
  int64_t undisturbed_ms = 0;  // the longest of the undisturbed runs
  int baseline_runs = 1;       // how many undisturbed runs
  // Not compared at the kill points; no step is blamed for them.
  std::vector<Nondeterministic> nondeterministic;
  size_t tasks = 0;  // tasks of the undisturbed run
  size_t files = 0;  // paths of its end state
  std::vector<CaseResult> cases;
  std::string scratch;  // kept scratch directory ("" when cleaned)
};

// Steps re-run at a kill point whose end state differs: the task bodies
// that are not safe to re-run.
std::vector<std::string> UnsafeSteps(const Report& r);

void PrintTable(const Report& r);  // stdout: table, then the verdict
void PrintJson(const Report& r);   // stdout: one JSON object

}  // namespace wizq::crashtest

#endif  // WIZQ_TOOLS_CRASHTEST_REPORT_H_
