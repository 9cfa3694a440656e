#include "fs/fault_env.h"

#include <algorithm>
#include <filesystem>

namespace wizq {

namespace {

// The key for a path in the env's tables: lexically normal, no trailing
// slash, so "d/x", "d//x" and "d/./x" name one file and DirName() of any of
// them matches the "d" given to SyncDir.
std::string Norm(const std::string& path) {
  std::string p = std::filesystem::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace

// A WritableFile whose operations go through the env's fault machinery. The
// FileState is shared with the env's table, so it follows renames.
class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultInjectionEnv* env, std::unique_ptr<WritableFile> base,
                    FaultInjectionEnv::FilePtr state)
      : env_(env), base_(std::move(base)), state_(std::move(state)) {}

  Status Append(std::string_view data) override {
    return env_->FileAppend(base_.get(), state_.get(), data);
  }
  Status Sync() override { return env_->FileSync(base_.get(), state_.get()); }
  Status Truncate(uint64_t size) override {
    return env_->FileTruncate(base_.get(), state_.get(), size);
  }
  Status Close() override { return env_->FileClose(base_.get()); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectionEnv* const env_;
  const std::unique_ptr<WritableFile> base_;
  const FaultInjectionEnv::FilePtr state_;
};

// A RandomRWFile whose operations go through the env's fault machinery,
// sharing its FileState with the env's table like FaultWritableFile.
class FaultRandomRWFile final : public RandomRWFile {
 public:
  FaultRandomRWFile(FaultInjectionEnv* env, std::unique_ptr<RandomRWFile> base,
                    FaultInjectionEnv::FilePtr state)
      : env_(env), base_(std::move(base)), state_(std::move(state)) {}

