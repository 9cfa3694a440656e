// QueueState: the in-memory state of a run, rebuilt from the snapshot
// (queue.json) and the audit events after it.
//
// Every change goes through ApplyEvent with the event's JSON line, both when
// a process makes a transition and when it replays what it or others wrote,
// so the live state and the recovered state cannot drift apart. The line is
// decoded by its event's codec (queue/events.h) and applied by one Apply
// overload per event kind. An event that does not fit the state (a claim of
// a task that is not pending, an unknown id) is reported as Corruption.
//
// Not thread-safe; the Queue serialises access.
#ifndef WIZQ_QUEUE_STATE_H_
#define WIZQ_QUEUE_STATE_H_

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "queue/dir/dir_private.h"
#include "queue/run_info.h"
#include "queue/task.h"
#include "util/status.h"

namespace wizq {

// The event kinds (queue/events.h).
struct RunStarted;
struct RunResumed;
struct QueueArchived;
struct TaskSubmitted;
struct TaskClaimed;
struct TaskCompleted;
struct TaskFailed;
struct TaskReset;
struct RunFinished;
struct TaskRetried;
struct TaskAnswered;
struct RunPaused;
struct LeaseRenewed;
struct TaskAdopted;
struct TaskStarted;

class QueueState {
 public:
  QueueState() = default;
  QueueState(const QueueState&) = delete;
  QueueState& operator=(const QueueState&) = delete;

  // Applies one event (a JSON object with at least seq and event). Nothing
  // changes when it fails, except by an event that fails half-way through
  // (a corrupt log: the caller drops the state).
  Status ApplyEvent(std::string_view line);

  bool started() const { return !run_.run_id.empty(); }
  const RunInfo& run() const { return run_; }
  RunInfo* mutable_run() { return &run_; }
  int64_t last_seq() const { return last_seq_; }
  void set_last_seq(int64_t seq) { last_seq_ = seq; }
  int64_t next_task_id() const {
    return static_cast<int64_t>(tasks_.size()) + 1;
  }

  // nullptr if no such task.
  const Task* Find(int64_t id) const;
  const std::vector<Task>& tasks() const { return tasks_; }
  int64_t FindByDedupKey(const std::string& key) const;  // 0 if none
  const std::set<int64_t>& pending() const { return pending_; }
  // The pending tasks by type (step); a type with none has no entry.
  const std::map<std::string, std::set<int64_t>, std::less<>>& pending_by_type()
      const {
    return pending_by_type_;
  }
  const std::set<int64_t>& in_progress() const { return in_progress_; }
  // Tasks that succeeded, whose subtree has settled, whose step has a
  // finally hook not yet submitted or whose hook is stale (Task::hook_stale:
  // the next generation is due).
  const std::set<int64_t>& hooks_due() const { return hooks_due_; }
  // A pending finally hook whose owner's subtree has not settled (again):
  // a hook put back by --retry-failed together with tasks beneath its
  // owner. It is not claimed before they settle (SPEC §2).
  bool HookWaits(const Task& t) const;
  int64_t count(TaskState s) const { return counts_[static_cast<int>(s)]; }
  int64_t total() const { return static_cast<int64_t>(tasks_.size()); }
  // Done tasks completed from a previous run's result (Task::reused_from).
  int64_t reused() const { return reused_count_; }
  // Tasks (done or failed) that finished before an import, in the tool
  // whose run this one continues (claimed_by kImportWorker): not run here.
  int64_t imported() const { return imported_count_; }
  // All tasks settled (and at least one exists).
  bool AllSettled() const;

  // For the snapshot loader: adds a task as stored, then Rebuild() once all
  // are in to recompute the indexes and derived fields.
  Status AddStoredTask(Task task);
  // Room for `n` tasks in all, so that loading them does not regrow.
  void ReserveTasks(size_t n) { tasks_.reserve(n); }
  void Rebuild();

 private:
  // One per event kind that changes state; `ts` is the event's time.
  // Informational kinds (IsInformational, queue/events.h: worker_joined,
  // task_deduplicated, ...) have none: they change nothing.
  Status Apply(const RunStarted& e, int64_t ts);
  Status Apply(const RunResumed& e, int64_t ts);
  Status Apply(const QueueArchived& e, int64_t ts);
  Status Apply(const TaskSubmitted& e, int64_t ts);
  Status Apply(const TaskClaimed& e, int64_t ts);
  Status Apply(const TaskCompleted& e, int64_t ts);
  Status Apply(const TaskFailed& e, int64_t ts);
  Status Apply(const TaskReset& e, int64_t ts);
  Status Apply(const RunFinished& e, int64_t ts);
  Status Apply(const TaskRetried& e, int64_t ts);
  Status Apply(const TaskAnswered& e, int64_t ts);  // queue/dir/state_gate.cc
  Status Apply(const RunPaused& e, int64_t ts);
  Status Apply(const LeaseRenewed& e, int64_t ts);
  Status Apply(const TaskAdopted& e, int64_t ts);
  Status Apply(const TaskStarted& e, int64_t ts);
  Status AddLiveTask(Task t);
  Task* MutableFind(int64_t id);
  Status RequireState(const Task* t, int64_t id, TaskState s,
                      std::string_view event) const;
  void SetState(Task* t, TaskState s);
  void AddPending(const Task& t);     // to pending_ and pending_by_type_
  void RemovePending(const Task& t);  // from both
  void Settle(Task* t);               // propagate settledness upward
  void UpdateHookDue(const Task& t);
  void MarkHooksStale(int64_t from);  // from and its ancestors

  RunInfo run_;
  int64_t last_seq_ = 0;
  std::vector<Task> tasks_;  // tasks_[id - 1]
  std::unordered_map<std::string, int64_t> by_dedup_key_;
  std::set<int64_t> pending_;
  std::map<std::string, std::set<int64_t>, std::less<>> pending_by_type_;
  std::set<int64_t> in_progress_;
  std::set<int64_t> hooks_due_;
  std::array<int64_t, 4> counts_{};
  int64_t settled_count_ = 0;
  int64_t reused_count_ = 0;
  int64_t imported_count_ = 0;
  // Tasks with a finally hook whose subtree is not settled: 0 in a run
  // that was never repaired by --retry-failed (nor imported with hooks).
  int64_t hooks_reopened_ = 0;
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_STATE_H_
