// The run loop: executes a workflow's tasks on an install directory with
// the guarantees of SPEC §6.
//
// RunWorkflow() loads and validates the workflow and the entry input, opens
// (or resumes, or joins) the run in its store (Store::Open: the directory
// store of `<install_dir>`), then loops:
// claim up to --jobs tasks (durably), start them, collect their results,
// validate each response, and commit every result together with the tasks
// it spawns and the next claims in one durable step (group commit). Finally
// hooks are submitted once a task's subtree has settled. The loop ends when
// the run has finished (possibly finished by another process sharing the
// directory).
#ifndef WIZQ_ORCHESTRATOR_RUN_H_
#define WIZQ_ORCHESTRATOR_RUN_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "orchestrator/observer.h"
#include "tasks/workflow/workflow.h"
#include "util/exit_code.h"

namespace wizq {

class Env;
class Executor;
struct RunImport;

// --halt soon|now,fail=N (docs/CLI.md): after N tasks of this process
// failed for good, start no new task (soon: the running ones finish; now:
// they are stopped and put back as on Ctrl+C). The rest stays pending and
// the run resumes later; the exit code is 1.
struct HaltPolicy {
  enum class When { kNever, kSoon, kNow };
  When when = When::kNever;
  int failures = 1;
};

struct RunOptions {
  std::string workflow_path;
  // The directory store's run directory, or with `store` the machine's
  // local working directory (RunPlace); created if missing.
  std::string install_dir = ".";
  // "" : the directory store; else the PostgreSQL store at this location
  // (--store, WIZQ_STORE) in `schema` ("": wizq).
  std::string store;
  std::string schema;
  // With `store`: how long this worker's claims hold on the store's clock
  // without a renewal (0: 30 s; StoreOptions::worker_lease_ms).
  int64_t worker_lease_ms = 0;
  std::string input_json;  // empty: {}
  std::string run_id;      // empty: derived from workflow + input
  int jobs = 0;            // 0: the workflow's max_concurrency
  bool fresh = false;
  std::string wizq_version;
  Env* env = nullptr;  // nullptr: Env::Posix()
  // Incremental re-runs (orchestrator/reuse.h, SPEC §11). What a fresh run
  // may reuse is recorded with it, so a resumed run keeps it.
  bool no_reuse = false;  // --no-reuse: everything runs live
  // --from STEP|ID: forced live, and below. It chooses what a new run
  // reuses, so it starts one, as `fresh` does (docs/CLI.md).
  std::vector<std::string> from;
  bool retry_failed = false;  // --retry-failed
  // The human gate (SPEC §10). `interactive`: stdin and stderr are a
  // terminal (and no --json), so Prompt steps are asked there. `answers`:
  // the --answer TASK=VALUE arguments, checked before anything is written
  // (a bad one is exit 2).
  bool interactive = false;
  std::vector<std::string> answers;
  // `--agent COMMAND`: Pool tasks are run in this process by this shell
  // command, the payload on stdin (tasks/exec/agent_executor.h). Empty: they
  // wait for agents (`wizq agent`).
  std::string agent_command;
  HaltPolicy halt;  // --halt
};

// Why a run could not run (exit 2 or 3): one message naming the file,
// field or task, and where known the file and the field (an option such as
// `--input`, or a JSON path) apart, and an invalid workflow's findings.
struct RunError {
  std::string message;
  std::string file;
  std::string field;
  std::vector<Finding> findings;
};

// Runs (or resumes, or joins) the run and returns its exit code; on exit 2
// or 3 before or instead of running, *error says why (else it is empty).
int RunWorkflow(const RunOptions& options, RunObserver* observer,
                RunError* error);

// What a run adds to RunOptions when it does not start from a workflow file
// and an entry input: a program that embeds wizq (include/wizq/wizard.h),
// or a run continued from another tool's state (`wizq run --resume-from`).
struct RunExtras {
  // Non-empty: the workflow as JSON text, parsed instead of loading
  // RunOptions::workflow_path (which then only names it in messages);
  // Command scripts run in `base_dir`.
  std::string workflow_text;
  std::string base_dir;
  // Non-null: a fresh run starts as this import (queue/import.h: the tasks
  // of a Barnum run, interop/) instead of a root task; it has no entry
  // input (RunOptions::input_json must be empty) and RunOptions::run_id
  // must be set, so that the same command resumes the imported run rather
  // than importing again. Every other option means what it means for any
  // run. Not owned.
  const RunImport* import = nullptr;
  // The registered Function handlers: a Function action without one is
  // exit 2 before anything is written (tasks/exec/function_executor.h).
  std::set<std::string> handlers;
  // Builds the executors asked before the built-in ones (Command, Prompt),
  // given the run's local workspace on this machine (the directory store's
  // .wizard/, or the PostgreSQL store's per-run directory: LocalWorkspace);
  // they live as long as the run.
  std::function<std::vector<std::unique_ptr<Executor>>(
      const std::string& workspace)>
      make_executors;
};

// RunWorkflow with extras: the one entry point of the wizq command (a
// workflow file or a Barnum log) and of the C++ API.
int RunWorkflowWith(const RunOptions& options, const RunExtras& extras,
                    RunObserver* observer, RunError* error);

// Forgets a stop asked for by RequestStop (after the run it stopped).
void ClearStopRequest();

// The run id wizq derives for a workflow (its frozen JSON) and input.
std::string DeriveRunId(const std::string& frozen_workflow,
                        const std::string& input_json);

// Set by SIGINT/SIGTERM handlers; the loop stops at its next turn.
// `sender` is the pid that sent the signal (0 if unknown): a task that
// signals its own wizq is charged the attempt, others are refunded.
void RequestStop(int sender = 0);
// Records which signal asked for the stop (for the run_interrupted event);
// async-signal-safe. Call before RequestStop.
void NoteStopSignal(int signo);

}  // namespace wizq

#endif  // WIZQ_ORCHESTRATOR_RUN_H_
