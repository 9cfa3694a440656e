// The queue-directory implementation of Queue (queue/dir/queue.h). Internal.
#ifndef WIZQ_QUEUE_QUEUE_IMPL_H_
#define WIZQ_QUEUE_QUEUE_IMPL_H_

#include <memory>
#include <mutex>
#include <string>

#include "audit/log.h"
#include "fs/env.h"
#include "queue/claim_holder.h"
#include "queue/dir/dir_private.h"
#include "queue/dir/queue.h"
#include "queue/dir/snapshot.h"
#include "queue/dir/workers.h"
#include "queue/events.h"

namespace wizq {

class DirQueue : public Queue {
 public:
  DirQueue(const QueueOptions& options, Env* env);
  ~DirQueue() override;

  Status Close() override;
  Status Transact(const std::function<Status(Txn&)>& fn) override;
  Status Refresh() override;
  const QueueState& state() const override { return *state_; }
  const std::string& worker_id() const override { return workers_.self(); }
  const std::string& wizard_dir() const override { return dir_; }
  Status Checkpoint() override;

  // Open() in steps; see queue.cc.
  Status OpenLocked(OpenReport* report);

  // Used by the Txn: stages one event (queue/events.h) and applies its
  // line to the state, as a reader of the log would.
  template <typename E>
  Status Stage(const E& event) {
    event.EncodeTo(writer_->BeginEvent(E::kName, NowMs()));
    return ApplyStaged(E::kName);
  }
  // Stage() of whichever event `event` holds, and the same as the sink of
  // the rules every store shares (queue/txn_rules.h, queue/import.h).
  Status StageAny(const Event& event) {
    return StageEvent(event, [this](const auto& e) { return Stage(e); });
  }
  EventSink Sink() {
    return [this](const Event& e) { return StageAny(e); };
  }
  // Puts back the in_progress tasks whose holder is lost (staged, not
  // committed): pending if attempts remain, else failed with worker_lost.
  // REQUIRES: lock held, state caught up, a writer.
  Status ReclaimLostClaims(Reclaimed* out);
  WorkerRegistry& workers() { return workers_; }
  Env* env() const { return env_; }
  const QueueOptions& options() const { return options_; }
  // This worker's host (QueueOptions::host) as claims record it.
  const std::string& host_key() const { return host_key_; }
  int64_t NowMs() const {
    return static_cast<int64_t>(env_->NowMicros() / 1000);
  }

 private:
  Status PrepareDirectory();
  Status LoadState(bool repair, SnapshotHeader* header, bool* have_snapshot);
  Status ReadLogTail(bool repair);
  Status RefuseIfLive();
  Status CatchUp();
  Status ReloadAfterFailure();
  Status ArchiveRun(const std::string& reason, OpenReport* report);
  Status StartFresh(OpenReport* report);
  Status ResumeRun(OpenReport* report);
  bool WantsRetry() const;  // queue/dir/retry.cc
  Status StageRetries(OpenReport* report);
  Status AttachRun(OpenReport* report);
  Status CheckAttachable(bool have_snapshot, int version) const;
  Status ApplyStaged(std::string_view event);
  bool HolderLost(const ClaimHolder& holder, int64_t now_ms);
  Status PutBack(const Task& t, Reclaimed* out);
  // Whether a claim recorded with `claim_host` was made on this worker's
  // host (or shares its workspace). A claim of a log from before hosts
  // were recorded has none and counts as this host's.
  bool OnThisHost(const std::string& claim_host) const;
  bool SharesWorkspace(const std::string& claim_host) const;
  Status TimeOut(const Task& t, int64_t now_ms, Reclaimed* out);
  Status CommitStaged();
  Status MaybeCheckpoint();
  Status WriteCheckpointLocked();
  Status Poison(const Status& s);
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  QueueOptions options_;
  Env* env_;
  std::string host_key_;  // options_.host.Key()
  std::string dir_;       // <install_dir>/.wizard
  std::mutex mu_;
  std::unique_ptr<FileLock> dir_lock_;  // held during Open and Transact
  std::unique_ptr<QueueState> state_;
  std::unique_ptr<LogWriter> writer_;
  uint64_t log_end_ = 0;          // bytes of audit.jsonl applied
  uint64_t snapshot_offset_ = 0;  // log offset the last snapshot covers
  uint64_t snapshot_size_ = 0;
  WorkerRegistry workers_;
  std::string torn_tail_path_;
  uint64_t torn_bytes_ = 0;  // left at the end of the log by the last read
  Status poisoned_;
  Status stage_error_;   // a Stage() in the current Transact failed
  Reclaimed reclaimed_;  // by the current (or last) Transact
  bool closed_ = false;
  int64_t archived_started_ms_ = 0;  // of the run ArchiveRun moved away
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_QUEUE_IMPL_H_
