// RunObserver: what the run loop reports as it goes, for progress output
// (views/progress.h) and tests. Calls come from the run loop's thread.
#ifndef WIZQ_ORCHESTRATOR_OBSERVER_H_
#define WIZQ_ORCHESTRATOR_OBSERVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "queue/store.h"

namespace wizq {

struct Progress {
  // `running`: claimed (in_progress) and not counted in `queued`.
  int64_t pending = 0, running = 0, done = 0, failed = 0, total = 0;
  int64_t reused = 0;  // of `done`: completed from a previous run's result
  // Of `done` and `failed`: finished before an import (RunCounts::imported).
  int64_t imported = 0;
  // This process's claimed attempts that have not begun: claimed ahead, or
  // waiting in the executor for a free slot.
  int64_t queued = 0;
  int64_t elapsed_ms = 0;
};

// How an attempt that ran ended (RunObserver::OnAttemptEnded).
struct AttemptEnd {
  int exit_code = -1;        // a process's exit status (a Command, a Pool
                             // task's --agent); -1: none (a signal, a
                             // timeout, not a process)
  int64_t duration_ms = -1;  // from its start to its end; -1: unknown
  // The process's stderr file (tasks/exec/attempt_files.h); "" for an attempt
  // that is no process.
  std::string stderr_path;
};

// A task that waits for an answer (a human gate, SPEC §10).
struct WaitingPrompt {
  int64_t id = 0;
  std::string step, mode, message;
  std::vector<std::string> choices;  // mode choice
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // The run was opened: started, resumed or joined (report says which).
  virtual void OnOpened(const std::string& run_id, const OpenReport& report,
                        const Progress& p) = 0;
  // The attempt began: its process runs (for an attempt that waited in
  // the executor, when a slot freed up, after its OnTaskQueued).
  virtual void OnTaskStarted(const Task& task, int attempt,
                             const Progress& p) = 0;
  // The attempt was handed to the executor while every slot was busy: it
  // waits there, and OnTaskStarted follows when it begins (or nothing, if
  // the run stops first).
  virtual void OnTaskQueued(const Task& task, int attempt, const Progress& p) {
    (void)task;
    (void)attempt;
    (void)p;
  }
  // `reason` is empty on success; `will_retry` when it goes back to pending.
  virtual void OnTaskFinished(const Task& task, const std::string& reason,
                              const std::string& message, bool will_retry,
                              int spawned, const Progress& p) = 0;
  virtual void OnRunFinished(RunStatus status, const Progress& p) = 0;
  // A line worth telling the user (resets by other workers, waits, ...).
  virtual void OnNote(const std::string& message) = 0;
  // The run paused (SPEC §10): `waiting` are the tasks that wait for an
  // answer. The process exits 4 next.
  virtual void OnPaused(const std::vector<WaitingPrompt>& waiting,
                        const Progress& p) {
    (void)waiting;
    (void)p;
  }
  // The run stops on a signal: `signal_name` is "SIGINT", "SIGTERM" or
  // "SIGHUP" ("" if unknown). Its tasks were put back; the process exits
  // 130 next.
  virtual void OnInterrupted(const std::string& signal_name,
                             const Progress& p) {
    (void)signal_name;
    (void)p;
  }
  // Something the user must know even under --quiet (the workflow file
  // differs from the run's frozen copy). By default, a note.
  virtual void OnWarning(const std::string& message) { OnNote(message); }
  // The attempt of `task` whose end OnTaskFinished reports next ran and
  // ended so. Called just before that OnTaskFinished, for an attempt this
  // process ran (or adopted); not for a reused task.
  virtual void OnAttemptEnded(const Task& task, const AttemptEnd& end) {
    (void)task;
    (void)end;
  }
  // The result of `task` submitted `count` children that already existed
  // (deduplicated, not spawned). Called just before its OnTaskFinished.
  virtual void OnDeduplicated(const Task& task, int count) {
    (void)task;
    (void)count;
  }
  // The run ends (finished, interrupted or halted) with failed tasks:
  // every one of them, each with its last attempt's files under
  // `workspace`, the run's machine-local workspace (tasks/exec/attempt_files.h:
  // LocalWorkspace). Called before OnRunFinished.
  virtual void OnFailures(const std::vector<Task>& failed,
                          const std::string& workspace) {
    (void)failed;
    (void)workspace;
  }
};

}  // namespace wizq

#endif  // WIZQ_ORCHESTRATOR_OBSERVER_H_
