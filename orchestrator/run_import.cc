#include "orchestrator/run_import.h"

#include <limits.h>
#include <stdlib.h>

#include "fs/env.h"
#include "orchestrator/run_loop.h"
#include "queue/import.h"
#include "tasks/command_executor.h"
#include "tasks/workflow.h"

namespace wizq {

int RunImportedWorkflow(const RunOptions& options,
                        const std::string& workflow_json,
                        const std::string& base_dir, const RunImport& import,
                        RunObserver* observer, std::string* error) {
  std::unique_ptr<Workflow> workflow;
  Status s = Workflow::Parse(workflow_json, "the imported workflow", &workflow);
  if (s.ok()) s = ValidateImport(import);
  if (!s.ok() || options.run_id.empty()) {
    *error = s.ok() ? "an imported run needs a run id" : s.message();
    return kExitInvalid;
  }
  workflow->set_base_dir(base_dir);
  Env* env = options.env ? options.env : Env::Posix();
  s = env->CreateDirs(options.install_dir, 0777);
  char buf[PATH_MAX];
  if (!s.ok() || realpath(options.install_dir.c_str(), buf) == nullptr) {
    *error = "cannot create install directory " + options.install_dir;
    return kExitEnvironment;
  }
  RunLoop::Config config;
  config.run_id = options.run_id;
  config.install_dir = buf;
  config.input = "null";
  config.jobs = options.jobs;
  config.fresh = options.fresh;
  config.wizq_version = options.wizq_version;
  config.env = options.env;
  config.workflow_path = "the imported workflow";
  config.import = &import;
  CommandExecutor executor(options.env, WizardDir(config.install_dir));
  config.executor = &executor;
  RunLoop loop(config, std::move(workflow), observer);
  int code = kExitCompleted;
  s = loop.Run(&code);
  if (!s.ok()) {
    *error = s.message();
    return s.IsInvalidArgument() ? kExitInvalid : kExitEnvironment;
  }
  return code;
}

}  // namespace wizq
