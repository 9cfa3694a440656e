// DirStore: the Store contract (queue/store.h) on a run's `.wizard/`
// directory. Internal to the directory store; callers open it through
// Store::Open.
//
// It is a thin layer over DirQueue (the log, the snapshot, the lock and the
// in-memory QueueState it replays): each contract verb is one DirQueue
// transition or a read of its state, caught up with the log first (a
// read-only store answers from the state it opened).
#ifndef WIZQ_QUEUE_DIR_DIR_STORE_H_
#define WIZQ_QUEUE_DIR_DIR_STORE_H_

#include <memory>
#include <string>

#include "queue/dir/dir_private.h"
#include "queue/dir/queue.h"
#include "queue/store.h"

namespace wizq {

class QueueState;

// A Store over a state that is already loaded and never changes: an
// archived run (Store::OpenRun). Transact is refused.
std::unique_ptr<Store> NewFrozenDirStore(Env* env, std::string run_dir,
                                         std::unique_ptr<QueueState> state);

class DirStore : public Store {
 public:
  static Status Open(const StoreOptions& options, std::unique_ptr<Store>* out,
                     OpenReport* report);

  Status Close() override;
  Status Transact(const std::function<Status(StoreTxn&)>& fn) override;
  Status GetRun(RunInfo* run) override;
  Status GetTask(int64_t id, Task* task) override;
  Status ListTasks(const TaskFilter& filter, std::vector<Task>* out) override;
  Status Counts(RunCounts* counts) override;
  Status ReadEvents(int64_t after_seq, size_t max,
                    std::vector<EventRecord>* events) override;
  Status WaitForChange(int64_t after_seq, int timeout_ms,
                       int64_t* seq) override;
  Status Workers(std::vector<WorkerInfo>* workers) override;
  Status ListRuns(std::vector<RunRef>* runs) override;
  Status OpenRun(const RunRef& run, std::unique_ptr<Store>* out) override;
  Status WhileCurrent(const std::function<Status()>& fn) override;
  const std::string& worker_id() const override { return queue_->worker_id(); }
  std::string DisplayLocation() const override { return options_.install_dir; }

 private:
  DirStore(const StoreOptions& options, Env* env, std::unique_ptr<Queue> queue);
  Status CatchUp();

  // What an archive renames away (the log and `tasks/`), as Open found
  // them: before reading the state, for a reader. WhileCurrent compares.
  struct Identity {
    bool exists[2] = {false, false};
    uint64_t device[2] = {0, 0}, inode[2] = {0, 0};
    bool operator==(const Identity& o) const;
  };
  static Status IdentityOf(Env* env, const std::string& wizard_dir,
                           Identity* id);
  Identity opened_;

  const StoreOptions options_;
  Env* const env_;
  std::unique_ptr<Queue> queue_;
  // ReadEvents' cursor: the log offset just past the line of seq
  // `cursor_seq_` (0: from the start).
  int64_t cursor_seq_ = 0;
  uint64_t cursor_offset_ = 0;
};

// Shared by DirStore and the frozen store: the contract's reads of one
// caught-up QueueState.
Status GetTaskFrom(const QueueState& s, int64_t id, Task* task);
void ListTasksFrom(const QueueState& s, const TaskFilter& f,
                   std::vector<Task>* out);
void CountsFrom(const QueueState& s, RunCounts* counts);

// The run's workers as `<wizard_dir>/workers` holds them (DirStore::Workers).
Status ProbeDirWorkers(Env* env, const std::string& wizard_dir,
                       std::vector<WorkerInfo>* workers);
// The runs of `.wizard/`: the current one (if any), then the archived ones,
// newest first; `current` is the loaded current run's info (may be null).
Status ListDirRuns(Env* env, const std::string& wizard_dir,
                   const RunInfo* current, std::vector<RunRef>* runs);
Status OpenDirRun(Env* env, const std::string& wizard_dir, const RunRef& run,
                  std::unique_ptr<Store>* out);
// Events of the log in `run_dir` with seq > after_seq, from byte `offset`
// (the end of a line known to hold seq <= after_seq; 0: the start).
// *end_seq/*end_offset: the last line returned and the offset past it.
Status ReadDirEvents(Env* env, const std::string& run_dir, int64_t after_seq,
                     size_t max, uint64_t offset,
                     std::vector<EventRecord>* events, int64_t* end_seq,
                     uint64_t* end_offset);

}  // namespace wizq

#endif  // WIZQ_QUEUE_DIR_DIR_STORE_H_
