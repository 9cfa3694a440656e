#include "cli/interop.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/store_flags.h"
#include "fs/env.h"
#include "fs/path.h"
#include "interop/barnum_export.h"
#include "interop/barnum_import.h"
#include "interop/barnum_log.h"
#include "queue/dir/dir_open.h"  // DirAuditLog
#include "queue/store.h"
#include "util/exit_code.h"
#include "util/hash.h"
#include "views/run_errors.h"

namespace wizq {

void AddResumeFromOption(CLI::App* run_cmd, std::string* state_log) {
  run_cmd->add_option("--resume-from", *state_log,
                      "Continue a Barnum run from its state log (NDJSON); "
                      "no WORKFLOW, --input or --input-file");
}

namespace {

// Prints `message` (with --json also as an `error` event naming `field`)
// and returns 2.
int Invalid(const std::string& message, bool json, const std::string& field,
            const std::string& file = "") {
  JsonError e;
  e.message = message;
  e.file = file;
  e.field = field;
  ReportRunError(e, json);
  return kExitInvalid;
}

std::string AbsolutePath(const std::string& path) { return RealPathOr(path); }

}  // namespace

int PrepareResumeFrom(const std::string& state_log,
                      const std::string& input_file, bool json, bool quiet,
                      RunOptions* options, BarnumImport* import,
                      RunExtras* extras) {
  if (!options->workflow_path.empty()) {
    return Invalid(
        "--resume-from takes no WORKFLOW: the workflow is the "
        "Config logged in " +
            state_log,
        json, "--resume-from");
  }
  if (!options->input_json.empty() || !input_file.empty()) {
    return Invalid(
        "--resume-from cannot be combined with --input or "
        "--input-file: the tasks come from the log",
        json, "--resume-from");
  }
  std::string text;
  Status s = Env::Posix()->ReadUserFile(state_log, &text);
  if (!s.ok()) {
    return Invalid("cannot read --resume-from " + s.message(), json,
                   "--resume-from", state_log);
  }
  BarnumLog log;
  s = ReadBarnumLog(state_log, text, &log);
  const std::string source =
      std::string(BarnumFormatName(log.format)) + ":" + AbsolutePath(state_log);
  if (s.ok()) s = ImportBarnumLog(log, source, import);
  if (!s.ok()) return Invalid(s.message(), json, "", state_log);
  if (log.torn_tail) {
    std::fprintf(stderr,
                 "wizq run: %s: the last line was cut short (a crash "
                 "mid-write); it is ignored\n",
                 state_log.c_str());
  }
  if (!quiet) {
    std::fprintf(stderr,
                 "wizq run: %s (%s): %lld pending, %lld waiting, %lld done\n",
                 state_log.c_str(), BarnumFormatName(log.format),
                 static_cast<long long>(import->run.tasks_pending),
                 static_cast<long long>(import->run.tasks_waiting),
                 static_cast<long long>(import->run.tasks_done));
  }
  if (options->run_id.empty()) {
    options->run_id = "b" + Hash128Hex(text).substr(0, 16);
  }
  options->workflow_path = "the Config of " + state_log;
  char cwd[PATH_MAX];
  extras->workflow_text = import->workflow_json;
  extras->base_dir = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
  extras->import = &import->run;
  return kExitCompleted;
}

namespace {

// Every event of the run, as the directory store's audit log.
Status ExportAudit(Store& store, std::string* text) {
  std::vector<EventRecord> all, page;
  int64_t seq = 0;
  do {
    WIZQ_RETURN_IF_ERROR(store.ReadEvents(seq, 1 << 16, &page));
    if (!page.empty()) seq = page.back().seq;
    all.insert(all.end(), page.begin(), page.end());
  } while (!page.empty());
  *text = DirAuditLog(all);
  return Status::OK();
}

}  // namespace

CLI::App* AddExportCommand(CLI::App& app, ExportArgs* args) {
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a run as a Barnum state log or an audit log");
  cmd->set_version_flag("--version", std::string("wizq ") + WIZQ_VERSION);
  AddRunPlaceOptions(cmd, &args->place);
  cmd->add_option("--format", args->format,
                  "barnum (Barnum's v2 log), barnum-v1, or audit (the "
                  "run's events as the directory store's .wizard/audit.jsonl)")
      ->required()
      ->check(CLI::IsMember({"barnum", "barnum-v2", "barnum-v1", "audit"}));
  cmd->add_option("-o,--output", args->output, "Write here (default: stdout)");
  return cmd;
}

int DoExport(const ExportArgs& args) {
  const BarnumFormat format =
      args.format == "barnum-v1" ? BarnumFormat::kV1 : BarnumFormat::kV2;
  StoreOptions o;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Store> store;
  std::string text;
  Status s = args.place.Open(o, &store);
  if (s.ok() && args.format == "audit") {
    s = ExportAudit(*store, &text);
  } else if (s.ok()) {
    s = ExportBarnum(*store, format, &text);
  }
  if (s.ok() && !args.output.empty()) {
    s = Env::Posix()->WriteFileAtomic(args.output, text);
  } else if (s.ok()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (std::fflush(stdout) != 0) s = Status::IOError("writing stdout");
  }
  if (!s.ok()) {
    std::fprintf(stderr, "wizq export: %s\n", s.message().c_str());
    return ExitCodeOfOpen(s);
  }
  return kExitCompleted;
}

}  // namespace wizq
