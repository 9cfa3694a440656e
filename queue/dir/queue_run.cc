// DirQueue: starting, resuming and archiving runs; transactions and
// checkpoints. (Loading is in queue.cc.)
#include <unistd.h>

#include "queue/dir/queue_impl.h"
#include "queue/dir/txn_impl.h"
#include "queue/import.h"
#include "util/crash_point.h"

namespace wizq {

namespace {

// StageImport (queue/import.h) on this store: each event staged here.
// REQUIRES: lock held.
Status StageImportHere(DirQueue* q, const RunImport& import) {
  if (q->state().total() != 0) {
    return Status::InvalidArgument("an import needs a run without tasks");
  }
  return StageImport(import, q->NowMs(), q->Sink());
}

}  // namespace
namespace {

const char kSnapshotFile[] = "queue.json";
const char kLogFile[] = "audit.jsonl";

std::string SafeName(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) {
    bool ok = isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
              c == '-';
    out.push_back(ok ? c : '_');
  }
  return out.empty() ? "run" : out;
}

std::string UtcStamp(int64_t ms) {
  time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace

Status DirQueue::ArchiveRun(const std::string& reason, OpenReport* report) {
  if (options_.end_orphan) {
    for (int64_t id : state_->in_progress()) {
      const Task& t = *state_->Find(id);
      if (!OnThisHost(t.claim_host)) continue;  // its processes are not here
      Status s = options_.end_orphan(t);
      if (!s.ok()) {
        return s.Annotate("cannot archive the previous run (" + reason +
                          ") while task " + std::to_string(id) +
                          " of it still runs");
      }
    }
  }
  archived_started_ms_ = state_->run().started_ms;
  const std::string archive = Path("archive");
  WIZQ_RETURN_IF_ERROR(env_->CreateDir(archive, 0700));
  std::string name =
      UtcStamp(NowMs()) + "-" + SafeName(state_->run().run_id, 64);
  std::string target = archive + "/" + name;
  for (int n = 2; env_->FileExists(target); n++) {
    target = archive + "/" + name + "-" + std::to_string(n);
  }
  WIZQ_RETURN_IF_ERROR(env_->CreateDir(target, 0700));
  // The snapshot first: if we die half-way, what is left (the log alone)
  // still describes the old run and is archived on the next start.
  std::vector<std::string> moves = {kSnapshotFile, kLogFile};
  std::vector<std::string> names;
  WIZQ_RETURN_IF_ERROR(env_->ListDir(dir_, &names));
  for (const std::string& n : names) {
    if (n.rfind("audit.torn-", 0) == 0) moves.push_back(n);
  }
  moves.push_back("tasks");
  for (const std::string& n : moves) {
    if (!env_->FileExists(Path(n))) continue;
    WIZQ_RETURN_IF_ERROR(env_->RenameFile(Path(n), target + "/" + n));
    if (n == kSnapshotFile) CrashPoint("archive.after_snapshot");
  }
  WIZQ_RETURN_IF_ERROR(env_->SyncDir(target));
  WIZQ_RETURN_IF_ERROR(env_->SyncDir(archive));
  WIZQ_RETURN_IF_ERROR(env_->SyncDir(dir_));
  WIZQ_RETURN_IF_ERROR(env_->CreateDir(Path("tasks"), 0700)
                           .Annotate("creating " + Path("tasks") + "/"));
  report->archived_to = target;
  report->archive_reason = reason;
  report->archived_unfinished = state_->started() &&
                                state_->run().status != RunStatus::kCompleted &&
                                state_->run().status != RunStatus::kFailed;
  state_ = std::make_unique<QueueState>();
  log_end_ = snapshot_offset_ = snapshot_size_ = 0;
  return Status::OK();
}

Status DirQueue::StartFresh(OpenReport* report) {
  // Idempotency keys are <run id, started_ms, task id>: a new run of the
  // same run id must not start in the archived run's millisecond.
  for (int i = 0; i < 50 && NowMs() <= archived_started_ms_; i++) {
    usleep(1000);
  }
  WIZQ_RETURN_IF_ERROR(
      LogWriter::Open(env_, Path(kLogFile), log_end_, 1, &writer_));
  WIZQ_RETURN_IF_ERROR(workers_.Register(options_.run_id, NowMs()));
  RunStarted started;
  started.format = kSnapshotVersion;
  started.run_id = options_.run_id;
  started.install_dir = options_.install_dir;
  started.wizq_version = options_.wizq_version;
  started.pid = getpid();
  started.input = options_.entry_input;
  started.workflow = options_.workflow_json;
  WIZQ_RETURN_IF_ERROR(Stage(started));
  if (!report->archived_to.empty()) {
    QueueArchived archived{report->archive_reason, report->archived_to,
                           options_.no_reuse, options_.from};
    WIZQ_RETURN_IF_ERROR(Stage(archived));
  }
  WIZQ_RETURN_IF_ERROR(Stage(WorkerJoined{workers_.self(), getpid()}));
  reclaimed_ = Reclaimed();
  TxnImpl txn(this, &reclaimed_);
  for (const NewTask& t : options_.initial_tasks) {
    int64_t id = 0;
    bool dup = false;
    WIZQ_RETURN_IF_ERROR(txn.Submit(t, &id, &dup));
  }
  if (options_.import != nullptr) {
    WIZQ_RETURN_IF_ERROR(StageImportHere(this, *options_.import));
  }
  report->tasks_pending = state_->count(TaskState::kPending);
  if (WantsRetry()) WIZQ_RETURN_IF_ERROR(StageRetries(report));
  WIZQ_RETURN_IF_ERROR(CommitStaged());
  report->action = OpenAction::kStartedFresh;
  return WriteCheckpointLocked();
}

Status DirQueue::ResumeRun(OpenReport* report) {
  report->tasks_pending = state_->count(TaskState::kPending);
  report->tasks_done = state_->count(TaskState::kDone);
  if ((state_->run().status == RunStatus::kCompleted ||
       state_->run().status == RunStatus::kFailed) &&
      !WantsRetry()) {
    report->action = OpenAction::kFinished;
    // At rest the snapshot is exact and the log has no free space: redo a
    // checkpoint or a trim that a crash cut short.
    if (log_end_ != snapshot_offset_) {
      WIZQ_RETURN_IF_ERROR(WriteCheckpointLocked());
    }
    uint64_t size = 0;
    Status s = env_->GetFileSize(Path(kLogFile), &size);
    if (s.IsNotFound()) return Status::OK();
    WIZQ_RETURN_IF_ERROR(s);
    return size > log_end_ ? env_->TruncateFile(Path(kLogFile), log_end_)
                           : Status::OK();
  }
  std::vector<LiveWorker> live;
  WIZQ_RETURN_IF_ERROR(workers_.ListLive(&live));
  const bool join = !live.empty();
  WIZQ_RETURN_IF_ERROR(LogWriter::Open(env_, Path(kLogFile), log_end_,
                                       state_->last_seq() + 1, &writer_));
  WIZQ_RETURN_IF_ERROR(workers_.Register(options_.run_id, NowMs()));
  WIZQ_RETURN_IF_ERROR(ReclaimLostClaims(&reclaimed_));
  report->tasks_reset = static_cast<int64_t>(reclaimed_.reset.size());
  report->tasks_lost = static_cast<int64_t>(reclaimed_.lost.size());
  report->tasks_adopted = static_cast<int64_t>(reclaimed_.adopt.size());
  report->tasks_pending = state_->count(TaskState::kPending);
  if (!join) {
    RunResumed resumed;
    resumed.tasks_pending = report->tasks_pending;
    resumed.tasks_done = report->tasks_done;
    resumed.tasks_reset = report->tasks_reset;
    resumed.tasks_lost = report->tasks_lost;
    resumed.tasks_adopted = report->tasks_adopted;
    WIZQ_RETURN_IF_ERROR(Stage(resumed));
  }
  WIZQ_RETURN_IF_ERROR(Stage(WorkerJoined{workers_.self(), getpid()}));
  if (options_.retry_failed) WIZQ_RETURN_IF_ERROR(StageRetries(report));
  WIZQ_RETURN_IF_ERROR(CommitStaged());
  report->action = join ? OpenAction::kJoined : OpenAction::kResumed;
  return Status::OK();
}

// Attaching never starts, resumes or archives: the run goes on as it was,
// with one more worker (which puts back what lost holders held, as any
// transaction does).
Status DirQueue::AttachRun(OpenReport* report) {
  report->tasks_pending = state_->count(TaskState::kPending);
  report->tasks_done = state_->count(TaskState::kDone);
  if (state_->run().status == RunStatus::kCompleted ||
      state_->run().status == RunStatus::kFailed) {
    report->action = OpenAction::kFinished;
    return Status::OK();
  }
  WIZQ_RETURN_IF_ERROR(LogWriter::Open(env_, Path(kLogFile), log_end_,
                                       state_->last_seq() + 1, &writer_));
  if (!options_.leases_only) {
    WIZQ_RETURN_IF_ERROR(workers_.Register(state_->run().run_id, NowMs()));
  }
  WIZQ_RETURN_IF_ERROR(ReclaimLostClaims(&reclaimed_));
  report->tasks_reset = static_cast<int64_t>(reclaimed_.reset.size());
  report->tasks_lost = static_cast<int64_t>(reclaimed_.lost.size());
  report->tasks_pending = state_->count(TaskState::kPending);
  if (!options_.leases_only) {
    WIZQ_RETURN_IF_ERROR(Stage(WorkerJoined{workers_.self(), getpid()}));
  }
  if (writer_->pending_events() > 0) WIZQ_RETURN_IF_ERROR(CommitStaged());
  report->action = OpenAction::kAttached;
  return Status::OK();
}

Status DirQueue::ApplyStaged(std::string_view event) {
  const std::string& line = writer_->EndEvent();
  Status s = state_->ApplyEvent(line);
  if (!s.ok()) {
    s = s.Annotate("internal error staging " + std::string(event));
    // The line is staged and the state may be half-changed: the batch
    // must not be committed even if the caller goes on regardless.
    if (stage_error_.ok()) stage_error_ = s;
    return s;
  }
  return Status::OK();
}

Status DirQueue::CommitStaged() {
  Status s = writer_->Commit();
  if (!s.ok()) return Poison(s);
  log_end_ = writer_->end();
  return Status::OK();
}

Status DirQueue::Poison(const Status& s) {
  if (poisoned_.ok()) {
    poisoned_ = s.Annotate(
        "the run stopped at its last durable state (run wizq again to resume)");
  }
  return poisoned_;
}

Status DirQueue::WriteCheckpointLocked() {
  std::string text = EncodeSnapshot(*state_, log_end_);
  Status s = env_->WriteFileAtomic(Path(kSnapshotFile), text);
  if (!s.ok()) return Poison(s);
  snapshot_offset_ = log_end_;
  snapshot_size_ = text.size();
  return Status::OK();
}

Status DirQueue::MaybeCheckpoint() {
  const uint64_t grown = log_end_ - snapshot_offset_;
  const bool at_rest = state_->run().status != RunStatus::kRunning;
  if ((at_rest && grown > 0) ||
      grown >
          std::max<uint64_t>(snapshot_size_, options_.checkpoint_min_bytes)) {
    return WriteCheckpointLocked();
  }
  return Status::OK();
}

Status DirQueue::ReloadAfterFailure() {
  writer_->Abandon();
  SnapshotHeader header;
  bool have_snapshot = false;
  Status s = LoadState(/*repair=*/true, &header, &have_snapshot);
  if (!s.ok()) return Poison(s);
  writer_->Reposition(log_end_, state_->last_seq() + 1);
  return Status::OK();
}

Status DirQueue::Transact(const std::function<Status(Txn&)>& fn) {
  std::lock_guard<std::mutex> guard(mu_);
  if (!poisoned_.ok()) return poisoned_;
  if (!writer_ || closed_) {
    return Status::InvalidArgument("the queue is closed or read-only");
  }
  WIZQ_RETURN_IF_ERROR(env_->LockFile(Path("lock"), true, &dir_lock_));
  Status s = [&]() -> Status {
    Status c = CatchUp();
    if (!c.ok()) return Poison(c);
    stage_error_ = Status::OK();
    Status r = ReclaimLostClaims(&reclaimed_);
    TxnImpl txn(this, &reclaimed_);
    if (r.ok()) r = fn(txn);
    if (r.ok()) r = stage_error_;
    if (!r.ok()) {
      // A failed reload poisons the queue, so every later call reports it;
      // this one reports fn's error, the cause.
      if (writer_->pending_events() > 0) ReloadAfterFailure().IgnoreError();
      return r;
    }
    WIZQ_RETURN_IF_ERROR(CommitStaged());
    return MaybeCheckpoint();
  }();
  dir_lock_.reset();
  return s;
}

Status DirQueue::Refresh() {
  std::lock_guard<std::mutex> guard(mu_);
  if (!poisoned_.ok()) return poisoned_;
  WIZQ_RETURN_IF_ERROR(env_->LockFile(Path("lock"), true, &dir_lock_));
  Status s =
      options_.mode == OpenMode::kReadOnly ? ReadLogTail(false) : CatchUp();
  dir_lock_.reset();
  return s;
}

Status DirQueue::Checkpoint() {
  std::lock_guard<std::mutex> guard(mu_);
  if (!poisoned_.ok()) return poisoned_;
  if (!writer_ || closed_) {
    return Status::InvalidArgument("the queue is closed or read-only");
  }
  WIZQ_RETURN_IF_ERROR(env_->LockFile(Path("lock"), true, &dir_lock_));
  Status s = CatchUp();
  if (s.ok()) s = WriteCheckpointLocked();
  dir_lock_.reset();
  return s;
}

Status DirQueue::Close() {
  std::lock_guard<std::mutex> guard(mu_);
  if (closed_ || !writer_) return Status::OK();
  closed_ = true;
  if (!poisoned_.ok()) return poisoned_;
  if (options_.leases_only) return Status::OK();  // no worker to sign off
  WIZQ_RETURN_IF_ERROR(env_->LockFile(Path("lock"), true, &dir_lock_));
  Status s = CatchUp();
  if (s.ok()) {
    s = Stage(WorkerLeft{workers_.self()});
  }
  if (s.ok()) s = CommitStaged();
  if (s.ok() && log_end_ != snapshot_offset_) s = WriteCheckpointLocked();
  if (s.ok()) s = writer_->TrimFreeSpace();
  if (s.ok()) s = workers_.Unregister();
  dir_lock_.reset();
  return s.ok() ? s : Poison(s);
}

}  // namespace wizq
