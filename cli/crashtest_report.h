// `wizq crashtest`, part: the results and how they are printed (a table
// and a verdict, or one JSON object with --json).
#ifndef WIZQ_CLI_CRASHTEST_REPORT_H_
#define WIZQ_CLI_CRASHTEST_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cli/crashtest_audit.h"

namespace wizq::crashtest {

// What happened at one kill point.
struct CaseResult {
  KillPoint point;
  bool crashed = false;  // wizq died there (false: the run never got there)
  int resumes = 0;       // `wizq run` again, until the run ended
  std::string status;    // the run's end: "completed", "failed"
  int exit_code = -1;    // of the last `wizq run`
  std::vector<TaskRuns> reexecuted;      // ran more often than undisturbed
  std::vector<std::string> differences;  // CompareTrees' lines
  std::vector<std::string> failed;       // tasks failed for good
  std::string error;     // the run could not be finished (timeout, exit 3...)
  bool matches = false;  // same files and same run status as undisturbed
};

struct Report {
  std::string workflow;
  std::string mode;  // "power_cut" or "orchestrator_only"
  size_t kill_points_total = 0;
  std::string undisturbed_status;
  int64_t undisturbed_ms = 0;
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

#endif  // WIZQ_CLI_CRASHTEST_REPORT_H_
