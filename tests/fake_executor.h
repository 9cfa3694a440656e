// FakeExecutor: an Executor for in-process tests of the run loop (Ninja's
// FakeCommandRunner is the model). It "runs" an attempt at once, in Start,
// from a scripted table (step -> body), and Wait hands the results back:
// no processes, no files, milliseconds per run.
//
// Every attempt is recorded in a Ledger that the test owns and that outlives
// the executor, as the world outside wizq outlives a crash of wizq: it is
// what a task's side effects would be, and what AttemptStarted consults.
// Header-only: CMake builds each tests/*_test.cc as its own binary.
#ifndef WIZQ_TESTS_FAKE_EXECUTOR_H_
#define WIZQ_TESTS_FAKE_EXECUTOR_H_

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tasks/exec/executor.h"

namespace wizq::test {

// One attempt the fake ran.
struct Execution {
  int64_t task_id = 0;
  int attempt = 0;
  std::string step;
  Origin origin = Origin::kInitial;
  std::string value;
  int phase = 0;  // Ledger::phase when it ran (a test's run number)
};

// What attempts ran, across executors (and simulated crashes).
class Ledger {
 public:
  void Record(const Execution& e) {
    std::lock_guard<std::mutex> l(mu_);
    runs_.push_back(e);
    runs_.back().phase = phase_;
    started_.insert({e.task_id, e.attempt});
  }
  bool Started(int64_t id, int attempt) const {
    std::lock_guard<std::mutex> l(mu_);
    return started_.count({id, attempt}) > 0;
  }
  std::vector<Execution> runs() const {
    std::lock_guard<std::mutex> l(mu_);
    return runs_;
  }
  void set_phase(int phase) {
    std::lock_guard<std::mutex> l(mu_);
    phase_ = phase;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Execution> runs_;
  std::set<std::pair<int64_t, int>> started_;
  int phase_ = 0;
};

// Results for scripts.
inline AttemptResult Respond(std::string response) {
  AttemptResult r;
  r.outcome = AttemptResult::Outcome::kResponded;
  r.exit_code = 0;
  r.response = std::move(response);
  return r;
}
inline AttemptResult ExitWith(int code, std::string stderr_tail = "") {
  AttemptResult r;
  r.outcome = AttemptResult::Outcome::kExited;
  r.exit_code = code;
  r.error = "exit code " + std::to_string(code);
  r.stderr_tail = std::move(stderr_tail);
  return r;
}

class FakeExecutor : public Executor {
 public:
  using Body = std::function<AttemptResult(const Attempt&)>;

  explicit FakeExecutor(Ledger* ledger) : ledger_(ledger) {}

  // The body of the tasks of `step` (of its finally hook with `hook`).
  // Without one, a task responds `[]`.
  void SetBody(const std::string& step, Body body, bool hook = false) {
    bodies_[{step, hook}] = std::move(body);
  }
  // Called at the start of every attempt, before its body (checks, and
  // the moment to simulate a crash).
  void SetOnStart(std::function<void(const Attempt&)> on_start) {
    on_start_ = std::move(on_start);
  }

  bool CanRun(const Action& action) const override {
    return action.kind == Action::Kind::kCommand;
  }
  Status Start(const Attempt& a) override {
    if (on_start_) on_start_(a);
    Execution e;
    e.task_id = a.task_id;
    e.attempt = a.number;
    e.step = a.step;
    e.origin = a.origin;
    e.value = a.value_json;
    ledger_->Record(e);
    auto it = bodies_.find({a.step, a.origin == Origin::kFinally});
    done_.emplace_back(a.task_id,
                       it == bodies_.end() ? Respond("[]") : it->second(a));
    return Status::OK();
  }
  Status Wait(int, Done* done) override {
    for (auto& d : done_) done->push_back(std::move(d));
    done_.clear();
    return Status::OK();
  }
  size_t running() const override { return done_.size(); }
  bool FindByProcess(int, int64_t*) const override { return false; }
  void TerminateAll(double) override { done_.clear(); }
  bool AttemptStarted(int64_t task_id, int attempt) const override {
    return ledger_->Started(task_id, attempt);
  }
  Status ReapOrphans(int64_t) override { return Status::OK(); }

 private:
  Ledger* const ledger_;
  std::map<std::pair<std::string, bool>, Body> bodies_;
  std::function<void(const Attempt&)> on_start_;
  Done done_;
};

}  // namespace wizq::test

#endif  // WIZQ_TESTS_FAKE_EXECUTOR_H_
