// Who may work on a run that workers on several machines share (SPEC §14):
// a worker whose workflow, input or step files differ from those the run
// was started with is refused (exit 3), naming the difference, before it
// writes anything (StoreOptions::admit). On one machine the directory store
// keeps resuming with the frozen workflow instead (SPEC §2).
//
// The step files are what the def_hash of each step covers
// (tasks/workflow/def_hash.h): scripts the steps name and their
// reuse_files. A run records them, path -> XXH3-128, when it starts.
#ifndef WIZQ_ORCHESTRATOR_RUN_ADMIT_H_
#define WIZQ_ORCHESTRATOR_RUN_ADMIT_H_

#include <string>

#include "queue/run_info.h"
#include "util/status.h"

namespace wizq {

class Env;
class Workflow;

// RunInfo::def_files of `wf` as its files are now: a JSON object, keys
// sorted.
std::string DefFilesJson(const Workflow& wf, Env* env);

// What this worker brings to a run: its workflow (frozen JSON, and the
// file it came from, for messages), its entry input and DefFilesJson.
struct WorkerDefinition {
  std::string workflow_json;
  std::string workflow_path;
  std::string base_dir;  // the workflow's directory
  std::string input;
  std::string def_files;
};

// OK when `w` may work on `run`; else NotSupported (exit 3) naming the
// first difference: a step of the workflow, the input, or a step file.
Status AdmitWorker(const RunInfo& run, const WorkerDefinition& w);

}  // namespace wizq

#endif  // WIZQ_ORCHESTRATOR_RUN_ADMIT_H_
