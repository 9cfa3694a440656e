#include "cli/prune.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/view_util.h"
#include "fs/env.h"
#include "fs/tree.h"
#include "queue/queue.h"
#include "tasks/attempt_files.h"
#include "util/exit_code.h"
#include "util/json_writer.h"

namespace wizq {

CLI::App* AddPruneCommand(CLI::App& app, PruneArgs* a,
                          const std::string& version) {
  CLI::App* cmd = app.add_subcommand(
      "prune", "Remove the task files of finished tasks (keeps failed ones)");
  cmd->set_version_flag("--version", version);
  cmd->add_option("--dir", a->dir, "Install directory (default: .)");
  cmd->add_flag("--dry-run,-n", a->dry_run, "Only say what would be removed");
  cmd->add_flag("--json", a->json, "A JSON summary on stdout");
  return cmd;
}

namespace {

// Removes a task's files (`paths`) under the directory lock, and only while
// `.wizard/tasks` is still the directory `tasks_before` was taken of: an
// archive (a new run) renames it away under that lock and starts a new
// one, whose task ids name other tasks.
Status RemoveIfSameRun(Env* env, const std::string& wizard,
                       const std::vector<std::string>& paths,
                       const FileInfo& tasks_before, uint64_t* bytes) {
  std::unique_ptr<FileLock> lock;
  WIZQ_RETURN_IF_ERROR(env->LockFile(wizard + "/lock", /*wait=*/true, &lock));
  FileInfo now;
  Status s = env->GetFileInfo(wizard + "/tasks", &now);
  if (!s.ok() && !s.IsNotFound()) return s;
  if (!s.ok() || now.device != tasks_before.device ||
      now.inode != tasks_before.inode) {
    return Status::Conflict(
        "the run was replaced by a new one while pruning (its task "
        "files were archived); nothing more was removed");
  }
  return RemoveTaskFiles(env, paths, bytes);
}

}  // namespace

int DoPrune(const PruneArgs& args) {
  // Taken before the state is read: the tasks directory of that run.
  FileInfo tasks_before;
  const bool have_tasks =
      Env::Posix()
          ->GetFileInfo(WizardDir(args.dir) + "/tasks", &tasks_before)
          .ok();
  QueueOptions o;
  o.install_dir = args.dir;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Queue> q;
  Status s = Queue::Open(o, &q, nullptr);
  if (!s.ok()) {
    std::fprintf(stderr, "wizq prune: %s\n", s.message().c_str());
    return s.IsNotFound() ? kExitInvalid : kExitEnvironment;
  }
  Env* env = Env::Posix();
  const std::string wizard = WizardDir(args.dir);
  int64_t pruned = 0, kept_failed = 0;
  uint64_t freed = 0;
  std::map<int64_t, std::vector<std::string>> files;
  s = ListTaskFiles(env, wizard, &files);
  for (const Task& t : q->state().tasks()) {
    if (!s.ok()) break;
    if (t.state == TaskState::kFailed) kept_failed++;
    if (t.state != TaskState::kDone) continue;
    auto it = files.find(t.id);
    if (it == files.end()) continue;
    uint64_t bytes = 0;
    if (!have_tasks) continue;
    for (const std::string& p : it->second) {
      if (args.dry_run && s.ok()) s = TreeBytes(env, p, &bytes);
    }
    if (!args.dry_run) {
      s = RemoveIfSameRun(env, wizard, it->second, tasks_before, &bytes);
    }
    freed += bytes;
    if (s.ok()) pruned++;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "wizq prune: %s (%lld task(s) pruned before)\n",
                 s.message().c_str(), static_cast<long long>(pruned));
    return kExitEnvironment;
  }
  uint64_t kept = 0;
  TaskFilesBytes(env, wizard, &kept).IgnoreError();  // only reported
  if (args.dry_run) kept -= std::min(kept, freed);
  if (args.json) {
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("dry_run").Bool(args.dry_run);
    w.Key("pruned_tasks").Int(pruned);
    w.Key("freed_bytes").Int(static_cast<int64_t>(freed));
    w.Key("kept_bytes").Int(static_cast<int64_t>(kept));
    w.Key("kept_failed_tasks").Int(kept_failed).EndObject();
    std::printf("%s\n", out.c_str());
    return kExitCompleted;
  }
  std::printf(
      "%s the files of %lld finished task(s): %s; kept %s under "
      "%s/tasks (%lld failed task(s) keep theirs)\n",
      args.dry_run ? "would remove" : "removed", static_cast<long long>(pruned),
      FormatBytes(freed).c_str(), FormatBytes(kept).c_str(), wizard.c_str(),
      static_cast<long long>(kept_failed));
  return kExitCompleted;
}

}  // namespace wizq
