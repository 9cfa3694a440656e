// CommandExecutor: the Executor of Command steps (SPEC §3). Each attempt
// runs as `/bin/sh -c <script>` through a CommandRunner, in the workflow's
// directory, with the task `{"kind": <step>, "value": <value>}` on stdin,
// the WIZQ_* variables in its environment and its files where AttemptFiles
// puts them (`.wizard/tasks/<id>/`).
//
// Thread-safety: as Executor (AttemptStarted may be called from any thread).
#ifndef WIZQ_TASKS_COMMAND_EXECUTOR_H_
#define WIZQ_TASKS_COMMAND_EXECUTOR_H_

#include <map>
#include <string>
#include <vector>

#include "tasks/exec/executor.h"
#include "tasks/proc/command_runner.h"

namespace wizq {

// How a process attempt ended, as an Executor reports it (a Command's, or
// a Pool agent's run by `wizq run --agent`).
AttemptResult AttemptResultOf(CommandResult c);

class Env;

class CommandExecutor : public Executor {
 public:
  // How long ReapOrphans lets an orphaned tree end on SIGTERM, and waits in
  // all, for a dead worker's task.
  static constexpr double kOrphanGraceSeconds = 1.0;
  static constexpr double kOrphanMaxWaitSeconds = 10.0;

  // Runs the attempts of the run in `wizard_dir`; `env` (nullptr:
  // Env::Posix()) reads the attempts' files back.
  CommandExecutor(Env* env, std::string wizard_dir);
  ~CommandExecutor() override;

  bool CanRun(const Action& action) const override;
  Status Start(const Attempt& attempt) override;
  Status Wait(int timeout_ms, Done* done) override;
  size_t running() const override;
  bool FindByProcess(int pid, int64_t* task_id) const override;
  void TerminateAll(double grace_seconds) override;
  // True once the attempt's stdout file exists (the previous layout's: its
  // stdin file; CommandRunner creates it before it hands the attempt to the
  // spawner) and its start line is in the journal or something holds its
  // lock (tasks/proc/orphans_record.h): a wizq killed between the two, or while
  // the attempt waited in the spawner's queue, started nothing.
  bool AttemptStarted(int64_t task_id, int attempt) const override;
  Status ReapOrphans(int64_t task_id) override;
  bool AttemptAdoptable(int64_t task_id, int attempt) const override;
  std::string AdoptionNote(int64_t task_id) const override;
  bool Queues(const Action& action) const override { return CanRun(action); }
  void SetQueueSlots(int slots) override { runner_.set_max_running(slots); }
  void CancelQueued() override { runner_.CancelWaiting(); }
  void SetLocalDeadline(int64_t mono_ms) override {
    runner_.set_local_deadline(mono_ms);
  }
  // A shell the spawner started; an adopted attempt at its Start.
  void TakeBegun(std::vector<int64_t>* task_ids) override;
  bool SetWakeFd(int fd) override {
    runner_.set_wake_fd(fd);
    return true;
  }

 private:
  // The last non-empty line of a file (its last 400 bytes), "" if none.
  std::string LastLine(const std::string& path) const;

  Env* const env_;
  const std::string wizard_dir_;
  CommandRunner runner_;
  // Records AdoptionNote's text when the adopted attempt still runs.
  void NoteAdoptionWait(const CommandSpec& spec, int64_t task_id);

  std::map<int64_t, int> attempts_;  // running: task id -> attempt number
  // Adopted attempts still running when started: AdoptionNote's text.
  std::map<int64_t, std::string> adoption_notes_;
  std::vector<int64_t> adopted_begun_;  // adopted, for the next TakeBegun
};

}  // namespace wizq

#endif  // WIZQ_TASKS_COMMAND_EXECUTOR_H_
