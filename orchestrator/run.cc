#include "orchestrator/run.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>

#include "fs/env.h"
#include "fs/path.h"
#include "orchestrator/run_loop.h"
#include "queue/import.h"
#include "tasks/exec/agent_executor.h"
#include "tasks/exec/attempt_files.h"
#include "tasks/exec/command_executor.h"
#include "tasks/exec/executor_set.h"
#include "tasks/exec/function_executor.h"
#include "tasks/exec/prompt_executor.h"
#include "tasks/workflow/response.h"
#include "tasks/workflow/workflow.h"
#include "util/canonical_json.h"
#include "util/closest_match.h"
#include "util/hash.h"

namespace wizq {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_stop_sender{0};

int ExitCodeFor(const Status& s) {
  if (s.IsInvalidArgument()) return kExitInvalid;
  return kExitEnvironment;
}

// Creates the install directory if needed and returns its canonical path.
Status CanonicalInstallDir(Env* env, const std::string& dir, std::string* out) {
  Status s = env->CreateDirs(dir, 0777);  // as mkdir -p: the umask applies
  if (!s.ok()) return s.Annotate("cannot create install directory " + dir);
  return RealPath(dir, out);
}

}  // namespace

void RequestStop(int sender) {
  g_stop_sender = sender;
  g_stop = true;
}
void ClearStopRequest() {
  g_stop = false;
  g_stop_sender = 0;
}
bool StopRequested() { return g_stop.load(); }
int StopSender() { return g_stop_sender.load(); }

static std::atomic<int> g_stop_signal{0};
void NoteStopSignal(int signo) { g_stop_signal = signo; }
std::string StopSignalName() {
  switch (g_stop_signal.load()) {
    case 0:
      return "";
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
  }
  return "signal " + std::to_string(g_stop_signal.load());
}

std::string DeriveRunId(const std::string& frozen_workflow,
                        const std::string& input_json) {
  return "r" + Hash128Hex(frozen_workflow + "\n" + input_json).substr(0, 16);
}

// --from STEP|ID: a step of the workflow (a misspelt one gets the closest
// step), or a task id (of the previous run: checked when it is read).
static Status CheckFromFlags(const Workflow& wf,
                             const std::vector<std::string>& from) {
  for (const std::string& f : from) {
    const bool id = !f.empty() && f.size() <= 18 &&
                    f.find_first_not_of("0123456789") == std::string::npos;
    if (id || wf.FindStep(f) != nullptr) continue;
    std::vector<std::string> steps;
    for (const Step& s : wf.steps()) steps.push_back(s.name);
    const std::string best = ClosestMatch(f, steps);
    return Status::InvalidArgument(
        "--from " + f + ": not a step of the workflow, nor a task id (a " +
        "number)" + (best.empty() ? "" : "; did you mean " + best + "?"));
  }
  return Status::OK();
}

// An import has no entry input (its tasks come from the import), and needs
// a run id (for the same command to resume it rather than import again).
static Status CheckImport(const RunOptions& options, const RunImport& import,
                          RunError* error) {
  if (!options.input_json.empty()) {
    error->field = "--input";
    return Status::InvalidArgument(
        "--input: an imported run takes its tasks from the import");
  }
  if (options.run_id.empty()) {
    error->field = "--run-id";
    return Status::InvalidArgument("an imported run needs a run id");
  }
  return ValidateImport(import);
}

// The entry input, canonical and valid for the entrypoint.
static Status PrepareInput(const RunOptions& options, const Workflow& workflow,
                           std::string* input) {
  const std::string raw =
      options.input_json.empty() ? "{}" : options.input_json;
  // Validated in canonical form (1.0 is the integer 1, as JSON Schema
  // says); when it does not even parse, the workflow's parser says where.
  Status c = CanonicalizeJson(raw, input);
  Status v = ValidateEntryInput(workflow, c.ok() ? *input : raw);
  if (!v.ok()) return v.Annotate("--input");
  if (!c.ok()) return c.Annotate("--input");
  return Status::OK();
}

