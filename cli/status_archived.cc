// `wizq status --archived [NAME]`: the runs set aside in `.wizard/archive/`
// (by --fresh, another run id or workflow, an older format), read back
// from their audit logs.
#include <cstdio>
#include <memory>

#include "cli/status_view.h"
#include "cli/view_util.h"
#include "fs/env.h"
#include "queue/dir/dir_store.h"  // StateReads, until status holds a Store
#include "queue/history.h"
#include "queue/queue.h"
#include "tasks/attempt_files.h"
#include "util/exit_code.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

std::string ArchiveDir(const std::string& dir) {
  return WizardDir(dir) + "/archive";
}

// An archived run's status for a person: never "running" (LiveStatus).
const char* ArchivedStatus(const std::string& path, const QueueState& st) {
  RunStatusExtras x;
  x.archive_dir = path;
  return LiveStatus(st.run(), x);
}

void SummaryJson(const std::string& name, const std::string& path,
                 const QueueState& st, JsonWriter& w) {
  const RunInfo& r = st.run();
  w.BeginObject().Field("name", name).Field("path", path);
  w.Field("run_id", r.run_id).Field("status", RunStatusName(r.status));
  w.Field("live_status", ArchivedStatus(path, st));
  w.Key("counts").BeginObject();
  for (TaskState s : {TaskState::kPending, TaskState::kInProgress,
                      TaskState::kDone, TaskState::kFailed}) {
    w.Key(TaskStateName(s)).Int(st.count(s));
  }
  w.EndObject().Key("total").Int(st.total());
  w.Key("started_ms").Int(r.started_ms).Key("finished_ms").Int(r.finished_ms);
  w.Key("resumes").Int(r.resumes).EndObject();
}

// The newest archived run whose run id is `run_id` (names sort by the time
// they were archived).
Status FindByRunId(const std::string& dir, const std::string& run_id,
                   std::string* path, std::unique_ptr<QueueState>* st) {
  std::vector<std::string> names;
  Status s = Env::Posix()->ListDir(ArchiveDir(dir), &names);
  if (!s.ok()) return Status::NotFound("no archive");
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    const std::string p = ArchiveDir(dir) + "/" + *it;
    std::unique_ptr<QueueState> one;
    if (LoadStateFromLog(Env::Posix(), p, &one).ok() &&
        one->run().run_id == run_id) {
      *path = p;
      *st = std::move(one);
      return Status::OK();
    }
  }
  return Status::NotFound("no archived run " + run_id);
}

}  // namespace

int ListArchived(const StatusArgs& args) {
  const std::string archive = ArchiveDir(args.dir);
  if (!Env::Posix()->FileExists(WizardDir(args.dir))) {
    std::fprintf(stderr,
                 "wizq status: no wizq run in %s (it has no .wizard "
                 "directory)\n",
                 args.dir.c_str());
    return kExitInvalid;
  }
  std::vector<std::string> names;
  Status s = Env::Posix()->ListDir(archive, &names);
  if (!s.ok() && !s.IsNotFound()) {
    std::fprintf(stderr, "wizq status: %s\n", s.message().c_str());
    return kExitEnvironment;
  }
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  if (!args.json) {
    std::printf("%zu archived run(s) in %s\n", names.size(), archive.c_str());
  }
  for (const std::string& name : names) {
    const std::string path = archive + "/" + name;
    std::unique_ptr<QueueState> st;
    Status ls = LoadStateFromLog(Env::Posix(), path, &st);
    if (!ls.ok()) {
      if (!args.json) {
        std::printf("  %s  (unreadable: %s)\n", name.c_str(),
                    ls.message().c_str());
      }
      continue;
    }
    if (args.json) {
      SummaryJson(name, path, *st, w);
      continue;
    }
    std::printf(
        "  %s  run %s  %s  %lld tasks: %lld done, %lld failed, %lld "
        "unfinished  started %s\n",
        name.c_str(), st->run().run_id.c_str(), ArchivedStatus(path, *st),
        static_cast<long long>(st->total()),
        static_cast<long long>(st->count(TaskState::kDone)),
        static_cast<long long>(st->count(TaskState::kFailed)),
        static_cast<long long>(st->count(TaskState::kPending) +
                               st->count(TaskState::kInProgress)),
        FormatTime(st->run().started_ms).c_str());
  }
  w.EndArray();
  if (args.json) {
    std::printf("%s\n", out.c_str());
  } else if (!names.empty()) {
    std::printf("show one with: wizq status --dir %s --archived NAME\n",
                ShellQuote(args.dir).c_str());
  }
  return kExitCompleted;
}

int ShowArchived(const StatusArgs& args) {
  const std::string& name = args.archived_name;
  if (name.find('/') != std::string::npos || name == "." || name == "..") {
    std::fprintf(stderr,
                 "wizq status: --archived %s: a name from "
                 "`wizq status --archived`, not a path\n",
                 name.c_str());
    return kExitInvalid;
  }
  std::string path = ArchiveDir(args.dir) + "/" + name;
  std::unique_ptr<QueueState> st;
  Status s = LoadStateFromLog(Env::Posix(), path, &st);
  if (s.IsNotFound()) s = FindByRunId(args.dir, name, &path, &st);
  if (s.IsNotFound()) {
    std::fprintf(stderr,
                 "wizq status: --archived %s: no archived run of "
                 "that name in %s (list them with wizq status "
                 "--archived)\n",
                 name.c_str(), ArchiveDir(args.dir).c_str());
    return kExitInvalid;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "wizq status: %s\n", s.message().c_str());
    return kExitEnvironment;
  }
  std::vector<int64_t> selected;
  std::string error;
  if (!SelectTasks(*st, args, &selected, &error)) {
    std::fprintf(stderr, "wizq status: %s\n", error.c_str());
    return kExitInvalid;
  }
  RunStatusExtras x;
  x.archive_dir = path;
  uint64_t bytes = 0;
  if (TaskFilesBytes(Env::Posix(), path, &bytes).ok()) {
    x.task_output_bytes = static_cast<int64_t>(bytes);
  }
  if (Filtered(args)) x.only_tasks = &selected;
  if (args.json) {
    StateReads reads(*st);
    std::string json;
    s = RunStatusJson(reads, WallNowMs(), x, &json);
    if (!s.ok()) {
      std::fprintf(stderr, "wizq status: %s\n", s.message().c_str());
      return kExitEnvironment;
    }
    std::printf("%s\n", json.c_str());
    return kExitCompleted;
  }
  PrintHumanStatus(*st, x, args, selected, path);
  return kExitCompleted;
}

}  // namespace wizq
