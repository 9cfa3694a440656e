// AttemptFiles: the one owner of the layout of a task's attempt files in
// `.wizard/tasks/` (SPEC §4). Every path of an attempt is named here; the
// rest of wizq asks this type rather than building paths, so a change of
// layout is a change in this file.
//
// The layout (docs/FORMAT.md and docs/PROTOCOL.md point here): two files
// per attempt, no directory per task, and one journal per run:
//
//   .wizard/tasks/<id>.<attempt>.stdout   stdout_path()  its response; its
//                                         process tree holds an flock on it
//                                         while any of the tree lives
//   .wizard/tasks/<id>.<attempt>.stderr   stderr_path()  its diagnostics
//   .wizard/tasks/attempts.journal        JournalPath()  every attempt's
//                                         start and end record, appended by
//                                         its shell and the spawner (tasks/
//                                         attempt_journal.h)
//
// <id> is the task id and <attempt> the attempt number (Task::attempts),
// both in decimal. `dir()` (`TaskDir`, `.wizard/tasks/<id>`) is the task's
// name: the prefix of its files, and its key in the journal; it is a
// directory only in the previous layout. The attempt's stdin is not a file
// any more (a memfd the spawner hands to the shell: its input is in the
// audit log).
//
// The previous layout (runs started by wizq before this change, which must
// still resume) kept a directory per task:
//
//   .wizard/tasks/<id>/<attempt>.stdin|.stdout|.stderr
//   .wizard/tasks/<id>/running.lock       LockPath()  the tree's flock
//   .wizard/tasks/<id>/pgid               PgidPath()  the attempt record
//
// `Existing()` gives the files of an attempt wherever they are (the new
// layout, else the previous one); the constructor names the new layout.
//
// Nothing here is synced by wizq: the audit log is the truth, these files
// are what the bodies said (once wizq is gone, the spawner syncs an
// attempt's stdout and its end record, tasks/proc/orphans_record.h).
//
// A value type; thread-safe like a std::string.
#ifndef WIZQ_TASKS_ATTEMPT_FILES_H_
#define WIZQ_TASKS_ATTEMPT_FILES_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fs/env.h"
#include "util/status.h"

namespace wizq {

// The machine-local workspace of a run: the directory whose `tasks/` holds
// its attempt files and journal. It stays on the machine that runs the
// attempts, whatever store holds the run (docs/FORMAT.md, "Folder
// layout"):
//
//   the directory store (`location` empty)  <install_dir>/.wizard, beside
//                                           the store's own files
//   a database store                        <install_dir>/.wizq-local/<run>
//
// <run> is the run id, with every byte outside [A-Za-z0-9_.-] (and a
// leading '.') written %XX: each run its own directory, so runs that share
// an install directory never share files. A run id given again to a new
// run after the previous one was archived gets the same name: the first
// worker of the new run on this machine sets the old one aside
// (AdoptLocalWorkspace).
std::string LocalWorkspace(const std::string& install_dir,
                           const std::string& location = "",
                           const std::string& run_id = "");

// Makes a database run's LocalWorkspace its own before any attempt of it
// starts here: `instance` names this run among the runs of its id (its
// start time); a workspace left by another run of that id is renamed to
// `<run>.<its instance>` (kept for `wizq prune`, never deleted). Safe
// against other processes doing the same at once (an flock beside it).
Status AdoptLocalWorkspace(Env* env, const std::string& workspace,
                           const std::string& instance);

// The LocalWorkspace of the run `run_id` started at `started_ms` (its
// instance) as a reader finds it. On a database store: the directory set
// aside when another run of that id took the name over, and "" when the
// directory there belongs to another run and none was set aside (its files
// name other tasks).
std::string LocalWorkspaceOf(Env* env, const std::string& install_dir,
                             const std::string& location,
                             const std::string& run_id, int64_t started_ms);

class AttemptFiles {
 public:
  // The files of attempt `attempt` of task `task_id` of the run in
  // `wizard_dir` (`<install_dir>/.wizard`), in the current layout.
  AttemptFiles(const std::string& wizard_dir, int64_t task_id, int attempt);
  // The same for a task named by its dir() (the runner's tests, and
  // callers that only know it).
  static AttemptFiles InTaskDir(std::string task_dir, int attempt);
  // The attempt's files where they are: the previous layout's when only
  // those exist (a run started by an older wizq), else the current one's.
  static AttemptFiles Existing(Env* env, const std::string& wizard_dir,
                               int64_t task_id, int attempt);
  static AttemptFiles ExistingInTaskDir(Env* env, std::string task_dir,
                                        int attempt);

  // `<wizard_dir>/tasks/<id>`: the task's name (see above).
  static std::string TaskDir(const std::string& wizard_dir, int64_t task_id);
  // The run's attempt journal, beside the task's files.
  static std::string JournalPath(const std::string& task_dir);
  // The task's key in the journal (the last component of its dir()).
  static std::string TaskKey(const std::string& task_dir);
  // The previous layout's files that every attempt shared.
  static std::string LockPath(const std::string& task_dir);
  static std::string PgidPath(const std::string& task_dir);

  const std::string& dir() const { return dir_; }
  int attempt() const { return attempt_; }
  // True for the previous layout's files (Existing found only those).
  bool legacy() const { return legacy_; }
  std::string stdout_path() const { return AttemptPath(".stdout"); }
  std::string stderr_path() const { return AttemptPath(".stderr"); }
  // A Function attempt's marker (`<id>.<attempt>.function`, empty): its
  // handler was called (tasks/exec/function_executor.h).
  std::string function_marker_path() const { return AttemptPath(".function"); }
  // The previous layout's stdin file (never written any more).
  std::string stdin_path() const { return LegacyPath(".stdin"); }
  std::string legacy_stdout_path() const { return LegacyPath(".stdout"); }

 private:
  AttemptFiles(bool legacy, std::string dir, int attempt)
      : dir_(std::move(dir)), attempt_(attempt), legacy_(legacy) {}
  std::string AttemptPath(const char* suffix) const;
  std::string LegacyPath(const char* suffix) const;

  std::string dir_;
  int attempt_ = 1;
  bool legacy_ = false;
};

// The bytes of every file under `<wizard_dir>/tasks/`: what a run keeps of
// its attempts' files. 0 if there is no such directory.
Status TaskFilesBytes(Env* env, const std::string& wizard_dir, uint64_t* bytes);

// The entries of `<wizard_dir>/tasks/` that belong to each task, by task
// id: its attempts' files (`<id>.<n>.stdout`, `.stderr`, `.function`) and, in
// the previous layout, its directory `<id>`. The journal belongs to no task.
// One listing of the directory. OK and empty if there is none.
Status ListTaskFiles(Env* env, const std::string& wizard_dir,
                     std::map<int64_t, std::vector<std::string>>* by_task);

// Removes the entries `paths` (from ListTaskFiles; a directory with all it
// holds); *bytes (may be null) gets the bytes freed. The caller makes sure
// no attempt of their task runs (`wizq prune` only removes finished tasks'
// files). Not synced: nothing durable depends on them.
Status RemoveTaskFiles(Env* env, const std::vector<std::string>& paths,
                       uint64_t* bytes);

}  // namespace wizq

#endif  // WIZQ_TASKS_ATTEMPT_FILES_H_
