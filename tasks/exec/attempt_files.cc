#include "tasks/exec/attempt_files.h"

#include <cctype>
#include <utility>

#include "fs/tree.h"
#include "queue/dir/dir_open.h"  // WizardDir

namespace wizq {

namespace {

// A run id as one safe path component (LocalWorkspace).
std::string WorkspaceName(const std::string& run_id) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string name;
  for (size_t i = 0; i < run_id.size(); i++) {
    const unsigned char c = static_cast<unsigned char>(run_id[i]);
    const bool plain =
        std::isalnum(c) || c == '_' || c == '-' || (c == '.' && i > 0);
    if (plain) {
      name.push_back(static_cast<char>(c));
    } else {
      name += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return name.empty() ? "%" : name;
}

}  // namespace

std::string LocalWorkspace(const std::string& install_dir,
                           const std::string& location,
                           const std::string& run_id) {
  if (location.empty()) return WizardDir(install_dir);
  return install_dir + "/.wizq-local/" + WorkspaceName(run_id);
}

Status AdoptLocalWorkspace(Env* env, const std::string& workspace,
                           const std::string& instance) {
  const std::string parent = workspace.substr(0, workspace.rfind('/'));
  WIZQ_RETURN_IF_ERROR(env->CreateDirs(parent, 0755));
  std::unique_ptr<FileLock> lock;
  WIZQ_RETURN_IF_ERROR(env->LockFile(parent + "/.lock", true, &lock));
  const std::string marker = workspace + "/run";
  std::string owner;
  Status s = env->ReadFile(marker, &owner);
  if (s.ok() && owner == instance) return Status::OK();
  if (s.ok() || env->FileExists(workspace)) {
    // Another run's files (or a workspace from before markers): aside.
    const std::string aside =
        workspace + "." +
        (s.ok() && !owner.empty()
             ? owner
             : "unknown-" + std::to_string(env->NowMicros()));
    WIZQ_RETURN_IF_ERROR(env->RenameFile(workspace, aside));
  }
  WIZQ_RETURN_IF_ERROR(env->CreateDirs(workspace + "/tasks", 0755));
  return env->WriteFileAtomic(marker, instance);
}

std::string LocalWorkspaceOf(Env* env, const std::string& install_dir,
                             const std::string& location,
                             const std::string& run_id, int64_t started_ms) {
  const std::string workspace = LocalWorkspace(install_dir, location, run_id);
  if (location.empty()) return workspace;
  const std::string instance = std::to_string(started_ms);
  std::string owner;
  if (!env->ReadFile(workspace + "/run", &owner).ok() || owner == instance) {
    return workspace;
  }
  const std::string aside = workspace + "." + instance;
  return env->FileExists(aside) ? aside : "";
}

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

Status TaskFilesBytes(Env* env, const std::string& wizard_dir,
                      uint64_t* bytes) {
  *bytes = 0;
  Status s = TreeBytes(env, wizard_dir + "/tasks", bytes);
  return s.IsNotFound() ? Status::OK() : s;
}

namespace {

// The task id an entry of tasks/ belongs to: "<id>" (a previous-layout
// directory) or "<id>.<attempt>.stdout|.stderr|.function". False for
// anything else.
bool TaskIdOf(const std::string& name, int64_t* id) {
  size_t digits = 0;
  while (digits < name.size() && digits < 18 &&
         std::isdigit(static_cast<unsigned char>(name[digits]))) {
    digits++;
  }
  if (digits == 0) return false;
  if (digits < name.size()) {
    const std::string rest = name.substr(digits);
    auto ends = [&rest](const std::string& suffix) {
      return rest.size() > suffix.size() &&
             rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) ==
                 0;
    };
    if (rest[0] != '.' ||
        !(ends(".stdout") || ends(".stderr") || ends(".function"))) {
      return false;
    }
  }
  *id = std::stoll(name.substr(0, digits));
  return true;
}

}  // namespace

Status ListTaskFiles(Env* env, const std::string& wizard_dir,
                     std::map<int64_t, std::vector<std::string>>* by_task) {
  by_task->clear();
  const std::string tasks = wizard_dir + "/tasks";
  std::vector<std::string> names;
  Status s = env->ListDir(tasks, &names);
  if (s.IsNotFound()) return Status::OK();
  WIZQ_RETURN_IF_ERROR(s);
  for (const std::string& n : names) {
    int64_t id = 0;
    if (TaskIdOf(n, &id)) (*by_task)[id].push_back(tasks + "/" + n);
  }
  return Status::OK();
}

Status RemoveTaskFiles(Env* env, const std::vector<std::string>& paths,
                       uint64_t* bytes) {
  for (const std::string& p : paths) {
    WIZQ_RETURN_IF_ERROR(RemoveTree(env, p, bytes));
  }
  return Status::OK();
}

}  // namespace wizq
