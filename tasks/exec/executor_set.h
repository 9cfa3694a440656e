// ExecutorSet: one Executor made of several, one per kind of action. The
// run loop talks to a single Executor (orchestrator/run_loop.h); `wizq run`
// gives it a set holding the CommandExecutor and, as they are enabled, the
// executors of other action kinds (Pool agents started by `--agent`, Prompt
// steps, Function handlers). Each attempt goes to the first member whose
// CanRun accepts its action; everything else is the union of the members.
//
// Thread-safety: as Executor's. The members are not owned and must outlive
// the set.
#ifndef WIZQ_TASKS_EXECUTOR_SET_H_
#define WIZQ_TASKS_EXECUTOR_SET_H_

#include <map>
#include <vector>

#include "tasks/exec/executor.h"

namespace wizq {

class ExecutorSet : public Executor {
 public:
  ExecutorSet() = default;
  explicit ExecutorSet(std::vector<Executor*> members)
      : members_(std::move(members)) {}

  // Adds a member, asked after the ones added before it.
  void Add(Executor* member) { members_.push_back(member); }

  bool CanRun(const Action& action) const override;
  bool CanRunTask(const Task& task, const Action& action) const override;
  // InvalidArgument when no member can run the attempt's action (the loop
  // claims only what CanRun accepts, so this is a bug in the caller).
  Status Start(const Attempt& attempt) override;
  // Waits on every member that has attempts running. With one busy member
  // this is its Wait; with several it looks at each in turn, sleeping in
  // short slices (kSliceMs) on one of them, so a result of any member, or
  // an attempt that began (TakeBegun), is seen within a slice.
  Status Wait(int timeout_ms, Done* done) override;
  size_t running() const override;
  bool FindByProcess(int pid, int64_t* task_id) const override;
  void TerminateAll(double grace_seconds) override;
  bool AttemptStarted(int64_t task_id, int attempt) const override;
  // Asks every member: an orphan of any kind is ended.
  Status ReapOrphans(int64_t task_id) override;
  // Whether any member can adopt the attempt (the caller asks only for
  // tasks whose kind adopts: see RunLoop::Open).
  bool AttemptAdoptable(int64_t task_id, int attempt) const override;
  std::string AdoptionNote(int64_t task_id) const override;
  bool Queues(const Action& action) const override;
  void SetQueueSlots(int slots) override;
  void CancelQueued() override;
  void SetLocalDeadline(int64_t mono_ms) override;
  void TakeBegun(std::vector<int64_t>* task_ids) override;
  // Always true: members that take the descriptor wake on it in their own
  // Wait; while others are waited for, the set polls it between slices.
  bool SetWakeFd(int fd) override;

  static constexpr int kSliceMs = 5;

 private:
  Executor* MemberFor(const Action& action) const;
  Status Collect(Executor* member, int timeout_ms, Done* done);
  // Sleeps up to `ms`, less if the wake descriptor becomes readable; true
  // if it is.
  bool SleepOrWake(int ms) const;

  std::vector<Executor*> members_;
  std::map<int64_t, Executor*> owner_;  // running attempts, by task id
  int wake_fd_ = -1;
  std::map<const Executor*, bool> wakes_;  // members that took wake_fd_
  std::vector<int64_t> begun_;  // taken from members in Wait, not yet told
};

}  // namespace wizq

#endif  // WIZQ_TASKS_EXECUTOR_SET_H_
