#include "queue/dir/queue.h"

#include <unistd.h>

#include "queue/dir/queue_impl.h"
#include "queue/dir/txn_impl.h"
#include "util/canonical_json.h"
#include "util/hash.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

const char kSnapshotFile[] = "queue.json";
const char kLogFile[] = "audit.jsonl";

}  // namespace

Status Queue::Open(const QueueOptions& options, std::unique_ptr<Queue>* queue,
                   OpenReport* report) {
  Env* env = options.env ? options.env : Env::Posix();
  auto q = std::make_unique<DirQueue>(options, env);
  OpenReport local;
  if (report) *report = OpenReport();  // no stale fields from a reused one
  WIZQ_RETURN_IF_ERROR(q->OpenLocked(report ? report : &local));
  *queue = std::move(q);
  return Status::OK();
}

DirQueue::DirQueue(const QueueOptions& options, Env* env)
    : options_(options),
      env_(env),
      dir_(WizardDir(options.install_dir)),
      state_(std::make_unique<QueueState>()),
      workers_(env, dir_ + "/workers") {}

DirQueue::~DirQueue() = default;

Status DirQueue::PrepareDirectory() {
  const bool must_exist = options_.mode == OpenMode::kReadOnly ||
                          options_.mode == OpenMode::kAttach;
  if (must_exist && !env_->FileExists(dir_)) {
    return Status::NotFound("no wizq run in " + options_.install_dir +
                            " (it has no .wizard directory)");
  }
  // Errors name the directory being created (a failed fsync names only
  // its parent).
  auto create = [&](const std::string& path) {
    return env_->CreateDir(path, 0700).Annotate("creating " + path + "/");
  };
  WIZQ_RETURN_IF_ERROR(create(dir_));
  FileInfo info;
  if (env_->GetFileInfo(dir_, &info).ok() && info.uid != geteuid()) {
    return Status::IOError(dir_ + " belongs to another user (uid " +
                           std::to_string(info.uid) +
                           "); wizq refuses to share its state with them");
  }
  if (options_.mode == OpenMode::kReadOnly) return Status::OK();
  WIZQ_RETURN_IF_ERROR(create(dir_ + "/workers"));
  return create(dir_ + "/tasks");
}

Status DirQueue::OpenLocked(OpenReport* report) {
  WIZQ_RETURN_IF_ERROR(PrepareDirectory());
  if (options_.mode != OpenMode::kReadOnly) {  // a reader claims nothing
    if (options_.host.empty()) {
      WIZQ_RETURN_IF_ERROR(
          HostId::Current(env_, options_.install_dir, &options_.host));
    }
    host_key_ = options_.host.Key();
  }
  // A reader never creates the lock file.
  Status locked =
      options_.mode == OpenMode::kReadOnly && !env_->FileExists(Path("lock"))
          ? Status::NotFound(Path("lock"))
          : env_->LockFile(Path("lock"), /*wait=*/true, &dir_lock_);
  // A reader of a read-only copy (a read-only mount, a directory it may not
  // write) looks without the lock: the snapshot is replaced by rename and
  // every log line carries a CRC, so at worst a batch being written reads
  // as a torn tail and is left out (a reader never repairs).
  if (!locked.ok() && options_.mode != OpenMode::kReadOnly) return locked;
  Status s = [&]() -> Status {
    SnapshotHeader header;
    bool have_snapshot = false;
    const OpenMode mode = options_.mode;
    WIZQ_RETURN_IF_ERROR(
        LoadState(mode != OpenMode::kReadOnly, &header, &have_snapshot));
    report->torn_tail_path = torn_tail_path_;
    report->torn_tail_bytes = torn_bytes_;
    const int version =
        have_snapshot ? header.version : state_->run().format_version;
    if (version > kSnapshotVersion) {
      return Status::NotSupported(
          dir_ + " holds a run written by a newer wizq (format version " +
          std::to_string(version) + "; this wizq reads version " +
          std::to_string(kSnapshotVersion) +
          "). Upgrade wizq; the files were left untouched");
    }
    if (mode == OpenMode::kReadOnly) {
      report->action = OpenAction::kReadOnly;
      return Status::OK();
    }
    if (mode == OpenMode::kAttach) {
      WIZQ_RETURN_IF_ERROR(CheckAttachable(have_snapshot, version));
      return AttachRun(report);
    }
    if (!state_->started() && (!have_snapshot || version == kSnapshotVersion)) {
      return StartFresh(report);
    }
    std::string reason;
    if (version < kSnapshotVersion) {
      reason = "older format version " + std::to_string(version);
    } else if (state_->run().run_id != options_.run_id) {
      reason = "a different run (" + state_->run().run_id + ")";
    } else if (state_->run().install_dir != options_.install_dir) {
      reason = "recorded for another install_dir (" +
               state_->run().install_dir + ")";
    } else if (mode == OpenMode::kFresh) {
      reason = "--fresh";
    }
    if (reason.empty()) return ResumeRun(report);
    WIZQ_RETURN_IF_ERROR(RefuseIfLive());
    WIZQ_RETURN_IF_ERROR(ArchiveRun(reason, report));
    return StartFresh(report);
  }();
  dir_lock_.reset();
  return s;
}

