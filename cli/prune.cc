#include "cli/prune.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/store_flags.h"
#include "fs/env.h"
#include "fs/tree.h"
#include "queue/store.h"
#include "tasks/exec/attempt_files.h"
#include "util/exit_code.h"
#include "util/json_writer.h"
#include "views/view_util.h"

namespace wizq {

CLI::App* AddPruneCommand(CLI::App& app, PruneArgs* a,
                          const std::string& version) {
  CLI::App* cmd = app.add_subcommand(
      "prune", "Remove the task files of finished tasks (keeps failed ones)");
  cmd->set_version_flag("--version", version);
  AddRunPlaceOptions(cmd, &a->place);
  cmd->add_flag("--dry-run,-n", a->dry_run, "Only say what would be removed");
  cmd->add_flag("--json", a->json, "A JSON summary on stdout");
  return cmd;
}

namespace {

// What a prune did (or, with --dry-run, would do).
struct PruneResult {
  int64_t pruned = 0;  // done tasks whose files went
  uint64_t freed = 0;
};

// Removes (or, with --dry-run, measures) the task files of the `done`
// tasks, each while the run is the one read: an archive (a new run) moves
// its task files away, and the new run's ids name other tasks.
Status PruneDone(Env* env, Store* store, const std::string& workspace,
                 const std::vector<Task>& done, bool dry_run, PruneResult* r) {
  if (done.empty()) return Status::OK();
  std::map<int64_t, std::vector<std::string>> files;
  Status s = ListTaskFiles(env, workspace, &files);
  for (const Task& t : done) {
    if (!s.ok()) break;
    auto it = files.find(t.id);
    if (it == files.end()) continue;
    uint64_t bytes = 0;
    for (const std::string& p : it->second) {
      if (dry_run && s.ok()) s = TreeBytes(env, p, &bytes);
    }
    if (!dry_run) {
      s = store->WhileCurrent(
          [&] { return RemoveTaskFiles(env, it->second, &bytes); });
      if (s.IsConflict()) {
        s = Status::Conflict(
            "the run was replaced by a new one while pruning (its task "
            "files were archived); nothing more was removed");
      }
    }
    r->freed += bytes;
    if (s.ok()) r->pruned++;
  }
  return s;
}

void PrintPruned(const PruneArgs& args, const PruneResult& r, uint64_t kept,
                 int64_t kept_failed, const std::string& workspace) {
  if (args.json) {
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Key("dry_run").Bool(args.dry_run);
    w.Key("pruned_tasks").Int(r.pruned);
    w.Key("freed_bytes").Int(static_cast<int64_t>(r.freed));
    w.Key("kept_bytes").Int(static_cast<int64_t>(kept));
    w.Key("kept_failed_tasks").Int(kept_failed).EndObject();
    std::printf("%s\n", out.c_str());
    return;
  }
  std::printf(
      "%s the files of %lld finished task(s): %s; kept %s under "
      "%s/tasks (%lld failed task(s) keep theirs)\n",
      args.dry_run ? "would remove" : "removed",
      static_cast<long long>(r.pruned), FormatBytes(r.freed).c_str(),
      FormatBytes(kept).c_str(), workspace.c_str(),
      static_cast<long long>(kept_failed));
}

}  // namespace

int DoPrune(const PruneArgs& args) {
  StoreOptions o;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Store> store;
  RunInfo run;
  RunCounts counts;
  std::vector<Task> done;
  TaskFilter filter;
  filter.states = {TaskState::kDone};
  Status s = args.place.Open(o, &store);
  if (s.ok()) s = store->GetRun(&run);
  if (s.ok()) s = store->Counts(&counts);
  if (s.ok()) s = store->ListTasks(filter, &done);
  if (!s.ok()) {
    std::fprintf(stderr, "wizq prune: %s\n", s.message().c_str());
    return ExitCodeOfOpen(s);
  }
  Env* env = Env::Posix();
  // On a database, this machine's files of the run (none if another run
  // of its id has the directory).
  const std::string workspace = LocalWorkspaceOf(
      env, args.place.dir, args.place.store, run.run_id, run.started_ms);
  if (workspace.empty()) done.clear();
  PruneResult r;
  s = PruneDone(env, store.get(), workspace, done, args.dry_run, &r);
  if (!s.ok()) {
    std::fprintf(stderr, "wizq prune: %s (%lld task(s) pruned before)\n",
                 s.message().c_str(), static_cast<long long>(r.pruned));
    return kExitEnvironment;
  }
  uint64_t kept = 0;
  if (!workspace.empty()) {
    TaskFilesBytes(env, workspace, &kept).IgnoreError();  // only reported
  }
  if (args.dry_run) kept -= std::min(kept, r.freed);
  PrintPruned(args, r, kept, counts.of(TaskState::kFailed), workspace);
  return kExitCompleted;
}

}  // namespace wizq
