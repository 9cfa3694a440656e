// AgentExecutor: the Executor of Pool steps for `wizq run --agent COMMAND`
// (SPEC §9). Inside the run process, each claimed Pool attempt runs
// `/bin/sh -c COMMAND` with the agent payload (tasks/exec/instructions.h,
// without lease fields: the run's worker holds the claim) on stdin, and its
// stdout is the response, judged by the run loop exactly like a Command's.
//
// The agent's process tree is a Command task's in every respect
// (tasks/proc/command_runner.h): its own group, the lock on its attempt's
// stdout, its leader recorded, so an orphan left by a dead `wizq run` is ended
// before the task runs again (ReapOrphans), and attempts never overlap.
//
// Thread-safety: as Executor.
#ifndef WIZQ_TASKS_AGENT_EXECUTOR_H_
#define WIZQ_TASKS_AGENT_EXECUTOR_H_

#include <map>
#include <string>

#include "tasks/exec/executor.h"
#include "tasks/proc/command_runner.h"

namespace wizq {

class AgentExecutor : public Executor {
 public:
  // Runs `command` (a shell command line) for the Pool attempts of the run
  // in `wizard_dir`. The instructions come from Attempt::workflow.
  AgentExecutor(Env* env, std::string wizard_dir, std::string command);
  ~AgentExecutor() override;

  bool CanRun(const Action& action) const override;
  Status Start(const Attempt& attempt) override;
  Status Wait(int timeout_ms, Done* done) override;
  size_t running() const override;
  bool FindByProcess(int pid, int64_t* task_id) const override;
  void TerminateAll(double grace_seconds) override;
  bool AttemptStarted(int64_t task_id, int attempt) const override;
  Status ReapOrphans(int64_t task_id) override;
  // Like CommandExecutor's: an attempt of a dead `wizq run --agent` whose
  // agent still runs, or answered on its own, is adopted.
  bool AttemptAdoptable(int64_t task_id, int attempt) const override;
  bool SetWakeFd(int fd) override {
    runner_.set_wake_fd(fd);
    return true;
  }
  void SetLocalDeadline(int64_t mono_ms) override {
    runner_.set_local_deadline(mono_ms);
  }

 private:
  Env* const env_;
  const std::string wizard_dir_;
  const std::string command_;
  CommandRunner runner_;
};

}  // namespace wizq

#endif  // WIZQ_TASKS_AGENT_EXECUTOR_H_
