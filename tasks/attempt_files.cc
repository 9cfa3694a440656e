#include "tasks/attempt_files.h"

#include <utility>

namespace wizq {

AttemptFiles::AttemptFiles(const std::string& wizard_dir, int64_t task_id,
                           int attempt)
    : AttemptFiles(false, TaskDir(wizard_dir, task_id), attempt) {}

AttemptFiles AttemptFiles::InTaskDir(std::string task_dir, int attempt) {
  return AttemptFiles(false, std::move(task_dir), attempt);
}

AttemptFiles AttemptFiles::Existing(Env* env, const std::string& wizard_dir,
                                    int64_t task_id, int attempt) {
  return ExistingInTaskDir(env, TaskDir(wizard_dir, task_id), attempt);
}

AttemptFiles AttemptFiles::ExistingInTaskDir(Env* env, std::string task_dir,
                                             int attempt) {
  AttemptFiles current(false, std::move(task_dir), attempt);
  if (env->FileExists(current.stdout_path())) return current;
  AttemptFiles legacy(true, current.dir_, attempt);
  if (env->FileExists(legacy.legacy_stdout_path()) ||
      env->FileExists(legacy.stdin_path())) {
    return legacy;
  }
  return current;
}

std::string AttemptFiles::TaskDir(const std::string& wizard_dir,
                                  int64_t task_id) {
  return wizard_dir + "/tasks/" + std::to_string(task_id);
}

std::string AttemptFiles::JournalPath(const std::string& task_dir) {
  const size_t slash = task_dir.rfind('/');
  return (slash == std::string::npos ? std::string(".")
                                     : task_dir.substr(0, slash)) +
         "/attempts.journal";
}

std::string AttemptFiles::TaskKey(const std::string& task_dir) {
  const size_t slash = task_dir.rfind('/');
  return slash == std::string::npos ? task_dir : task_dir.substr(slash + 1);
}

std::string AttemptFiles::LockPath(const std::string& task_dir) {
  return task_dir + "/running.lock";
}

std::string AttemptFiles::PgidPath(const std::string& task_dir) {
  return task_dir + "/pgid";
}

std::string AttemptFiles::AttemptPath(const char* suffix) const {
  if (legacy_) return LegacyPath(suffix);
  return dir_ + "." + std::to_string(attempt_) + suffix;
}

std::string AttemptFiles::LegacyPath(const char* suffix) const {
  return dir_ + "/" + std::to_string(attempt_) + suffix;
}

}  // namespace wizq
