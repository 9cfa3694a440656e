// The `wizq` command (SPEC §7). Parsing and output only; the work is done
// by orchestrator/ and queue/.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cli/agent.h"
#include "cli/answer.h"
#include "cli/db.h"
#include "cli/docgen/completion.h"
#include "cli/docgen/man_page.h"
#include "cli/interop.h"
#include "cli/mcp.h"
#include "cli/prune.h"
#include "cli/reuse_flags.h"
#include "cli/run_signals.h"
#include "cli/runs.h"
#include "cli/store_flags.h"
#include "cli/suggest.h"
#include "cli/validate.h"
#include "cli/view_commands.h"
#include "fs/env.h"
#include "orchestrator/run.h"
#include "tasks/workflow/workflow.h"
#include "tools/crashtest/crashtest.h"
#include "util/exit_code.h"
#include "views/inspect.h"
#include "views/log_table.h"
#include "views/progress.h"
#include "views/run_errors.h"

namespace wizq {
namespace {

// SIGINT, SIGTERM, SIGHUP, SIGTSTP (cli/run_signals.h).
void InstallSignalHandlers() { InstallRunSignalHandlers(); }

// Reads all of stdin (`--input-file -`).
Status ReadStdin(std::string* out) {
  out->clear();
  char buf[65536];
  while (true) {
    const ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n == 0) return Status::OK();
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IOErrorFromErrno("reading", "stdin", errno);
    out->append(buf, static_cast<size_t>(n));
  }
}

struct RunArgs {
  RunOptions options;
  std::string input_file;
  std::string resume_from;  // --resume-from: a Barnum state log
  RunPlace place;           // --store, --schema (its dir and run id unused)
  int lease_seconds = 0;    // --lease
  bool json = false;
  bool quiet = false;
  std::vector<std::string> argv;  // the command line, for the pause lines
};

int DoRun(RunArgs& a) {
  // A Barnum run continued is a run like any other, started from the log.
  BarnumImport import;
  RunExtras extras;
  if (!a.resume_from.empty()) {
    const int code = PrepareResumeFrom(a.resume_from, a.input_file, a.json,
                                       a.quiet, &a.options, &import, &extras);
    if (code != kExitCompleted) return code;
  }
  if (!a.input_file.empty()) {
    // Follows symlinks, unlike wizq's own files: the user named this file.
    // `-` is stdin.
    Status s = a.input_file == "-" ? ReadStdin(&a.options.input_json)
                                   : Env::Posix()->ReadUserFile(
                                         a.input_file, &a.options.input_json);
    if (!s.ok()) {
      // s names the file too: "open in.json: No such file or directory".
      JsonError e;
      e.message =
          "cannot read --input-file " + a.input_file + ": " + s.message();
      e.file = a.input_file;
      e.field = "--input-file";
      ReportRunError(e, a.json);
      return kExitInvalid;
    }
  }
  a.options.wizq_version = WIZQ_VERSION;
  a.options.store = a.place.store;
  a.options.schema = a.place.schema;
  if (a.lease_seconds > 0 && !a.place.database()) {
    JsonError e;
    e.message =
        "--lease applies to a store that several machines share: give "
        "--store (or set WIZQ_STORE), or leave --lease out";
    e.field = "--lease";
    ReportRunError(e, a.json);
    return kExitInvalid;
  }
  a.options.worker_lease_ms = int64_t{a.lease_seconds} * 1000;
  ProgressOptions po;
  po.quiet = a.quiet;
  po.json = a.json;
  po.terminal = isatty(STDERR_FILENO) != 0;
  po.command = a.argv;
  po.install_dir = a.options.install_dir;
  po.place = a.place;
  po.place.dir = a.options.install_dir;
  // A person can answer: stdin and stderr are a terminal whose foreground
  // we are (a background job, `wizq run ... &`, would be stopped reading).
  a.options.interactive =
      !a.json && a.input_file != "-" && isatty(STDIN_FILENO) != 0 &&
      isatty(STDERR_FILENO) != 0 && tcgetpgrp(STDIN_FILENO) == getpgrp();
  auto printer = NewProgressPrinter(po);
  InstallSignalHandlers();
  RunError error;
  int code = RunWorkflowWith(a.options, extras, printer.get(), &error);
  printer.reset();
  if (!error.message.empty()) ReportRunError(code, error, a.json);
  return code;
}

// A CLI11 check that the option is an integer from `lo` to `hi`, with a
// message that says so (CLI11's own Range calls "abc" out of range, and
// PositiveNumber prints DBL_MAX in full).
CLI::Validator IntegerIn(int64_t lo, int64_t hi) {
  const bool unbounded = hi == INT64_MAX;
  const std::string range = unbounded
                                ? "an integer >= " + std::to_string(lo)
                                : "an integer from " + std::to_string(lo) +
                                      " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& value) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long n = std::strtoll(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || errno != 0 || n < lo || n > hi) {
          return "must be " + range + ", got \"" + value + "\"";
        }
        return std::string();
      },
      unbounded
          ? "INT >= " + std::to_string(lo)
          : "INT in [" + std::to_string(lo) + " - " + std::to_string(hi) + "]");
}

