#include "views/report.h"

#include <cstdio>
#include <memory>

#include "fs/env.h"
#include "queue/history.h"
#include "queue/store.h"
#include "util/exit_code.h"
#include "views/report_html.h"
#include "views/status_view.h"
#include "views/view_util.h"

namespace wizq {
namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "wizq report: %s\n", s.message().c_str());
  return ExitCodeOfOpen(s);
}

Status WriteOutput(const std::string& path, const std::string& page) {
  if (path == "-") {
    std::fwrite(page.data(), 1, page.size(), stdout);
    return Status::OK();
  }
  std::unique_ptr<WritableFile> f;
  WIZQ_RETURN_IF_ERROR(Env::Posix()->NewUserFile(path, &f));
  WIZQ_RETURN_IF_ERROR(f->Append(page));
  return f->Close();
}

}  // namespace

int DoReport(const ReportArgs& args) {
  if (args.archived.find('/') != std::string::npos || args.archived == "." ||
      args.archived == "..") {
    return Fail(Status::InvalidArgument("--archived " + args.archived +
                                        ": a name, not a path"));
  }
  StoreOptions o;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Store> live;
  OpenReport opened;
  Status s = args.place.Open(o, &live, &opened);
  if (!s.ok()) return Fail(s);
  std::unique_ptr<Store> archived;
  RunRef ref;  // the current run
  if (!args.archived.empty()) {
    std::vector<RunRef> runs;
    s = live->ListRuns(&runs);
    if (!s.ok()) return Fail(s);
    for (const RunRef& r : runs) {
      if (r.archived && r.key.substr(r.key.rfind('/') + 1) == args.archived) {
        ref = r;
      }
    }
    if (!ref.archived) {
      return Fail(Status::NotFound("--archived " + args.archived +
                                   ": no archived run of that name (list "
                                   "them with wizq status --archived)"));
    }
    s = live->OpenRun(ref, &archived);
    if (!s.ok()) return Fail(s);
    opened.torn_tail_bytes = 0;  // an archived run's log was repaired
  }
  Store& store = archived ? *archived : *live;
  RunView v;
  RunHistory history;
  s = LoadRunView(store, &v);
  if (s.ok()) s = LoadRunHistory(store, &history);
  if (!s.ok()) return Fail(s);
  RunStatusExtras x =
      archived ? RunStatusExtras() : LiveExtras(v, store, args.place);
  if (!archived) {
    ref.run_id = v.run.run_id;
    ref.started_ms = v.run.started_ms;
  }
  x.archive_dir = ref.key;
  ReportInput in;
  in.view = &v;
  in.history = &history;
  in.live_status = LiveStatus(v.run, x);
  in.generated_ms = WallNowMs();
  in.source = TaskFilesDir(args.place, ref);
  in.torn_bytes = opened.torn_tail_bytes;
  s = WriteOutput(args.output, RenderReportHtml(in));
  if (!s.ok()) return Fail(s.Annotate("writing the report"));
  if (args.output != "-") {
    std::fprintf(stderr, "wizq report: wrote %s (%zu tasks, %zu attempts)\n",
                 args.output.c_str(), static_cast<size_t>(v.counts.total),
                 history.attempts.size());
  }
  return kExitCompleted;
}

}  // namespace wizq
