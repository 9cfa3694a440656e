// The page of `wizq report` (views/report.h), generated from a run's state
// and its history. No I/O but the failed tasks' stderr tails
// (LastStderrLines, under ReportInput::source). The page's DOM is a
// contract the tests read:
//   - the failures, first: <section id="failures"> with an
//                    <li data-task-id=ID> per failed task
//   - every task:    <li class="task" id="task-ID" data-task-id=ID
//                    data-state=STATE>
//   - a lane:        <g class="lane" data-worker=KEY>: a worker's id,
//                    "lease:NAME" for an agent, "reused", "import"
//   - every attempt: <rect class="attempt OUTCOME" data-task-id data-attempt
//                    data-worker data-start-ms data-end-ms>
//   - a crash:       <g class="marker crash" data-worker=ID data-seq=SEQ>
//                    at the lost worker's last event, SEQ the event that
//                    recorded the loss (queue/history.h)
//   - a resume:      <g class="marker resume" data-seq=SEQ>
//   - a retry:       <g class="marker retry" data-task-id data-attempt>
//   - a wait:        <g class="marker wait" data-task-id> (an adopted
//                    attempt waited for) and <g class="marker pause"
//                    data-seq> (the run waited for a person)
#ifndef WIZQ_VIEWS_REPORT_HTML_H_
#define WIZQ_VIEWS_REPORT_HTML_H_

#include <cstdint>
#include <string>

namespace wizq {

struct RunHistory;
struct RunView;

struct ReportInput {
  const RunView* view = nullptr;  // views/status_view.h
  const RunHistory* history = nullptr;
  std::string live_status;  // running, interrupted, completed, ...
  int64_t generated_ms = 0;
  // The directory of the run's task files (views/status_view.h TaskFilesDir),
  // shown as where the report comes from.
  std::string source;
  // Bytes of an unfinished write at the end of the log, left out
  // (OpenReport::torn_tail_bytes).
  uint64_t torn_bytes = 0;
};

std::string RenderReportHtml(const ReportInput& in);

}  // namespace wizq

#endif  // WIZQ_VIEWS_REPORT_HTML_H_
