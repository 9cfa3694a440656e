// How `wizq run` reports an error that ends it with exit 2 or 3: the
// message on stderr (`wizq run: ...`), and with --json `error` events on
// stdout naming the file and field where they are known (docs/CLI.md).
#ifndef WIZQ_CLI_RUN_ERRORS_H_
#define WIZQ_CLI_RUN_ERRORS_H_

#include <string>

#include "cli/json_events.h"

namespace wizq {

// Prints `wizq run: <e.message>` on stderr. With `json`, also emits the
// error as events: for an invalid workflow (exit 2), one `error` per
// finding, with `file` the workflow and `field` the finding's JSON path;
// otherwise one, with `e.file`/`e.field` or, for a message about an option
// (`--input: ...`), that option as `field`.
void ReportRunError(const JsonError& e, const std::string& workflow_path,
                    bool json);

}  // namespace wizq

#endif  // WIZQ_CLI_RUN_ERRORS_H_
