// How `wizq run` reports an error that ends it with exit 2 or 3: the
// message on stderr (`wizq run: ...`), and with --json `error` events on
// stdout naming the file and field where they are known (docs/CLI.md).
#ifndef WIZQ_VIEWS_RUN_ERRORS_H_
#define WIZQ_VIEWS_RUN_ERRORS_H_

#include <string>
#include <vector>

#include "orchestrator/run.h"
#include "views/json_events.h"

namespace wizq {

// The file of the run's store that an error message names (the directory
// store's: the first path through a `.wizard/` directory, e.g. a corrupt
// log), or "": the `file` of an `error` event.
std::string FileNamedIn(const std::string& message);

// Prints `wizq run: <e.message>` on stderr. With `json`, also emits the
// error as events: one per finding of an invalid workflow (`file` e.file,
// `field` the finding's JSON path), else one, with e.file (or the file
// under `.wizard/` the message names) and e.field.
void ReportRunError(const JsonError& e, bool json,
                    const std::vector<Finding>& findings = {});

// ReportRunError for what RunWorkflowWith said, with its exit code.
void ReportRunError(int code, const RunError& error, bool json);

}  // namespace wizq

#endif  // WIZQ_VIEWS_RUN_ERRORS_H_
