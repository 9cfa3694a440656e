#include "fs/env.h"

#include "util/crash_point.h"

namespace wizq {

namespace {

// Writes, syncs and closes `path` (created or truncated).
Status WriteAndSync(Env* env, const std::string& path, std::string_view data) {
  std::unique_ptr<WritableFile> file;
  WIZQ_RETURN_IF_ERROR(env->NewWritableFile(path, &file));
  WIZQ_RETURN_IF_ERROR(file->Append(data));
  WIZQ_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

}  // namespace

Status Env::WriteFileAtomic(const std::string& path, std::string_view data) {
  const std::string tmp = path + ".tmp";
  Status s = WriteAndSync(this, tmp, data);
  if (!s.ok()) {
    // Best effort: a stale temp file is harmless (the next write truncates
    // it), and the caller needs the write's error, not the cleanup's.
    RemoveFile(tmp).IgnoreError();
    return s.Annotate("writing " + path);
  }
  CrashPoint("atomic_write.after_tmp_sync");
  s = RenameFile(tmp, path);
  if (!s.ok()) {
    RemoveFile(tmp).IgnoreError();  // Best effort, as above.
    return s.Annotate("writing " + path);
  }
  CrashPoint("atomic_write.after_rename");
  return SyncDir(DirName(path)).Annotate("writing " + path);
}

std::string DirName(const std::string& path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') end--;  // "a/b/" names "a/b".
  const size_t slash = path.rfind('/', end - 1);
  if (end == 0 || slash == std::string::npos) return ".";
  size_t dir_end = slash;
  while (dir_end > 0 && path[dir_end - 1] == '/') dir_end--;
  return dir_end == 0 ? "/" : path.substr(0, dir_end);
}

}  // namespace wizq