// Loads what a run needs before touching the install directory: the
// workflow and the entry input (or the import). Anything wrong here is
// exit 2; *error gets the file or option it is about.
static Status PrepareRun(const RunOptions& options, const RunExtras& extras,
                         std::unique_ptr<Workflow>* workflow,
                         std::string* input, RunError* error) {
  Status s;
  if (extras.workflow_text.empty()) {
    s = Workflow::Load(options.workflow_path, workflow, &error->findings,
                       options.env);
    if (!s.ok()) error->file = options.workflow_path;
  } else {
    s = Workflow::Parse(extras.workflow_text, options.workflow_path, workflow,
                        &error->findings);
    if (s.ok()) (*workflow)->set_base_dir(extras.base_dir);
  }
  if (s.ok()) s = CheckFunctionHandlers(**workflow, extras.handlers);
  if (!s.ok()) return s;
  if (extras.import != nullptr) {
    *input = "null";
    WIZQ_RETURN_IF_ERROR(CheckImport(options, *extras.import, error));
  } else {
    s = PrepareInput(options, **workflow, input);
    if (!s.ok()) {
      error->field = "--input";
      return s;
    }
  }
  s = CheckFromFlags(**workflow, options.from);
  if (!s.ok()) error->field = "--from";
  return s;
}

// The loop's configuration (before the executor and the --answer flags).
static Status MakeConfig(const RunOptions& options, const RunExtras& extras,
                         const Workflow& workflow, const std::string& input,
                         RunLoop::Config* config) {
  config->run_id = options.run_id.empty()
                       ? DeriveRunId(workflow.frozen_json(), input)
                       : options.run_id;
  WIZQ_RETURN_IF_ERROR(
      CanonicalInstallDir(options.env ? options.env : Env::Posix(),
                          options.install_dir, &config->install_dir));
  config->location = options.store;
  config->schema = options.schema;
  config->workspace =
      LocalWorkspace(config->install_dir, config->location, config->run_id);
  config->input = input;
  config->jobs = options.jobs;
  config->worker_lease_ms = options.worker_lease_ms;
  // --from picks what a new run reuses: it starts one.
  config->fresh = options.fresh || !options.from.empty();
  config->wizq_version = options.wizq_version;
  config->env = options.env;
  config->workflow_path = options.workflow_path;
  config->no_reuse = options.no_reuse;
  config->from = options.from;
  config->retry_failed = options.retry_failed;
  config->halt = options.halt;
  config->import = extras.import;
  return Status::OK();
}

// Fills *error from `s` and returns its exit code.
static int Failed(const Status& s, RunError* error) {
  error->message = s.message();
  return ExitCodeFor(s);
}

int RunWorkflow(const RunOptions& options, RunObserver* observer,
                RunError* error) {
  return RunWorkflowWith(options, RunExtras(), observer, error);
}

int RunWorkflowWith(const RunOptions& options, const RunExtras& extras,
                    RunObserver* observer, RunError* error) {
  *error = RunError();
  std::unique_ptr<Workflow> workflow;
  std::string input;
  Status s = PrepareRun(options, extras, &workflow, &input, error);
  if (!s.ok()) {
    error->message = s.message();
    return kExitInvalid;  // an unreadable workflow too: nothing ran
  }
  RunLoop::Config config;
  s = MakeConfig(options, extras, *workflow, input, &config);
  if (!s.ok()) return Failed(s, error);
  if (!options.answers.empty()) {
    s = CheckFlagAnswers(config, *workflow, options.answers, &config.answers);
    if (s.IsInvalidArgument()) error->field = "--answer";
    if (!s.ok()) return Failed(s, error);
  }
  // One executor per action kind (tasks/exec/executor_set.h); an embedding
  // program's first.
  std::vector<std::unique_ptr<Executor>> extra;
  if (extras.make_executors) extra = extras.make_executors(config.workspace);
  ExecutorSet executor;
  for (const auto& e : extra) executor.Add(e.get());
  CommandExecutor commands(options.env, config.workspace);
  PromptExecutor prompts(options.interactive);
  executor.Add(&commands);
  executor.Add(&prompts);
  std::unique_ptr<AgentExecutor> agents;
  if (!options.agent_command.empty()) {
    agents = std::make_unique<AgentExecutor>(options.env, config.workspace,
                                             options.agent_command);
    executor.Add(agents.get());
  }
  config.executor = &executor;
  RunLoop loop(config, std::move(workflow), observer);
  int code = kExitCompleted;
  s = loop.Run(&code);
  return s.ok() ? code : Failed(s, error);
}

}  // namespace wizq