  Status Read(uint64_t offset, size_t n, std::string* data) override {
    return env_->RandomRead(base_.get(), offset, n, data);
  }
  Status Write(uint64_t offset, std::string_view data) override {
    return env_->RandomWrite(base_.get(), state_.get(), offset, data);
  }
  Status Sync() override { return env_->RandomSync(base_.get(), state_.get()); }
  Status Size(uint64_t* size) override {
    return env_->RandomSize(base_.get(), size);
  }
  Status Truncate(uint64_t size) override {
    return env_->RandomTruncate(base_.get(), state_.get(), size);
  }
  Status Close() override { return env_->RandomClose(base_.get()); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectionEnv* const env_;
  const std::unique_ptr<RandomRWFile> base_;
  const FaultInjectionEnv::FilePtr state_;
};

FaultInjectionEnv::FaultInjectionEnv(Env* base) : base_(base), rng_(301) {}

FaultInjectionEnv::~FaultInjectionEnv() = default;

void FaultInjectionEnv::CrashAtOp(int64_t k) {
  std::lock_guard<std::mutex> l(mu_);
  crash_at_ = k;
}

void FaultInjectionEnv::SetTornWrites(bool torn) {
  std::lock_guard<std::mutex> l(mu_);
  torn_writes_ = torn;
}

void FaultInjectionEnv::SetPartialPowerLoss(bool on) {
  std::lock_guard<std::mutex> l(mu_);
  partial_power_loss_ = on;
}

void FaultInjectionEnv::SetSeed(uint32_t seed) {
  std::lock_guard<std::mutex> l(mu_);
  rng_.seed(seed);
}

bool FaultInjectionEnv::crashed() const {
  std::lock_guard<std::mutex> l(mu_);
  return crashed_;
}

int64_t FaultInjectionEnv::op_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return op_count_;
}

void FaultInjectionEnv::FailOp(OpKind kind, int64_t nth, int err,
                               bool persistent) {
  std::lock_guard<std::mutex> l(mu_);
  faults_.push_back(Fault{kind, nth, err, persistent, 0});
}

void FaultInjectionEnv::ClearFaults() {
  std::lock_guard<std::mutex> l(mu_);
  faults_.clear();
}

void FaultInjectionEnv::ResetState() {
  std::lock_guard<std::mutex> l(mu_);
  ResetLocked();
}

void FaultInjectionEnv::ResetLocked() {
  crash_at_ = 0;
  op_count_ = 0;
  crashed_ = false;
  faults_.clear();
}

Status FaultInjectionEnv::CrashedError(std::string_view op,
                                       const std::string& path) const {
  std::string msg = "simulated crash: ";
  msg.append(op).append(" ").append(path).append(" not performed");
  return Status::IOError(msg);
}

Status FaultInjectionEnv::CheckNotCrashed(std::string_view op,
                                          const std::string& path) const {
  return crashed_ ? CrashedError(op, path) : Status::OK();
}

Status FaultInjectionEnv::BeginOp(OpKind kind, std::string_view op,
                                  const std::string& path, bool* may_tear) {
  if (may_tear != nullptr) *may_tear = false;
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed(op, path));
  ++op_count_;
  if (op_count_ == crash_at_) {
    crashed_ = true;
    if (may_tear != nullptr) *may_tear = true;
    return CrashedError(op, path).Annotate("at op " +
                                           std::to_string(op_count_));
  }
  for (Fault& f : faults_) {
    if (f.kind != kAny && f.kind != kind) continue;
    ++f.seen;
    if (f.seen == f.nth || (f.persistent && f.seen > f.nth)) {
      if (may_tear != nullptr) *may_tear = true;
      return Status::IOErrorFromErrno(op, path, f.err);
    }
  }
  return Status::OK();
}

size_t FaultInjectionEnv::TornLength(size_t len) {
  if (len < 2) return 0;
  return std::uniform_int_distribution<size_t>(1, len - 1)(rng_);
}

FaultInjectionEnv::FilePtr FaultInjectionEnv::Track(const std::string& path,
                                                    bool existed) {
  FilePtr& state = files_[Norm(path)];
  uint64_t size = 0;
  if (existed && !base_->GetFileSize(path, &size).ok()) size = 0;
  if (state == nullptr) {
    state = std::make_shared<FileState>();
    // Content that was there before this env saw the file counts as synced.
    state->synced_size = size;
  }
  state->size = size;
  state->synced_size = std::min(state->synced_size, size);
  TrimUndo(state.get(), state->synced_size);
  return state;
}

void FaultInjectionEnv::TrimUndo(FileState* state, uint64_t size) {
  auto& undo = state->undo;
  undo.erase(std::remove_if(undo.begin(), undo.end(),
                            [&](const Undo& u) { return u.offset >= size; }),
             undo.end());
  for (Undo& u : undo) {
    if (u.offset + u.old.size() > size) u.old.resize(size - u.offset);
  }
}

Status FaultInjectionEnv::SyncedContent(const std::string& path,
                                        std::string* content) {
  WIZQ_RETURN_IF_ERROR(base_->ReadFile(path, content));
  auto it = files_.find(Norm(path));
  if (it == files_.end()) return Status::OK();
  const FileState& state = *it->second;
  for (auto u = state.undo.rbegin(); u != state.undo.rend(); ++u) {
    if (u->offset >= content->size()) continue;
    const size_t n =
        std::min<uint64_t>(u->old.size(), content->size() - u->offset);
    content->replace(u->offset, n, u->old, 0, n);
  }
  if (content->size() > state.synced_size) content->resize(state.synced_size);
  return Status::OK();
}

Status FaultInjectionEnv::NewAppendableFile(
    const std::string& path, std::unique_ptr<WritableFile>* result) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kAny, "open", path));
  const bool existed = base_->FileExists(path);
  std::unique_ptr<WritableFile> file;
  WIZQ_RETURN_IF_ERROR(base_->NewAppendableFile(path, &file));
  FilePtr state = Track(path, existed);
  if (!existed) {
    pending_.emplace_back(DirOp::kCreateFile, Norm(path));
    WIZQ_RETURN_IF_ERROR(SyncDirLocked(DirName(path)));
  }
  *result = std::make_unique<FaultWritableFile>(this, std::move(file), state);
  return Status::OK();
}

Status FaultInjectionEnv::NewRandomRWFile(
    const std::string& path, std::unique_ptr<RandomRWFile>* result) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kAny, "open", path));
  const bool existed = base_->FileExists(path);
  std::unique_ptr<RandomRWFile> file;
  WIZQ_RETURN_IF_ERROR(base_->NewRandomRWFile(path, &file));
  FilePtr state = Track(path, existed);
  if (!existed) {
    pending_.emplace_back(DirOp::kCreateFile, Norm(path));
    WIZQ_RETURN_IF_ERROR(SyncDirLocked(DirName(path)));
  }
  *result = std::make_unique<FaultRandomRWFile>(this, std::move(file), state);
  return Status::OK();
}

Status FaultInjectionEnv::NewWritableFile(
    const std::string& path, std::unique_ptr<WritableFile>* result) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kAny, "open", path));
  const bool existed = base_->FileExists(path);
  std::unique_ptr<WritableFile> file;
  WIZQ_RETURN_IF_ERROR(base_->NewWritableFile(path, &file));
  // The truncation is not durable either: model the old content as lost.
  FilePtr state = std::make_shared<FileState>();
  files_[Norm(path)] = state;
  if (!existed) {
    pending_.emplace_back(DirOp::kCreateFile, Norm(path));
  }
  *result = std::make_unique<FaultWritableFile>(this, std::move(file), state);
  return Status::OK();
}

