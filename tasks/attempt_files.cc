#include "tasks/attempt_files.h"

#include <utility>

#include "fs/tree.h"

namespace wizq {

AttemptFiles::AttemptFiles(const std::string& wizard_dir, int64_t task_id,
                           int attempt)
    : AttemptFiles(TaskDir(wizard_dir, task_id), attempt) {}

AttemptFiles AttemptFiles::InTaskDir(std::string task_dir, int attempt) {
  return AttemptFiles(std::move(task_dir), attempt);
}

std::string AttemptFiles::TaskDir(const std::string& wizard_dir,
                                  int64_t task_id) {
  return wizard_dir + "/tasks/" + std::to_string(task_id);
}

std::string AttemptFiles::LockPath(const std::string& task_dir) {
  return task_dir + "/running.lock";
}

std::string AttemptFiles::PgidPath(const std::string& task_dir) {
  return task_dir + "/pgid";
}

std::string AttemptFiles::AttemptPath(const char* suffix) const {
  return dir_ + "/" + std::to_string(attempt_) + suffix;
}

Status TaskFilesBytes(Env* env, const std::string& wizard_dir,
                      uint64_t* bytes) {
  *bytes = 0;
  Status s = TreeBytes(env, wizard_dir + "/tasks", bytes);
  return s.IsNotFound() ? Status::OK() : s;
}

Status RemoveTaskFiles(Env* env, const std::string& wizard_dir, int64_t task_id,
                       uint64_t* bytes) {
  return RemoveTree(env, AttemptFiles::TaskDir(wizard_dir, task_id), bytes);
}

}  // namespace wizq
