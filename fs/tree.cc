#include "fs/tree.h"

#include <unistd.h>

#include <cerrno>
#include <vector>

#include "fs/env.h"

namespace wizq {

Status TreeBytes(Env* env, const std::string& path, uint64_t* bytes) {
  FileInfo info;
  WIZQ_RETURN_IF_ERROR(env->GetFileInfo(path, &info));
  if (info.type == FileInfo::kFile) *bytes += info.size;
  if (info.type != FileInfo::kDir) return Status::OK();
  std::vector<std::string> names;
  WIZQ_RETURN_IF_ERROR(env->ListDir(path, &names));
  for (const std::string& n : names) {
    Status s = TreeBytes(env, path + "/" + n, bytes);
    if (!s.ok() && !s.IsNotFound()) return s;  // removed meanwhile: nothing
  }
  return Status::OK();
}

Status RemoveTree(Env* env, const std::string& path, uint64_t* bytes) {
  FileInfo info;
  Status s = env->GetFileInfo(path, &info);
  if (s.IsNotFound()) return Status::OK();
  WIZQ_RETURN_IF_ERROR(s);
  if (info.type != FileInfo::kDir) {
    WIZQ_RETURN_IF_ERROR(env->RemoveFile(path));
    if (bytes != nullptr && info.type == FileInfo::kFile) *bytes += info.size;
    return Status::OK();
  }
  std::vector<std::string> names;
  WIZQ_RETURN_IF_ERROR(env->ListDir(path, &names));
  for (const std::string& n : names) {
    WIZQ_RETURN_IF_ERROR(RemoveTree(env, path + "/" + n, bytes));
  }
  // Env has no rmdir (nothing durable removes a directory); this is fs/,
  // where raw calls on paths belong.
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) {
    return Status::IOErrorFromErrno("rmdir", path, errno);
  }
  return Status::OK();
}

}  // namespace wizq