Status FaultInjectionEnv::FileAppend(WritableFile* base, FileState* state,
                                     std::string_view data) {
  std::lock_guard<std::mutex> l(mu_);
  bool may_tear;
  Status s = BeginOp(kWrite, "append", base->path(), &may_tear);
  if (!s.ok()) {
    const size_t torn = may_tear && torn_writes_ ? TornLength(data.size()) : 0;
    if (torn > 0 && base->Append(data.substr(0, torn)).ok()) {
      state->size += torn;
    }
    return s;
  }
  s = base->Append(data);
  if (s.ok()) state->size += data.size();
  return s;
}

Status FaultInjectionEnv::FileSync(WritableFile* base, FileState* state) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kSync, "fdatasync", base->path()));
  WIZQ_RETURN_IF_ERROR(base->Sync());
  state->synced_size = state->size;
  return Status::OK();
}

Status FaultInjectionEnv::FileTruncate(WritableFile* base, FileState* state,
                                       uint64_t size) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kAny, "truncate", base->path()));
  WIZQ_RETURN_IF_ERROR(base->Truncate(size));
  state->size = size;
  state->synced_size = std::min(state->synced_size, size);
  return Status::OK();
}

Status FaultInjectionEnv::FileClose(WritableFile* base) {
  std::lock_guard<std::mutex> l(mu_);
  Status s = base->Close();  // Always release the descriptor.
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed("close", base->path()));
  return s;
}

Status FaultInjectionEnv::RandomRead(RandomRWFile* base, uint64_t offset,
                                     size_t n, std::string* data) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed("read", base->path()));
  return base->Read(offset, n, data);
}

Status FaultInjectionEnv::RandomWrite(RandomRWFile* base, FileState* state,
                                      uint64_t offset, std::string_view data) {
  std::lock_guard<std::mutex> l(mu_);
  bool may_tear;
  Status s = BeginOp(kWrite, "pwrite", base->path(), &may_tear);
  if (!s.ok()) {
    const size_t torn = may_tear && torn_writes_ ? TornLength(data.size()) : 0;
    if (torn == 0) return s;
    data = data.substr(0, torn);
  }
  // Keep what the write replaces in the synced part, for a power loss.
  if (offset < state->synced_size && !data.empty()) {
    const uint64_t end =
        std::min<uint64_t>(offset + data.size(), state->synced_size);
    Undo undo{offset, ""};
    Status r = base->Read(offset, static_cast<size_t>(end - offset), &undo.old);
    if (!r.ok()) return s.ok() ? r : s;
    if (!undo.old.empty()) state->undo.push_back(std::move(undo));
  }
  Status w = base->Write(offset, data);
  if (w.ok()) {
    state->size = std::max<uint64_t>(state->size, offset + data.size());
  }
  return s.ok() ? w : s;
}

Status FaultInjectionEnv::RandomSync(RandomRWFile* base, FileState* state) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kSync, "fdatasync", base->path()));
  WIZQ_RETURN_IF_ERROR(base->Sync());
  state->synced_size = state->size;
  state->undo.clear();
  return Status::OK();
}

Status FaultInjectionEnv::RandomSize(RandomRWFile* base, uint64_t* size) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed("fstat", base->path()));
  return base->Size(size);
}

Status FaultInjectionEnv::RandomTruncate(RandomRWFile* base, FileState* state,
                                         uint64_t size) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kAny, "truncate", base->path()));
  WIZQ_RETURN_IF_ERROR(base->Truncate(size));
  state->size = size;
  state->synced_size = std::min(state->synced_size, size);
  TrimUndo(state, state->synced_size);
  return Status::OK();
}

Status FaultInjectionEnv::RandomClose(RandomRWFile* base) {
  std::lock_guard<std::mutex> l(mu_);
  Status s = base->Close();  // Always release the descriptor.
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed("close", base->path()));
  return s;
}

Status FaultInjectionEnv::ReadFile(const std::string& path, std::string* data) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed("read", path));
  return base_->ReadFile(path, data);
}

Status FaultInjectionEnv::ReadFileFrom(const std::string& path, uint64_t offset,
                                       std::string* data) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed("read", path));
  return base_->ReadFileFrom(path, offset, data);
}

Status FaultInjectionEnv::ReadFilePrefix(const std::string& path, size_t limit,
                                         std::string* data) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed("read", path));
  return base_->ReadFilePrefix(path, limit, data);
}

