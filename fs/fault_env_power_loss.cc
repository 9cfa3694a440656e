// FaultInjectionEnv's power loss (fs/fault_env.h): what the disk keeps of
// the writes and directory entries that were not synced, whole
// (DropUnsyncedData) or by 512-byte sectors (SetPartialPowerLoss).
#include <algorithm>
#include <filesystem>
#include <set>

#include "fs/fault_env.h"

namespace wizq {

Status FaultInjectionEnv::DropUnsyncedData() {
  std::lock_guard<std::mutex> l(mu_);
  Status result;
  for (auto& [path, state] : files_) {
    Status s = DropFileUnsynced(path, state.get());
    if (result.ok()) result = s;
  }
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    Status s = UndoDirOp(*it);
    if (result.ok()) result = s;
  }
  pending_.clear();
  ResetLocked();
  return result;
}

Status FaultInjectionEnv::DropFileUnsynced(const std::string& path,
                                           FileState* state) {
  std::vector<Undo> undo;
  undo.swap(state->undo);
  uint64_t size;
  if (!base_->GetFileSize(path, &size).ok()) return Status::OK();  // Gone.
  const uint64_t synced = state->synced_size;

  // The synced bytes overwritten in place: put back (newest first, so the
  // oldest, synced, content ends up in place), all of them or, in a partial
  // power loss, sector by sector down to a random version. The base file is
  // written directly: these are not operations of the env.
  std::unique_ptr<RandomRWFile> file;
  auto put_back = [&](uint64_t offset, std::string_view bytes) -> Status {
    if (offset >= size) return Status::OK();  // Cut behind the env's back.
    bytes = bytes.substr(0, static_cast<size_t>(size - offset));
    if (file == nullptr) {
      WIZQ_RETURN_IF_ERROR(base_->NewRandomRWFile(path, &file));
    }
    return file->Write(offset, bytes);
  };
  // Sectors that keep the content they have from the undo entries seen so
  // far (a newer version survived): no older one is put back.
  std::set<uint64_t> kept;
  std::bernoulli_distribution coin(0.5);
  for (auto u = undo.rbegin(); u != undo.rend(); ++u) {
    if (!partial_power_loss_) {
      WIZQ_RETURN_IF_ERROR(put_back(u->offset, u->old));
      continue;
    }
    const uint64_t end = u->offset + u->old.size();
    for (uint64_t pos = u->offset; pos < end;) {
      const uint64_t sector = pos / kSectorSize;
      const uint64_t piece_end = std::min(end, (sector + 1) * kSectorSize);
      if (kept.count(sector) == 0) {
        if (coin(rng_)) {
          WIZQ_RETURN_IF_ERROR(
              put_back(pos, std::string_view(u->old).substr(
                                static_cast<size_t>(pos - u->offset),
                                static_cast<size_t>(piece_end - pos))));
        } else {
          kept.insert(sector);
        }
      }
      pos = piece_end;
    }
  }

  // What lies past the synced size: cut off, or, in a partial power loss,
  // a random part of it kept with some of its sectors never written.
  uint64_t keep = std::min(size, synced);
  if (partial_power_loss_ && size > synced) {
    keep = std::uniform_int_distribution<uint64_t>(synced, size)(rng_);
    for (uint64_t pos = synced; pos < keep;) {
      const uint64_t piece_end =
          std::min(keep, (pos / kSectorSize + 1) * kSectorSize);
      if (coin(rng_)) {
        WIZQ_RETURN_IF_ERROR(put_back(
            pos, std::string(static_cast<size_t>(piece_end - pos), '\0')));
      }
      pos = piece_end;
    }
    state->synced_size = keep;  // What survived is on disk now.
  }
  if (file != nullptr) {
    WIZQ_RETURN_IF_ERROR(file->Sync());
    WIZQ_RETURN_IF_ERROR(file->Close());
  }
  if (size > keep) WIZQ_RETURN_IF_ERROR(base_->TruncateFile(path, keep));
  state->size = keep;
  return Status::OK();
}

Status FaultInjectionEnv::RestoreFile(const std::string& path,
                                      const std::string& content) {
  std::unique_ptr<WritableFile> file;
  WIZQ_RETURN_IF_ERROR(base_->NewWritableFile(path, &file));
  WIZQ_RETURN_IF_ERROR(file->Append(content));
  WIZQ_RETURN_IF_ERROR(file->Sync());
  WIZQ_RETURN_IF_ERROR(file->Close());
  auto state = std::make_shared<FileState>();
  state->size = state->synced_size = content.size();
  files_[path] = state;
  return Status::OK();
}

Status FaultInjectionEnv::UndoDirOp(const DirOp& op) {
  switch (op.type) {
    case DirOp::kCreateFile: {
      files_.erase(op.path);
      Status s = base_->RemoveFile(op.path);
      return s.IsNotFound() ? Status::OK() : s;
    }
    case DirOp::kCreateDir: {
      const std::string prefix = op.path + "/";
      for (auto it = files_.lower_bound(prefix);
           it != files_.end() &&
           it->first.compare(0, prefix.size(), prefix) == 0;) {
        it = files_.erase(it);
      }
      std::error_code ec;
      std::filesystem::remove_all(op.path, ec);
      return ec ? Status::IOErrorFromErrno("remove", op.path, ec.value())
                : Status::OK();
    }
    case DirOp::kRename: {
      WIZQ_RETURN_IF_ERROR(base_->RenameFile(op.path, op.from));
      FilePtr moved = files_[op.path];
      files_.erase(op.path);
      files_.erase(op.from);
      if (moved != nullptr) files_[op.from] = moved;
      return op.had_old ? RestoreFile(op.path, op.old_content) : Status::OK();
    }
    case DirOp::kRemove:
      return op.had_old ? RestoreFile(op.path, op.old_content) : Status::OK();
  }
  return Status::OK();
}

}  // namespace wizq
