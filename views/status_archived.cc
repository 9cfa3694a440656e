// `wizq status --archived [NAME]`: the runs set aside (by --fresh, another
// run id or workflow, an older format), as the store lists them
// (Store::ListRuns) and reads them back (Store::OpenRun).
#include <cstdio>
#include <memory>

#include "fs/env.h"
#include "tasks/exec/attempt_files.h"
#include "util/exit_code.h"
#include "util/json_writer.h"
#include "views/json_events.h"
#include "views/status_view.h"
#include "views/view_util.h"

namespace wizq {
namespace {

// The name a person gives an archived run: the last part of its key (the
// directory store: the archive directory's name).
std::string NameOf(const RunRef& run) {
  return run.key.substr(run.key.rfind('/') + 1);
}

// An archived run's status for a person: never "running" (LiveStatus).
const char* ArchivedStatus(const RunRef& run, const RunView& v) {
  RunStatusExtras x;
  x.archive_dir = run.key;
  return LiveStatus(v.run, x);
}

void SummaryJson(const RunRef& run, const RunView& v, JsonWriter& w) {
  const RunInfo& r = v.run;
  w.BeginObject().Field("name", NameOf(run)).Field("path", run.key);
  w.Field("run_id", r.run_id).Field("status", RunStatusName(r.status));
  w.Field("live_status", ArchivedStatus(run, v));
  w.Key("counts").BeginObject();
  for (TaskState s : {TaskState::kPending, TaskState::kInProgress,
                      TaskState::kDone, TaskState::kFailed}) {
    w.Key(TaskStateName(s)).Int(v.counts.of(s));
  }
  w.EndObject().Key("total").Int(v.counts.total);
  w.Key("started_ms").Int(r.started_ms).Key("finished_ms").Int(r.finished_ms);
  w.Key("resumes").Int(r.resumes).EndObject();
}

// The archived runs of the run in `dir`, oldest first.
Status OpenArchive(const RunPlace& place, std::unique_ptr<Store>* store,
                   std::vector<RunRef>* archived) {
  StoreOptions o;
  o.mode = OpenMode::kReadOnly;
  WIZQ_RETURN_IF_ERROR(place.Open(o, store));
  std::vector<RunRef> runs;
  WIZQ_RETURN_IF_ERROR((*store)->ListRuns(&runs));
  archived->clear();
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    if (it->archived) archived->push_back(*it);
  }
  return Status::OK();
}

// `run` opened as *one, read into *v (which refers to *one).
Status ReadArchived(Store& store, const RunRef& run,
                    std::unique_ptr<Store>* one, RunView* v) {
  WIZQ_RETURN_IF_ERROR(store.OpenRun(run, one));
  return LoadRunView(**one, v);
}

// The archived run `name` names: by its name, else the newest one whose
// run id it is.
const RunRef* FindArchived(const std::vector<RunRef>& runs,
                           const std::string& name) {
  for (const RunRef& r : runs) {
    if (NameOf(r) == name) return &r;
  }
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    if (it->run_id == name) return &*it;
  }
  return nullptr;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "wizq status: %s\n", s.message().c_str());
  return ExitCodeOfOpen(s);
}

}  // namespace

int ListArchived(const StatusArgs& args) {
  std::unique_ptr<Store> store;
  std::vector<RunRef> runs;
  Status s = OpenArchive(args.place, &store, &runs);
  if (!s.ok()) return Fail(s);
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  if (!args.json) {
    std::printf("%zu archived run(s) of %s\n", runs.size(),
                store->DisplayLocation().c_str());
  }
  for (const RunRef& run : runs) {
    std::unique_ptr<Store> one;
    RunView v;
    Status ls = ReadArchived(*store, run, &one, &v);
    if (!ls.ok()) {
      if (!args.json) {
        std::printf("  %s  (unreadable: %s)\n", NameOf(run).c_str(),
                    ls.message().c_str());
      }
      continue;
    }
    if (args.json) {
      SummaryJson(run, v, w);
      continue;
    }
    const RunCounts& c = v.counts;
    std::printf(
        "  %s  run %s  %s  %lld tasks: %lld done, %lld failed, %lld "
        "unfinished  started %s\n",
        NameOf(run).c_str(), v.run.run_id.c_str(), ArchivedStatus(run, v),
        static_cast<long long>(c.total),
        static_cast<long long>(c.of(TaskState::kDone)),
        static_cast<long long>(c.of(TaskState::kFailed)),
        static_cast<long long>(c.of(TaskState::kPending) +
                               c.of(TaskState::kInProgress)),
        FormatTime(v.run.started_ms).c_str());
  }
  w.EndArray();
  if (args.json) {
    std::printf("%s\n", out.c_str());
  } else if (!runs.empty()) {
    std::printf("show one with: wizq status --dir %s%s --archived NAME\n",
                ShellQuote(args.place.dir).c_str(),
                args.place.CommandOptions(runs.back().run_id).c_str());
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
  std::unique_ptr<Store> store;
  std::vector<RunRef> runs;
  Status s = OpenArchive(args.place, &store, &runs);
  if (!s.ok()) return Fail(s);
  const RunRef* run = FindArchived(runs, name);
  if (run == nullptr) {
    std::fprintf(stderr,
                 "wizq status: --archived %s: no archived run of "
                 "that name in %s (list them with wizq status "
                 "--archived)\n",
                 name.c_str(), store->DisplayLocation().c_str());
    return kExitInvalid;
  }
  std::unique_ptr<Store> one;
  RunView v;
  s = ReadArchived(*store, *run, &one, &v);
  if (!s.ok()) return Fail(s);
  std::vector<int64_t> selected;
  std::string error;
  if (!SelectTasks(v, args, &selected, &error)) {
    std::fprintf(stderr, "wizq status: %s\n", error.c_str());
    return kExitInvalid;
  }
  RunStatusExtras x;
  x.archive_dir = run->key;
  uint64_t bytes = 0;
  if (TaskFilesBytes(Env::Posix(), TaskFilesDir(args.place, *run), &bytes)
          .ok()) {
    x.task_output_bytes = static_cast<int64_t>(bytes);
  }
  if (Filtered(args)) x.only_tasks = &selected;
  if (args.json) {
    std::string json;
    s = RunStatusJson(*one, WallNowMs(), x, &json);
    if (!s.ok()) return Fail(s);
    std::printf("%s\n", json.c_str());
    return kExitCompleted;
  }
  PrintHumanStatus(v, x, args, selected, run->key);
  return kExitCompleted;
}

}  // namespace wizq
