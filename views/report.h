// `wizq report [--dir DIR] -o FILE.html`: one self-contained HTML page
// (inline CSS, JS and SVG; nothing fetched from the network) that shows a
// run at a glance: its summary, the task tree with states, a timeline of
// every attempt per worker with crashes, resumes, retries and waits marked,
// and the attempts as a table. Read-only, like `wizq status`.
#ifndef WIZQ_CLI_REPORT_H_
#define WIZQ_CLI_REPORT_H_

#include <string>

#include "queue/run_place.h"

namespace wizq {

struct ReportArgs {
  RunPlace place;        // --dir, --store, --schema, --run-id
  std::string output;    // -o FILE.html ("-": stdout)
  std::string archived;  // an archived run's name instead of the live run
};

// Writes the page; returns the exit code (0; 2 no run; 3 I/O).
int DoReport(const ReportArgs& args);

}  // namespace wizq

#endif  // WIZQ_CLI_REPORT_H_
