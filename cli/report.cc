#include "cli/report.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/report_html.h"
#include "cli/status_view.h"
#include "cli/view_util.h"
#include "fs/env.h"
#include "queue/history.h"
#include "queue/queue.h"
#include "util/exit_code.h"

namespace wizq {
namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "wizq report: %s\n", s.message().c_str());
  return s.IsNotFound() || s.IsInvalidArgument() ? kExitInvalid
                                                 : kExitEnvironment;
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

CLI::App* AddReportCommand(CLI::App& app, ReportArgs* a,
                           const std::string& version) {
  CLI::App* cmd = app.add_subcommand(
      "report", "Write a run's report: one self-contained HTML page");
  cmd->set_version_flag("--version", version);
  cmd->add_option("--dir", a->dir, "Install directory (default: .)");
  cmd->add_option("-o,--output", a->output,
                  "The HTML file to write (- for "
                  "stdout)")
      ->required();
  cmd->add_option("--archived", a->archived,
                  "Report this archived run (a name from wizq status "
                  "--archived)");
  return cmd;
}

int DoReport(const ReportArgs& args) {
  std::unique_ptr<Queue> q;  // holds the live state, if that is reported
  std::unique_ptr<QueueState> archived;
  const QueueState* st = nullptr;
  std::string run_dir = WizardDir(args.dir);
  std::string live_status;
  if (!args.archived.empty()) {
    if (args.archived.find('/') != std::string::npos || args.archived == "." ||
        args.archived == "..") {
      return Fail(Status::InvalidArgument("--archived " + args.archived +
                                          ": a name, not a path"));
    }
    run_dir += "/archive/" + args.archived;
    Status s = LoadStateFromLog(Env::Posix(), run_dir, &archived);
    if (!s.ok()) return Fail(s);
    st = archived.get();
    RunStatusExtras x;
    x.archive_dir = run_dir;
    live_status = LiveStatus(st->run(), x);
  } else {
    QueueOptions o;
    o.install_dir = args.dir;
    o.mode = OpenMode::kReadOnly;
    Status s = Queue::Open(o, &q, nullptr);
    if (!s.ok()) return Fail(s);
    st = &q->state();
    live_status = LiveStatus(st->run(), LiveExtras(*st, args.dir));
  }
  RunHistory history;
  Status s = LoadRunHistory(Env::Posix(), run_dir, &history);
  if (!s.ok()) return Fail(s);
  ReportInput in;
  in.state = st;
  in.history = &history;
  in.live_status = live_status;
  in.generated_ms = WallNowMs();
  in.source = run_dir;
  s = WriteOutput(args.output, RenderReportHtml(in));
  if (!s.ok()) return Fail(s.Annotate("writing the report"));
  if (args.output != "-") {
    std::fprintf(stderr, "wizq report: wrote %s (%zu tasks, %zu attempts)\n",
                 args.output.c_str(), static_cast<size_t>(st->total()),
                 history.attempts.size());
  }
  return kExitCompleted;
}

}  // namespace wizq