// The wizq command line: every command, its options and the variables they
// fill in. The constructor defines them; Run parses argv and runs the
// command chosen. `wizq completion` and the man pages (cli/docgen/) walk
// the same tree, so they say what --help says. (The members keep the names
// they had as the locals of Main.)
class Commands {
 public:
  Commands(int argc, char** argv);
  int Run(int argc, char** argv);
  const CLI::App& tree() const { return app; }

 private:
  void AddRunCommand(int argc, char** argv);
  void AddLogCommand();

  CLI::App app{"wizq: a crash-resumable task-queue orchestrator", "wizq"};
  RunArgs run;
  CLI::App* run_cmd = nullptr;
  AnswerArgs answer;
  CLI::App* answer_cmd = nullptr;
  RunPlace log_place;  // wizq log
  bool json = false;
  StatusArgs status;  // views/status.h
  CLI::App* status_cmd = nullptr;
  int64_t task_id = 0;
  CLI::App* log_cmd = nullptr;
  bool table = false;  // views/log_table.h
  ReportArgs report;   // views/report.h
  CLI::App* report_cmd = nullptr;
  PruneArgs prune;  // cli/prune.h
  CLI::App* prune_cmd = nullptr;
  ValidateArgs validate;
  CLI::App* validate_cmd = nullptr;
  RunsArgs runs;  // cli/runs.h
  CLI::App* runs_cmd = nullptr;
  ExportArgs export_args;
  CLI::App* export_cmd = nullptr;
  std::unique_ptr<AgentCli> agent;
  std::unique_ptr<DbCli> db;
  CrashtestOptions crashtest;
  CLI::App* crashtest_cmd = nullptr;
  McpArgs mcp;
  CLI::App* mcp_cmd = nullptr;
  docgen::CompletionArgs completion;  // cli/docgen/completion.h
  CLI::App* completion_cmd = nullptr;
};

Commands::Commands(int argc, char** argv) {
  app.set_version_flag("--version", std::string("wizq ") + WIZQ_VERSION);
  app.require_subcommand(1);
  const std::string version = std::string("wizq ") + WIZQ_VERSION;
  AddRunCommand(argc, argv);
  answer_cmd = AddAnswerCommand(app, &answer, version);
  status_cmd = AddStatusCommand(app, &status, version);
  AddLogCommand();
  report_cmd = AddReportCommand(app, &report, version);
  prune_cmd = AddPruneCommand(app, &prune, version);
  validate_cmd = AddValidateCommand(app, &validate, version);
  export_cmd = AddExportCommand(app, &export_args);
  runs_cmd = AddRunsCommand(app, &runs, version);
  agent = std::make_unique<AgentCli>(app);
  db = std::make_unique<DbCli>(app);  // cli/db.h
  crashtest_cmd = AddCrashtestCommand(&app, &crashtest);
  crashtest_cmd->set_version_flag("--version", version);
  mcp_cmd = AddMcpCommand(app, &mcp, WIZQ_VERSION);
  completion_cmd = docgen::AddCompletionCommand(app, &completion);
}

