// FunctionExecutor: the Executor of in-process bodies: the Function steps
// of a program that embeds wizq (include/wizq/wizard.h), and the Prompt
// steps such a program answers from its own UI.
//
// Each attempt's body runs on a thread of its own, started by Start (which
// the run loop calls only once the claim is durable). The body gets a
// CancelFlag that is raised when the attempt's timeout elapses or the run
// stops (TerminateAll). A body that returns within `grace_seconds` of that
// has its attempt reported kTimedOut (a timeout) and its result discarded;
// one that does not is abandoned: its attempt is reported kTimedOut at the
// end of the grace period, its thread is detached and keeps running until
// the body returns, and whatever it returns then is dropped. Until an
// abandoned body returns, CanRunTask declines its task, so two attempts of
// one task never run at once (SPEC §6.3); the thread holds shared
// ownership of everything it touches, so it may outlive the executor.
//
// Crash accounting (SPEC §6.3): with a wizard_dir, the thread creates
// `tasks/<id>/<attempt>.function` (not synced) just before it calls the
// body, and AttemptStarted answers from it: an attempt whose body was never
// called is not charged after a crash. A body's own effects are not
// visible to wizq: after a kill -9 an in-flight body is called again (once
// per crash) with the same idempotency key.
//
// Thread-safety: as Executor's. CanRunTask and AttemptStarted may be called
// from any thread.
#ifndef WIZQ_TASKS_FUNCTION_EXECUTOR_H_
#define WIZQ_TASKS_FUNCTION_EXECUTOR_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tasks/exec/executor.h"

namespace wizq {

class Env;

// The handler names of the workflow's Function actions (steps' and finally
// hooks'), in file order, without repeats.
std::vector<std::string> FunctionHandlerNames(const Workflow& workflow);

// InvalidArgument naming the first step whose Function action (or hook)
// has no handler in `registered`, saying that only a program that embeds
// wizq can run it. OK when every one has a handler.
Status CheckFunctionHandlers(const Workflow& workflow,
                             const std::set<std::string>& registered);

// Raised once; waited on by bodies. Thread-safe.
class CancelFlag {
 public:
  void Cancel();
  bool cancelled() const { return cancelled_.load(); }
  // Sleeps up to `seconds` or until raised; returns cancelled().
  bool WaitFor(double seconds) const;

 private:
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
};

class FunctionExecutor : public Executor {
 public:
  // Runs one attempt on its own thread and says how it ended. Exceptions
  // are caught (a failed attempt with the exception's message).
  using Body = std::function<AttemptResult(
      const Attempt& attempt, const std::shared_ptr<CancelFlag>& cancel)>;

  struct Options {
    Action::Kind kind = Action::Kind::kFunction;  // the actions it runs
    // Where the start markers go (`<wizard_dir>/tasks/...`); empty: none,
    // and attempts never count as started after a crash (Prompt answers).
    std::string wizard_dir;
    Env* env = nullptr;  // nullptr: Env::Posix()
    double grace_seconds = 5;
    // Optional: whether `task` is runnable now (beyond its kind). Called
    // from any thread.
    std::function<bool(const Task&, const Action&)> can_run_task;
  };

  FunctionExecutor(Options options, Body body);
  // Stops every body as TerminateAll(grace_seconds) does.
  ~FunctionExecutor() override;

  bool CanRun(const Action& action) const override;
  bool CanRunTask(const Task& task, const Action& action) const override;
  // IOError only if no thread can be created.
  Status Start(const Attempt& attempt) override;
  Status Wait(int timeout_ms, Done* done) override;
  size_t running() const override;
  bool FindByProcess(int, int64_t*) const override { return false; }
  // Raises every running attempt's flag, waits up to the shorter of
  // grace_seconds and Options::grace_seconds for the bodies to return,
  // abandons the rest, and drops every result.
  void TerminateAll(double grace_seconds) override;
  bool AttemptStarted(int64_t task_id, int attempt) const override;
  // Nothing of a body survives its process.
  Status ReapOrphans(int64_t) override { return Status::OK(); }
  bool SetWakeFd(int fd) override;

  // Bodies abandoned and still running (for tests).
  size_t abandoned() const;

  struct Shared;  // state shared with the attempt threads

 private:
  // Moves finished or overdue attempts to *done; raises flags whose
  // deadline passed. Returns the ms until the next deadline (-1: none).
  int64_t Sweep(Done* done);

  const Options options_;
  std::shared_ptr<const Body> body_;
  std::shared_ptr<Shared> shared_;
  int wake_fd_ = -1;
};

}  // namespace wizq

#endif  // WIZQ_TASKS_FUNCTION_EXECUTOR_H_