Status FaultInjectionEnv::ReadUserFile(const std::string& path,
                                       std::string* data) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed("read", path));
  return base_->ReadUserFile(path, data);
}

Status FaultInjectionEnv::GetFileInfo(const std::string& path, FileInfo* info) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed("lstat", path));
  return base_->GetFileInfo(path, info);
}

bool FaultInjectionEnv::FileExists(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  return !crashed_ && base_->FileExists(path);
}

Status FaultInjectionEnv::GetFileSize(const std::string& path, uint64_t* size) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed("stat", path));
  return base_->GetFileSize(path, size);
}

Status FaultInjectionEnv::TruncateFile(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kAny, "truncate", path));
  WIZQ_RETURN_IF_ERROR(base_->TruncateFile(path, size));  // Syncs.
  auto it = files_.find(Norm(path));
  if (it != files_.end()) {
    it->second->size = it->second->synced_size = size;
    it->second->undo.clear();  // The sync made every byte durable.
  }
  return Status::OK();
}

Status FaultInjectionEnv::RenameFile(const std::string& from,
                                     const std::string& to) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kRename, "rename", from + " to " + to));
  DirOp op(DirOp::kRename, Norm(to), Norm(from));
  if (base_->FileExists(to)) {
    op.had_old = true;
    WIZQ_RETURN_IF_ERROR(SyncedContent(to, &op.old_content));
  }
  WIZQ_RETURN_IF_ERROR(base_->RenameFile(from, to));
  FilePtr moved = files_[op.from];
  files_.erase(op.from);
  files_.erase(op.path);
  if (moved != nullptr) files_[op.path] = moved;
  pending_.push_back(std::move(op));
  return Status::OK();
}

Status FaultInjectionEnv::RemoveFile(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kAny, "unlink", path));
  DirOp op(DirOp::kRemove, Norm(path));
  if (base_->FileExists(path)) {
    op.had_old = true;
    WIZQ_RETURN_IF_ERROR(SyncedContent(path, &op.old_content));
  }
  WIZQ_RETURN_IF_ERROR(base_->RemoveFile(path));
  files_.erase(op.path);
  pending_.push_back(std::move(op));
  return Status::OK();
}

Status FaultInjectionEnv::CreateDir(const std::string& path, int mode) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kAny, "mkdir", path));
  const bool existed = base_->FileExists(path);
  WIZQ_RETURN_IF_ERROR(base_->CreateDir(path, mode));
  if (existed) return Status::OK();
  pending_.emplace_back(DirOp::kCreateDir, Norm(path));
  return SyncDirLocked(DirName(path));
}

Status FaultInjectionEnv::CreateDirs(const std::string& path, int mode) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kAny, "mkdir", path));
  // The missing components, innermost first.
  std::vector<std::string> missing;
  for (std::string p = Norm(path); !base_->FileExists(p); p = DirName(p)) {
    missing.push_back(p);
    if (DirName(p) == p) break;
  }
  WIZQ_RETURN_IF_ERROR(base_->CreateDirs(path, mode));
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    pending_.emplace_back(DirOp::kCreateDir, *it);  // oldest first
  }
  return Status::OK();
}

Status FaultInjectionEnv::SyncDir(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  return SyncDirLocked(path);
}

Status FaultInjectionEnv::SyncDirLocked(const std::string& path) {
  WIZQ_RETURN_IF_ERROR(BeginOp(kSync, "fsync", path));
  WIZQ_RETURN_IF_ERROR(base_->SyncDir(path));
  const std::string dir = Norm(path);
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [&](const DirOp& op) { return op.dir == dir; }),
                 pending_.end());
  return Status::OK();
}

Status FaultInjectionEnv::ListDir(const std::string& path,
                                  std::vector<std::string>* names) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(CheckNotCrashed("list", path));
  return base_->ListDir(path, names);
}

Status FaultInjectionEnv::LockFile(const std::string& path, bool wait,
                                   std::unique_ptr<FileLock>* lock) {
  {
    std::lock_guard<std::mutex> l(mu_);
    WIZQ_RETURN_IF_ERROR(BeginOp(kAny, "lock", path));
  }
  // Not under mu_: a waiting lock must not block the env for other threads.
  return base_->LockFile(path, wait, lock);
}

Status FaultInjectionEnv::OpenDescriptor(const std::string& path, int flags,
                                         int* fd) {
  std::lock_guard<std::mutex> l(mu_);
  WIZQ_RETURN_IF_ERROR(BeginOp(kOpenDescriptor, "open", path));
  return base_->OpenDescriptor(path, flags, fd);
}

uint64_t FaultInjectionEnv::NowMicros() { return base_->NowMicros(); }

}  // namespace wizq