void Commands::AddRunCommand(int argc, char** argv) {
  run_cmd = app.add_subcommand("run", "Run, resume or join a workflow run");
  run_cmd->set_version_flag("--version", std::string("wizq ") + WIZQ_VERSION);
  run_cmd->add_option("WORKFLOW", run.options.workflow_path,
                      "Workflow file (JSON or JSONC)");
  run_cmd->add_option("--dir", run.options.install_dir,
                      "Install directory; with --store, the machine's local "
                      "working directory (default: .)");
  auto* input = run_cmd->add_option("--input", run.options.input_json,
                                    "Entry input (JSON)");
  run_cmd
      ->add_option("--input-file", run.input_file,
                   "Read the entry input from a file (- reads stdin)")
      ->excludes(input);
  run_cmd
      ->add_option("--jobs,-j", run.options.jobs,
                   "Tasks run at once by this process")
      ->check(IntegerIn(1, 1024));
  run_cmd->add_option("--run-id", run.options.run_id,
                      "Run id (default: derived from workflow and input)");
  AddStoreOptions(run_cmd, &run.place);
  run_cmd
      ->add_option("--lease", run.lease_seconds,
                   "With --store: seconds this worker's claims hold without "
                   "a renewal (default 30); its attempts end a fifth of it "
                   "before, when cut off")
      ->check(IntegerIn(2, 86400));
  run_cmd->add_flag("--fresh", run.options.fresh,
                    "Archive an existing run and start over");
  run_cmd->add_flag("--json", run.json, "NDJSON events on stdout");
  AddReuseFlags(run_cmd, &run.options);
  run_cmd->add_flag("--quiet,-q", run.quiet,
                    "No progress output (failures and warnings still show)");
  AddHaltOption(run_cmd, &run.options.halt);
  AddResumeFromOption(run_cmd, &run.resume_from);
  run_cmd
      ->add_option("--answer", run.options.answers,
                   "TASK=VALUE: answer a human gate (task id or step "
                   "name; VALUE is JSON or text); repeatable")
      ->allow_extra_args(false);
  run_cmd->add_option("--agent", run.options.agent_command,
                      "Run Pool tasks with this shell command (the payload "
                      "on stdin, the response on stdout)");
  run.argv = ContinuingCommand(argc, argv);
}

void Commands::AddLogCommand() {
  log_cmd = app.add_subcommand("log", "Show the audit log");
  log_cmd->set_version_flag("--version", std::string("wizq ") + WIZQ_VERSION);
  AddRunPlaceOptions(log_cmd, &log_place);
  log_cmd->add_option("--task", task_id, "Only this task's events")
      ->check(IntegerIn(1, INT64_MAX));
  log_cmd->add_flag("--json", json, "The raw JSON lines");
  log_cmd->add_flag("--table", table,
                    "One row per attempt (like parallel --joblog)");
}

int Commands::Run(int argc, char** argv) {
  // CLI11 reports an unknown command as "A subcommand is required"; name it.
  if (ReportUnknownCommand(app, argc, argv)) return kExitInvalid;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ReportParseError(app, e, argc, argv);
  }
  if (*run_cmd && run.options.workflow_path.empty() &&
      run.resume_from.empty()) {
    JsonError e;
    e.message = "WORKFLOW is required (or --resume-from BARNUM_LOG)";
    e.field = "WORKFLOW";
    ReportRunError(e, run.json);
    return kExitInvalid;
  }
  if (*export_cmd) return DoExport(export_args);
  if (*runs_cmd) return DoRuns(runs);
  if (*run_cmd) return DoRun(run);
  if (*status_cmd) return DoStatus(status);
  if (*log_cmd && table) return PrintLogTable(log_place, task_id, json);
  if (*log_cmd) return PrintLog(log_place, task_id, json);
  if (*validate_cmd) return RunValidate(validate);
  if (*report_cmd) return DoReport(report);
  if (*prune_cmd) return DoPrune(prune);
  if (*crashtest_cmd) return RunCrashtest(crashtest);
  if (*answer_cmd) return DoAnswer(answer);
  if (*mcp_cmd) return RunMcpCommand(mcp, WIZQ_VERSION);
  if (agent->chosen()) return agent->Run();
  if (db->chosen()) return db->Run();
  if (*completion_cmd) return docgen::PrintCompletionScript(completion);
  return kExitInvalid;
}

int Main(int argc, char** argv) {
  Commands commands(argc, argv);
  // The generated documents' entry points, outside the command tree (no
  // --help, no page, no completion of their own): the shell completion
  // scripts call `wizq __complete WORD...`, the build `wizq __man DIR`.
  if (argc >= 2 && std::strcmp(argv[1], "__complete") == 0) {
    return docgen::Complete(commands.tree(), argc - 2, argv + 2);
  }
  if (argc == 3 && std::strcmp(argv[1], "__man") == 0) {
    return docgen::WriteManPages(commands.tree(), WIZQ_VERSION, argv[2]);
  }
  return commands.Run(argc, argv);
}

}  // namespace
}  // namespace wizq

int main(int argc, char** argv) { return wizq::Main(argc, argv); }
