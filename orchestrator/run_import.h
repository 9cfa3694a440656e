// Running a run that starts as an import (queue/import.h): `wizq run
// --resume-from` continues a Barnum run this way (interop/).
#ifndef WIZQ_ORCHESTRATOR_RUN_IMPORT_H_
#define WIZQ_ORCHESTRATOR_RUN_IMPORT_H_

#include <string>

#include "orchestrator/observer.h"
#include "orchestrator/run.h"

namespace wizq {

struct RunImport;

// As RunWorkflow, but the workflow is `workflow_json` (already validated;
// its Command scripts run in `base_dir`) and a fresh run starts as
// `import` instead of a root task. `options.run_id` must be set: the same
// id on the same directory resumes the imported run rather than importing
// again. options.workflow_path and input_json are not used.
int RunImportedWorkflow(const RunOptions& options,
                        const std::string& workflow_json,
                        const std::string& base_dir, const RunImport& import,
                        RunObserver* observer, std::string* error);

}  // namespace wizq

#endif  // WIZQ_ORCHESTRATOR_RUN_IMPORT_H_
