// PromptExecutor: the Executor of Prompt steps (SPEC §10).
//
// An attempt of a Prompt task ends with an answer, from the first of:
//   1. the answer recorded for the task (Attempt::answer_json): at once;
//   2. off a terminal, the prompt's `default` (source "default"): at once;
//   3. on a terminal, the person at it (source "terminal"): the questions
//      are asked one at a time on a thread of their own while other tasks
//      run (util/console.h keeps the progress line out of the way).
// A reply that cannot be read is asked again; after kMaxMisses of them, or
// at the end of input, the attempt ends kUnanswered (the task goes back to
// pending and waits) and this executor declines the task for the rest of
// the process (CanRunTask), so the run pauses (exit 4) instead of asking
// again. After end of input every later question is declined at once.
//
// An answer is not recorded here: the run loop records a new answer
// (task_answered) in the same batch as the task's result.
//
// Thread-safety: as Executor's; CanRunTask and AttemptStarted may be called
// from any thread.
#ifndef WIZQ_TASKS_PROMPT_EXECUTOR_H_
#define WIZQ_TASKS_PROMPT_EXECUTOR_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "tasks/exec/executor.h"

namespace wizq {

struct PromptSpec;

class PromptExecutor : public Executor {
 public:
  static constexpr int kMaxMisses = 3;

  // `interactive`: a person can answer on this process's terminal; replies
  // are read from `in_fd` (stdin), questions written to stderr.
  explicit PromptExecutor(bool interactive, int in_fd = 0);
  ~PromptExecutor() override;

  bool CanRun(const Action& action) const override;
  bool CanRunTask(const Task& task, const Action& action) const override;
  Status Start(const Attempt& attempt) override;
  Status Wait(int timeout_ms, Done* done) override;
  size_t running() const override;
  bool FindByProcess(int, int64_t*) const override { return false; }
  // Stops asking (an open question is abandoned) and drops every result.
  void TerminateAll(double grace_seconds) override;
  // A question leaves nothing behind: an attempt never counts as started,
  // so a crash while asking costs no attempt.
  bool AttemptStarted(int64_t, int) const override { return false; }
  Status ReapOrphans(int64_t) override { return Status::OK(); }

 private:
  struct Question {
    int64_t task_id = 0;
    std::string step;
    std::shared_ptr<const PromptSpec> prompt;
  };
  void Finish(int64_t task_id, AttemptResult result);  // REQUIRES: mu_
  void AskLoop();
  // Reads one line from in_fd_; false at end of input or when stopping.
  bool ReadLine(std::string* line);
  AttemptResult AskOne(const Question& q);

  const bool interactive_;
  const int in_fd_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Question> questions_;
  std::map<int64_t, bool> started_;  // attempts not yet returned by Wait
  Done done_;
  std::set<int64_t> declined_;  // given up on in this process
  bool eof_ = false;            // end of input seen: ask no more
  std::atomic<bool> stop_{false};
  std::thread asker_;
  std::string buffer_;  // input read past the last line
};

}  // namespace wizq

#endif  // WIZQ_TASKS_PROMPT_EXECUTOR_H_