// Attach takes whatever run is there, but never archives: a run this wizq
// would archive (an older format) cannot be attached to.
Status DirQueue::CheckAttachable(bool have_snapshot, int version) const {
  if (version < kSnapshotVersion && (have_snapshot || state_->started())) {
    return Status::NotSupported(
        dir_ + " holds a run of an older format version " +
        std::to_string(version) + " (this wizq reads version " +
        std::to_string(kSnapshotVersion) +
        "); it cannot be attached to. The files were left untouched");
  }
  if (!state_->started()) {
    return Status::NotFound("no wizq run in " + options_.install_dir +
                            " to attach to (start one with wizq run)");
  }
  return Status::OK();
}

Status DirQueue::RefuseIfLive() {
  std::vector<LiveWorker> live;
  WIZQ_RETURN_IF_ERROR(workers_.ListLive(&live));
  if (live.empty()) return Status::OK();
  std::string pids;
  for (const LiveWorker& w : live) {
    if (!pids.empty()) pids += ", ";
    pids += "pid " + std::to_string(w.pid);
  }
  std::string run = state_->run().run_id.empty() ? "?" : state_->run().run_id;
  return Status::Busy(options_.install_dir + " is in use by run " + run +
                      ", which still has live workers: " + pids +
                      ". This run (" + options_.run_id +
                      ") cannot start there"
                      " until that one finishes or those processes stop");
}

Status DirQueue::LoadState(bool repair, SnapshotHeader* header,
                           bool* have_snapshot) {
  state_ = std::make_unique<QueueState>();
  log_end_ = snapshot_offset_ = snapshot_size_ = 0;
  std::string text;
  Status s = env_->ReadFile(Path(kSnapshotFile), &text);
  *have_snapshot = s.ok();
  if (s.ok()) {
    WIZQ_RETURN_IF_ERROR(
        DecodeSnapshot(Path(kSnapshotFile), text, header, state_.get()));
    if (header->version != kSnapshotVersion) return Status::OK();
    snapshot_offset_ = log_end_ = header->audit_offset;
    snapshot_size_ = text.size();
  } else if (!s.IsNotFound()) {
    return s;
  }
  return ReadLogTail(repair);
}

Status DirQueue::ReadLogTail(bool repair) {
  const std::string path = Path(kLogFile);
  std::string data;
  if (writer_ != nullptr) {
    // The hot path: a probe through the writer's descriptor, no stat.
    WIZQ_RETURN_IF_ERROR(writer_->ReadFrom(log_end_, &data));
    if (data.empty()) return Status::OK();
  } else {
    uint64_t size = 0;
    Status s = env_->GetFileSize(path, &size);
    if (s.IsNotFound() && log_end_ == 0) return Status::OK();
    WIZQ_RETURN_IF_ERROR(s);
    if (size < log_end_) {
      return Status::Corruption(
          path + " is " + std::to_string(size) + " bytes but " +
          Path(kSnapshotFile) + " covers it up to byte offset " +
          std::to_string(log_end_) +
          "; the log was cut or replaced after the snapshot was written. "
          "Both files were left untouched: restore the full audit.jsonl, or "
          "move the .wizard directory aside to start over");
    }
    if (size == log_end_) return Status::OK();
    WIZQ_RETURN_IF_ERROR(env_->ReadFileFrom(path, log_end_, &data));
  }
  LogParseResult parsed;
  WIZQ_RETURN_IF_ERROR(
      ParseLog(path, data, log_end_, state_->last_seq() + 1, &parsed));
  for (const LogRecord& rec : parsed.records) {
    Status a = state_->ApplyEvent(rec.line);
    if (!a.ok()) {
      return a.Annotate(path + " at byte offset " + std::to_string(rec.offset));
    }
    if (!state_->started()) {
      return Status::Corruption(path + " does not begin with run_started");
    }
  }
  log_end_ = parsed.committed_end;
  torn_bytes_ = parsed.torn_bytes;
  // A log a newer wizq wrote is refused by the caller: leave it as it is.
  if (parsed.torn_bytes > 0 && repair &&
      state_->run().format_version <= kSnapshotVersion) {
    WIZQ_RETURN_IF_ERROR(
        SetAsideTornTail(env_, path, log_end_, &torn_tail_path_));
  }
  return Status::OK();
}

Status DirQueue::CatchUp() {
  WIZQ_RETURN_IF_ERROR(ReadLogTail(/*repair=*/true));
  if (writer_) writer_->Reposition(log_end_, state_->last_seq() + 1);
  return Status::OK();
}

}  // namespace wizq
