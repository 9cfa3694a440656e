// RunLoop: the body of `wizq run` once the workflow and input are valid.
// Internal to orchestrator/; see orchestrator/run.h for the contract.
#ifndef WIZQ_ORCHESTRATOR_RUN_LOOP_H_
#define WIZQ_ORCHESTRATOR_RUN_LOOP_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "orchestrator/observer.h"
#include "queue/queue.h"
#include "tasks/command_runner.h"
#include "tasks/workflow.h"

namespace wizq {

class Env;

bool StopRequested();

// What a finished attempt amounts to, decided outside the lock.
struct Outcome {
  int64_t id = 0;
  bool success = false;
  std::vector<NewTask> children;
  std::string reason;  // on failure
  std::string message;
  bool retryable = false;
};

class RunLoop {
 public:
  struct Config {
    std::string run_id, install_dir, input, wizq_version, workflow_path;
    int jobs = 0;
    bool fresh = false;
    Env* env = nullptr;
  };

  RunLoop(Config config, std::unique_ptr<Workflow> workflow,
          RunObserver* observer);
  // Runs until the run finishes or stops; *exit_code per SPEC §7. An error
  // Status is an environment (3) or input (2) problem.
  Status Run(int* exit_code);

 private:
  struct Running {
    int attempt = 0;
    std::string step;
  };

  Status Open(bool* finished, int* exit_code);
  Status UseFrozenWorkflow();
  Status Cycle(std::vector<Outcome>* outcomes, std::vector<int64_t>* claimed);
  Status CommitInTxn(Txn& txn, const std::vector<Outcome>& outcomes,
                     std::vector<int64_t>* claimed);
  Status SubmitDueHooks(Txn& txn);
  Status ClaimForFreeSlots(Txn& txn, std::vector<int64_t>* claimed);
  bool Claimable(const Task& t, const std::map<std::string, int>& per_step) const;
  void StartTask(int64_t id, std::vector<Outcome>* failed_to_start);
  Outcome Judge(int64_t id, const CommandResult& result) const;
  Outcome JudgeResponse(const Task& task, const CommandResult& result) const;
  Status Interrupt(int* exit_code);
  Status WaitIdle();
  const Action* ActionFor(const Task& t, const Step** step) const;
  Progress MakeProgress() const;
  std::string TaskDir(int64_t id) const;
  int64_t ElapsedMs() const;

  Config config_;
  std::unique_ptr<Workflow> workflow_;
  RunObserver* observer_;
  std::unique_ptr<Queue> queue_;
  CommandRunner runner_;
  std::map<int64_t, Running> running_;  // tasks this process runs
  int jobs_ = 1;
  int64_t start_ms_ = 0;
  int idle_ms_ = 0;
};

}  // namespace wizq

#endif  // WIZQ_ORCHESTRATOR_RUN_LOOP_H_
