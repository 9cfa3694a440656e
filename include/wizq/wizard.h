// wizq::Wizard: a workflow, the handlers of its Function steps, and the
// runs of it on install directories (docs/EMBEDDING.md).
//
//   std::unique_ptr<wizq::Wizard> w;
//   wizq::Status s = wizq::Wizard::Load("setup.jsonc", &w);
//   s = w->RegisterHandler("Fetch", [](const wizq::TaskInfo& t,
//                                      const wizq::CancelToken& cancel) {
//     ...
//     return wizq::HandlerResult::Next({{"Verify", t.inputs_json}});
//   });
//   wizq::WizardOptions options;
//   options.install_dir = "/opt/app";
//   std::string error;
//   wizq::RunOutcome o = w->Run("{}", options, &error);
//
// Run starts the run of the workflow and input on the install directory,
// resumes it if an earlier process left it unfinished (killed, Ctrl+C,
// paused), or joins it if another process runs it right now: the same
// rules, files and guarantees as `wizq run` (which is a client of the same
// entry point). Command, Pool, Prompt and Function steps mix in one run.
//
// Thread-safety: Load/Parse and RegisterHandler are for the setup, before
// Run. One Wizard runs one run at a time (Run calls on one Wizard are
// serialized); different Wizards may run at once on different install
// directories, or on the same one (they then share the work as two
// processes would). RequestStop, MissingHandlers and ReadStatus may be
// called from any thread at any time.
#ifndef WIZQ_WIZARD_H_
#define WIZQ_WIZARD_H_

#include <memory>
#include <string>
#include <vector>

#include "wizq/handler.h"
#include "wizq/observer.h"
#include "wizq/status.h"

namespace wizq {

struct WizardOptions {
  // Where the run lives (`<install_dir>/.wizard/`); created if missing.
  // With `store`: this machine's task output and attempt journal only, a
  // subdirectory per run (`.wizq-local/`).
  std::string install_dir = ".";
  // "": the directory store (the run in install_dir). Else the PostgreSQL
  // store at this location (a postgresql:// URL or a libpq keyword string,
  // SPEC §14), which workers and agents on other machines share: `wizq
  // run --store` with the same location and run joins this run. Never
  // taken from WIZQ_STORE: the program chooses.
  std::string store;
  // The PostgreSQL store's schema ("": wizq).
  std::string schema;
  // Tasks run at once by this process; 0: the workflow's max_concurrency.
  int jobs = 0;
  // Archive an unfinished run of the directory and start over.
  bool fresh = false;
  // Empty: derived from the workflow and input, as `wizq run` does (so the
  // command and the program resume each other's runs).
  std::string run_id;
  // Answers given up front, "TASK=VALUE" as `wizq run --answer`.
  std::vector<std::string> answers;
  // Everything runs live (`--no-reuse`).
  bool no_reuse = false;
  // How long a handler may take to return after its token is cancelled
  // (timeout, stop) before its attempt is failed and its late result
  // discarded. Seconds, >= 0.
  double cancel_grace_seconds = 5;
  // Not owned; may be null. Must outlive Run.
  Observer* observer = nullptr;
  // Answers Prompt steps; not owned, may be null (then a prompt takes its
  // default, or waits and the run pauses). Must outlive Run.
  PromptAnswerer* answerer = nullptr;
};

class Wizard {
 public:
  // Reads a workflow file (JSON or JSONC, docs/FORMAT.md). Command scripts
  // run in the file's directory. InvalidArgument lists every problem with
  // its JSON path; NotFound/IOError when the file cannot be read.
  static Status Load(const std::string& workflow_path,
                     std::unique_ptr<Wizard>* out);
  // Parses a workflow given as JSON text (a workflow built in code).
  // Command scripts run in `base_dir` (empty: the current directory).
  static Status Parse(const std::string& workflow_json,
                      const std::string& base_dir,
                      std::unique_ptr<Wizard>* out);

  ~Wizard();
  Wizard(const Wizard&) = delete;
  Wizard& operator=(const Wizard&) = delete;

  // Registers the handler of the Function actions named `name`: a step's
  // action {"kind": "Function"} is named after its step unless it says
  // "handler": NAME; a Function finally hook is named "STEP.finally" unless
  // it says otherwise. InvalidArgument when no Function action has that
  // name or one is registered already. REQUIRES: no Run in progress.
  Status RegisterHandler(const std::string& name, Handler handler);

  // The Function actions' names that have no handler yet, in file order.
  // Run refuses to start (RunOutcome::kInvalid) until this is empty.
  std::vector<std::string> MissingHandlers() const;

  // Runs, resumes or joins the run (see the top of this file) with
  // `input_json` (the entry step's value; "" is {}), blocking until it
  // finishes, pauses or is stopped. *error (not null) says why when the
  // outcome is kInvalid or kEnvironment; a task failure is in the run's
  // status and the observer's events.
  RunOutcome Run(const std::string& input_json, const WizardOptions& options,
                 std::string* error);

  // Asks every Run in progress in this process to stop: running handlers'
  // tokens are cancelled, Command processes are stopped, unstarted tasks
  // are given back; Run returns kInterrupted and a later Run resumes.
  // Thread-safe and async-signal-safe (may be called from a signal
  // handler).
  static void RequestStop();

  // The status of the run in `install_dir` as one JSON object (what `wizq
  // status --json` prints: run id, status, counts, every task). Read-only;
  // works while a run is in progress. NotFound when there is no run.
  static Status ReadStatus(const std::string& install_dir,
                           std::string* status_json);
  // The same for the run `where` names: its install_dir, store, schema and
  // run_id (on PostgreSQL an empty run_id is the store's most recently
  // started current run; on the directory store a run_id given must be
  // the directory's, else NotFound).
  static Status ReadStatus(const WizardOptions& where,
                           std::string* status_json);

  struct Impl;  // implementation detail

 private:
  explicit Wizard(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace wizq

#endif  // WIZQ_WIZARD_H_
