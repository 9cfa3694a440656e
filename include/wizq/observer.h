// Observing a run and answering its prompts from the program's own UI
// (docs/EMBEDDING.md).
//
// An Observer is told what the run does as it goes: a GUI installer draws
// its own progress bar from it. A PromptAnswerer answers the run's Prompt
// steps (SPEC §10) instead of a terminal.
//
// Only std types appear here.
#ifndef WIZQ_OBSERVER_H_
#define WIZQ_OBSERVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "wizq/handler.h"
#include "wizq/status.h"

namespace wizq {

// Task counts of the run, as of the event they come with.
struct RunProgress {
  int64_t pending = 0, running = 0, done = 0, failed = 0, total = 0;
  int64_t reused = 0;  // of `done`: completed from a previous run's result
  int64_t elapsed_ms = 0;
};

// How a run ended, as Wizard::Run reports it (the wizq command's exit
// codes, SPEC §7, in parentheses).
enum class RunOutcome {
  kCompleted,    // every task done (0)
  kTaskFailed,   // the run finished with failed tasks (1)
  kInvalid,      // a bad workflow, input, answer or a missing handler (2)
  kEnvironment,  // an I/O error, a lock held by a foreign run, ... (3)
  kPaused,       // tasks wait for answers no one here can give (4)
  kInterrupted,  // stopped by RequestStop or a signal; resumable (130)
};

// "completed", "task_failed", "invalid", "environment", "paused",
// "interrupted".
const char* RunOutcomeName(RunOutcome outcome);

// The exit code the wizq command uses for `outcome` (SPEC §7).
int ExitCodeOf(RunOutcome outcome);

// Receives the events of a run. Every method has an empty default.
//
// Thread-safety: calls come from the thread that called Wizard::Run (the
// run loop's), one at a time, never from a handler's thread. A method must
// return quickly (the loop waits for it) and must not call back into the
// Wizard that runs it.
class Observer {
 public:
  virtual ~Observer();
  // The run was opened. `how`: "started", "resumed", "joined" (another
  // process runs it too) or "finished" (it had finished: nothing to do).
  virtual void OnOpened(const std::string& run_id, const std::string& how,
                        const RunProgress& progress);
  virtual void OnTaskStarted(int64_t task_id, const std::string& step,
                             int attempt, const RunProgress& progress);
  // `reason` is empty on success (then `spawned` children were submitted),
  // else the audit reason (exit_code, timeout, invalid_response, ...);
  // `will_retry` when the task goes back to pending.
  virtual void OnTaskFinished(int64_t task_id, const std::string& step,
                              const std::string& reason,
                              const std::string& message, bool will_retry,
                              int spawned, const RunProgress& progress);
  // A line worth telling the user (other workers' resets, waits, ...).
  virtual void OnNote(const std::string& message);
  // The run ended (not called when it pauses: see OnPaused).
  virtual void OnRunFinished(RunOutcome outcome, const RunProgress& progress);
  // The run paused: `task_ids` wait for answers (WizardOptions::answers
  // or a PromptAnswerer on a later Wizard::Run, or `wizq answer`).
  virtual void OnPaused(const std::vector<int64_t>& task_ids,
                        const RunProgress& progress);
};

// A question a Prompt task asks (SPEC §10).
struct PromptRequest {
  int64_t task_id = 0;
  std::string step;
  std::string mode;  // "confirm", "input" or "choice"
  std::string message;
  std::vector<std::string> choices;  // mode "choice"
  std::string default_json;          // the prompt's default, "" if none
  std::string answer_schema_json;    // mode "input", "" if none
  std::string inputs_json;           // the prompt task's own value
};

// Answers Prompt steps from the program's UI.
//
// Thread-safety: Answer is called on a worker thread of the library, one
// question at a time per Wizard; it may block (a dialog) and should watch
// `cancel` (the run stopping).
class PromptAnswerer {
 public:
  virtual ~PromptAnswerer();
  // Sets *answer_json to the answer as JSON text: true/false for confirm,
  // a string for input, one of the choices (a string) for choice. An answer
  // that does not fit is asked again (up to three times). A non-OK Status
  // means "no answer now": the task waits and, when nothing else can run,
  // the run pauses (RunOutcome::kPaused).
  virtual Status Answer(const PromptRequest& request, const CancelToken& cancel,
                        std::string* answer_json) = 0;
};

}  // namespace wizq

#endif  // WIZQ_OBSERVER_H_
