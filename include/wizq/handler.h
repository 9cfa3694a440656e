// Handlers: task bodies written as C++ functions (docs/EMBEDDING.md).
//
// A workflow step whose action is {"kind": "Function"} is run by the
// handler a program registers for it (wizq::Wizard::RegisterHandler). For
// every attempt of such a task the handler is called on a worker thread,
// once the attempt's claim is durable, with what the task is (TaskInfo)
// and a CancelToken. It returns a HandlerResult: the next tasks to spawn
// (which become the attempt's response, validated like a Command's
// stdout), or a failure (the step's retry policy applies). A handler that
// throws is a failed attempt whose message is the exception's what().
//
// The guarantees of SPEC §6 hold: a kill -9 of the process re-calls a
// handler that was in flight at most once per crash, never at the same
// time as its earlier call; a completion and the tasks it spawns are one
// durable step. A handler should therefore be idempotent per
// TaskInfo::idempotency_key (the same across the attempts and resumes of
// one task).
//
// Only std types appear here.
#ifndef WIZQ_HANDLER_H_
#define WIZQ_HANDLER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace wizq {

// What a handler is told about the attempt it runs.
struct TaskInfo {
  int64_t id = 0;           // the task's id in the run
  std::string step;         // the task's step
  std::string inputs_json;  // the task's value, canonical JSON text
  int attempt = 1;          // this attempt's number, from 1
  std::string run_id;
  // Stable across the attempts and resumes of this task of this run: a key
  // for the handler's own side effects.
  std::string idempotency_key;
  std::string install_dir;    // canonical absolute path
  bool finally_hook = false;  // this is the step's finally hook
};

// Becomes cancelled when the attempt's timeout elapses or the run stops
// (Wizard::RequestStop, SIGINT in the wizq command). A handler that sees it
// should return soon; what it returns after that is discarded.
//
// Thread-safety: every method may be called from any thread. Copies share
// one state.
class CancelToken {
 public:
  // A token that is never cancelled.
  CancelToken();
  bool cancelled() const;
  // Sleeps up to `seconds` or until cancelled, whichever comes first;
  // returns cancelled().
  bool WaitFor(double seconds) const;

  struct State;  // implementation detail
  explicit CancelToken(std::shared_ptr<State> state);

 private:
  std::shared_ptr<State> state_;
};

// A task for a handler to spawn: a step listed in its step's `next` and
// the task's value as JSON text.
struct Spawn {
  std::string step;
  std::string inputs_json = "{}";
};

// What a handler returns. Build it with one of the static functions.
class HandlerResult {
 public:
  // Success, spawning `next` (may be empty: a terminal task).
  static HandlerResult Next(std::vector<Spawn> next);
  // Success with a response given as JSON text, as a Command prints it:
  // an array of {"kind": STEP, "value": VALUE}.
  static HandlerResult NextJson(std::string response_json);
  // Success, spawning nothing.
  static HandlerResult Done();
  // A failed attempt; `message` goes into the audit log and `wizq status`.
  static HandlerResult Failed(std::string message);

  bool ok() const { return ok_; }
  // The response (JSON text) when ok(), else the failure message.
  const std::string& text() const { return text_; }

 private:
  HandlerResult(bool ok, std::string text) : ok_(ok), text_(std::move(text)) {}
  bool ok_;
  std::string text_;
};

// A handler. Called on a worker thread of the library, possibly several at
// once (for different tasks), so it must be safe to call concurrently with
// itself and with the program's other threads. It must not call back into
// the Wizard that runs it (Wizard::Run would wait for the run it is part
// of: one Wizard runs one run at a time), may read the run's status
// (Wizard::ReadStatus), may ask the run to stop (Wizard::RequestStop) and
// may block.
using Handler =
    std::function<HandlerResult(const TaskInfo& task, const CancelToken&)>;

}  // namespace wizq

#endif  // WIZQ_HANDLER_H_
