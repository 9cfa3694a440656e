// AttemptFiles: the one owner of the layout of a task's directory in
// `.wizard/tasks/` (SPEC §4). Every path of an attempt is named here; the
// rest of wizq asks this type rather than building paths, so a change of
// layout is a change in this file.
//
// The layout (docs/FORMAT.md points here):
//
//   .wizard/tasks/<id>/            dir()          0700, created on first start
//     <attempt>.stdin              stdin_path()   what the attempt read
//     <attempt>.stdout             stdout_path()  its response
//     <attempt>.stderr             stderr_path()  its diagnostics
//     running.lock                 lock_path()    flock held by the process
//                                                 tree while any of it lives
//     pgid                         pgid_path()    "<pid> <start time> <boot
//                                                 id>" of the tree's leader
//
// <id> is the task id and <attempt> the attempt number (Task::attempts),
// both in decimal. `running.lock` and `pgid` belong to the task, not to one
// attempt: they are shared by its attempts. Nothing here is synced: the
// audit log is the truth, these files are what the bodies saw and said.
// `<attempt>.stdin` existing is how a later worker tells that an attempt
// started (CommandExecutor::AttemptStarted).
//
// A value type; thread-safe like a std::string.
#ifndef WIZQ_TASKS_ATTEMPT_FILES_H_
#define WIZQ_TASKS_ATTEMPT_FILES_H_

#include <cstdint>
#include <string>
#include <utility>

#include "util/status.h"

namespace wizq {

class AttemptFiles {
 public:
  // The files of attempt `attempt` of task `task_id` of the run in
  // `wizard_dir` (`<install_dir>/.wizard`).
  AttemptFiles(const std::string& wizard_dir, int64_t task_id, int attempt);
  // The same for a task directory given as is (the runner's tests, and
  // callers that only know the directory).
  static AttemptFiles InTaskDir(std::string task_dir, int attempt);

  // `<wizard_dir>/tasks/<id>`.
  static std::string TaskDir(const std::string& wizard_dir, int64_t task_id);
  // The task's files that every attempt shares, from its directory.
  static std::string LockPath(const std::string& task_dir);
  static std::string PgidPath(const std::string& task_dir);

  const std::string& dir() const { return dir_; }
  int attempt() const { return attempt_; }
  std::string stdin_path() const { return AttemptPath(".stdin"); }
  std::string stdout_path() const { return AttemptPath(".stdout"); }
  std::string stderr_path() const { return AttemptPath(".stderr"); }
  std::string lock_path() const { return LockPath(dir_); }
  std::string pgid_path() const { return PgidPath(dir_); }

 private:
  AttemptFiles(std::string dir, int attempt)
      : dir_(std::move(dir)), attempt_(attempt) {}
  std::string AttemptPath(const char* suffix) const;

  std::string dir_;
  int attempt_ = 1;
};

class Env;

// The bytes of every file under `<wizard_dir>/tasks/`: what a run keeps of
// its attempts' files. 0 if there is no such directory.
Status TaskFilesBytes(Env* env, const std::string& wizard_dir, uint64_t* bytes);

// Removes the directory of task `task_id` (all its attempts' files);
// *bytes (may be null) gets the bytes freed. OK if there is none. The
// caller makes sure no attempt of the task runs (`wizq prune` only removes
// finished tasks' files).
Status RemoveTaskFiles(Env* env, const std::string& wizard_dir, int64_t task_id,
                       uint64_t* bytes);

}  // namespace wizq

#endif  // WIZQ_TASKS_ATTEMPT_FILES_H_
