// Pieces shared by the two progress printers of `wizq run`: the human
// lines on stderr (views/progress.cc) and the NDJSON events on stdout
// (views/progress_json.cc). NewProgressPrinter (views/progress.h) runs both.
#ifndef WIZQ_VIEWS_PROGRESS_INTERNAL_H_
#define WIZQ_VIEWS_PROGRESS_INTERNAL_H_

#include <memory>
#include <string>

#include "views/progress.h"

namespace wizq {

// "3 done, 1 running, 0 pending, 0 failed (1.2s)".
std::string ProgressCounts(const Progress& p);
// The tasks that ran in the run (done or failed): not reused, not
// finished before an import.
int64_t Ran(const Progress& p);

// The command that answers a waiting prompt and goes on: the command as it
// was run plus `--answer TASK=VALUE`.
std::string PromptRunCommand(const ProgressOptions& o, const WaitingPrompt& t);
// `wizq answer --dir DIR TASK=VALUE`: records the answer only.
std::string PromptAnswerCommand(const ProgressOptions& o,
                                const std::string& run_id,
                                const WaitingPrompt& t);
// "  (or 7=no)", "  (one of: a, b)" or "".
std::string PromptAnswerHint(const WaitingPrompt& t);

// The --json printer: one NDJSON event per call on stdout (docs/CLI.md).
std::unique_ptr<RunObserver> NewJsonProgressPrinter(const ProgressOptions& o);
// The human printer: lines (or one live line) on stderr.
std::unique_ptr<RunObserver> NewHumanProgressPrinter(const ProgressOptions& o);

}  // namespace wizq

#endif  // WIZQ_VIEWS_PROGRESS_INTERNAL_H_
