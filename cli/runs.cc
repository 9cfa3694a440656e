#include "cli/runs.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <vector>

#include "cli/store_flags.h"
#include "queue/store.h"
#include "util/exit_code.h"
#include "util/json_writer.h"
#include "views/json_events.h"
#include "views/view_util.h"

namespace wizq {
namespace {

int64_t Unfinished(const RunCounts& c) {
  return c.of(TaskState::kPending) + c.of(TaskState::kInProgress);
}

void PrintJson(const std::vector<RunSummary>& runs) {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  for (const RunSummary& r : runs) {
    const RunCounts& c = r.counts;
    w.BeginObject().Field("run_id", r.ref.run_id);
    w.Key("archived").Bool(r.ref.archived);
    if (r.ref.archived) w.Field("key", r.ref.key);
    w.Field("status", RunStatusName(r.ref.status));
    w.Key("total").Int(c.total).Key("done").Int(c.of(TaskState::kDone));
    w.Key("failed").Int(c.of(TaskState::kFailed));
    w.Key("in_progress").Int(c.of(TaskState::kInProgress));
    w.Key("pending").Int(c.of(TaskState::kPending));
    w.Key("live_workers").Int(r.live_workers);
    w.Key("started_ms").Int(r.ref.started_ms);
    w.Key("finished_ms").Int(r.ref.finished_ms).EndObject();
  }
  w.EndArray();
  std::printf("%s\n", out.c_str());
}

void PrintTable(const std::vector<RunSummary>& runs) {
  std::printf("%-24s %-10s %7s %7s %7s %10s %7s  %s\n", "RUN", "STATUS",
              "TASKS", "DONE", "FAILED", "UNFINISHED", "WORKERS", "STARTED");
  for (const RunSummary& r : runs) {
    const RunCounts& c = r.counts;
    const std::string status = r.ref.archived
                                   ? std::string("archived:") + r.ref.key
                                   : RunStatusName(r.ref.status);
    std::printf("%-24s %-10s %7lld %7lld %7lld %10lld %7lld  %s\n",
                r.ref.run_id.c_str(), status.c_str(),
                static_cast<long long>(c.total),
                static_cast<long long>(c.of(TaskState::kDone)),
                static_cast<long long>(c.of(TaskState::kFailed)),
                static_cast<long long>(Unfinished(c)),
                static_cast<long long>(r.live_workers),
                FormatTime(r.ref.started_ms).c_str());
  }
}

}  // namespace

CLI::App* AddRunsCommand(CLI::App& app, RunsArgs* args,
                         const std::string& version) {
  CLI::App* cmd = app.add_subcommand(
      "runs", "List the runs in a store: status, counts, live workers");
  cmd->set_version_flag("--version", version);
  cmd->add_option("--dir", args->place.dir,
                  "Install directory (the directory store; default: .)");
  AddStoreOptions(cmd, &args->place);
  cmd->add_flag("--archived", args->archived, "The archived runs too");
  cmd->add_flag("--json", args->json, "A JSON array on stdout");
  return cmd;
}

int DoRuns(const RunsArgs& args) {
  StoreOptions o;
  o.location = args.place.store;
  o.schema = args.place.schema;
  o.install_dir = args.place.dir;
  std::vector<RunSummary> runs;
  Status s = Store::ListAll(o, args.archived, &runs);
  if (!s.ok()) {
    return ReportCommandError("runs", ExitCodeOfOpen(s), s.message(), "",
                              args.json);
  }
  if (args.json) {
    PrintJson(runs);
  } else {
    PrintTable(runs);
  }
  return kExitCompleted;
}

}  // namespace wizq
