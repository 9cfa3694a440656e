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
#include <string>

#include "cli/agent.h"
#include "cli/answer.h"
#include "cli/crashtest.h"
#include "cli/inspect.h"
#include "cli/interop.h"
#include "cli/mcp.h"
#include "cli/progress.h"
#include "cli/reuse_flags.h"
#include "fs/env.h"
#include "orchestrator/run.h"
#include "tasks/workflow.h"

namespace wizq {
namespace {

void OnSignal(int, siginfo_t* info, void*) {
  RequestStop(info != nullptr ? static_cast<int>(info->si_pid) : 0);
}

void InstallSignalHandlers() {
  struct sigaction sa = {};
  sa.sa_sigaction = OnSignal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

struct RunArgs {
  RunOptions options;
  std::string input_file;
  bool json = false;
  bool quiet = false;
  std::vector<std::string> argv;  // the command line, for the pause lines
};

// The command line without its --answer arguments.
std::vector<std::string> WithoutAnswers(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--answer") {
      i++;
    } else if (a.rfind("--answer=", 0) != 0) {
      out.push_back(a);
    }
  }
  return out;
}

int DoRun(RunArgs& a) {
  if (!a.input_file.empty()) {
    // Follows symlinks, unlike wizq's own files: the user named this file.
    Status s = Env::Posix()->ReadUserFile(a.input_file, &a.options.input_json);
    if (!s.ok()) {
      // s names the file too: "open in.json: No such file or directory".
      std::fprintf(stderr, "wizq run: cannot read --input-file %s: %s\n",
                   a.input_file.c_str(), s.message().c_str());
      return kExitInvalid;
    }
  }
  a.options.wizq_version = WIZQ_VERSION;
  ProgressOptions po;
  po.quiet = a.quiet;
  po.json = a.json;
  po.terminal = isatty(STDERR_FILENO) != 0;
  po.command = a.argv;
  po.install_dir = a.options.install_dir;
  // A person can answer: stdin and stderr are a terminal whose foreground
  // we are (a background job, `wizq run ... &`, would be stopped reading).
  a.options.interactive = !a.json && isatty(STDIN_FILENO) != 0 &&
                          isatty(STDERR_FILENO) != 0 &&
                          tcgetpgrp(STDIN_FILENO) == getpgrp();
  auto printer = NewProgressPrinter(po);
  InstallSignalHandlers();
  std::string error;
  int code = RunWorkflow(a.options, printer.get(), &error);
  printer.reset();
  if (!error.empty()) std::fprintf(stderr, "wizq run: %s\n", error.c_str());
  return code;
}

// Function steps are valid, but only a program that embeds wizq runs them.
void PrintFunctionNotes(const std::string& path, const Workflow& wf) {
  for (const Step& step : wf.steps()) {
    const Action* hook = step.finally_hook ? &*step.finally_hook : nullptr;
    for (const Action* a : {&step.action, hook}) {
      if (a == nullptr || a->kind != Action::Kind::kFunction) continue;
      std::printf(
          "%s: note: step \"%s\": its %s is a Function (handler \"%s\"): "
          "only a program that embeds wizq and registers that handler can "
          "run it; `wizq run` stops with exit 2 (docs/EMBEDDING.md)\n",
          path.c_str(), step.name.c_str(),
          a == hook ? "finally hook" : "action", a->handler.c_str());
    }
  }
}

int DoValidate(const std::string& path) {
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Status s = Workflow::Load(path, &wf, &findings);
  if (s.ok()) {
    std::printf("%s: OK (%zu steps, entrypoint %s)\n", path.c_str(),
                wf->steps().size(), wf->entrypoint().c_str());
    PrintFunctionNotes(path, *wf);
    return 0;
  }
  if (findings.empty()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
  }
  for (const Finding& f : findings) {
    std::fprintf(stderr, "%s: %s: %s\n", path.c_str(), f.path.c_str(),
                 f.message.c_str());
  }
  return kExitInvalid;
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

int Main(int argc, char** argv) {
  CLI::App app{"wizq: a crash-resumable task-queue orchestrator", "wizq"};
  app.set_version_flag("--version", std::string("wizq ") + WIZQ_VERSION);
  app.require_subcommand(1);

  RunArgs run;
  CLI::App* run_cmd =
      app.add_subcommand("run", "Run, resume or join a workflow run");
  run_cmd->set_version_flag("--version", std::string("wizq ") + WIZQ_VERSION);
  run_cmd->add_option("WORKFLOW", run.options.workflow_path,
                      "Workflow file (JSON or JSONC)");
  run_cmd->add_option("--dir", run.options.install_dir,
                      "Install directory (default: .)");
  auto* input = run_cmd->add_option("--input", run.options.input_json,
                                    "Entry input (JSON)");
  run_cmd
      ->add_option("--input-file", run.input_file,
                   "Read the entry input from a file")
      ->excludes(input);
  run_cmd
      ->add_option("--jobs,-j", run.options.jobs,
                   "Tasks run at once by this process")
      ->check(IntegerIn(1, 1024));
  run_cmd->add_option("--run-id", run.options.run_id,
                      "Run id (default: derived from workflow and input)");
  run_cmd->add_flag("--fresh", run.options.fresh,
                    "Archive an existing run and start over");
  run_cmd->add_flag("--json", run.json, "NDJSON events on stdout");
  AddReuseFlags(run_cmd, &run.options);
  run_cmd->add_flag("--quiet,-q", run.quiet, "No progress output");
  std::string resume_from;
  AddResumeFromOption(run_cmd, &resume_from);
  run_cmd
      ->add_option("--answer", run.options.answers,
                   "TASK=VALUE: answer a human gate (task id or step "
                   "name; VALUE is JSON or text); repeatable")
      ->allow_extra_args(false);
  run.argv = WithoutAnswers(argc, argv);

  AnswerArgs answer;
  CLI::App* answer_cmd =
      AddAnswerCommand(app, &answer, std::string("wizq ") + WIZQ_VERSION);
  run_cmd->add_option("--agent", run.options.agent_command,
                      "Run Pool tasks with this shell command (the payload "
                      "on stdin, the response on stdout)");

  std::string dir = ".";
  bool json = false;
  CLI::App* status_cmd =
      app.add_subcommand("status", "Show a run's summary and task tree");
  status_cmd->set_version_flag("--version",
                               std::string("wizq ") + WIZQ_VERSION);
  status_cmd->add_option("--dir", dir, "Install directory (default: .)");
  status_cmd->add_flag("--json", json, "JSON output");

  int64_t task_id = 0;
  CLI::App* log_cmd = app.add_subcommand("log", "Show the audit log");
  log_cmd->set_version_flag("--version", std::string("wizq ") + WIZQ_VERSION);
  log_cmd->add_option("--dir", dir, "Install directory (default: .)");
  log_cmd->add_option("--task", task_id, "Only this task's events")
      ->check(IntegerIn(1, INT64_MAX));
  log_cmd->add_flag("--json", json, "The raw JSON lines");

  std::string workflow;
  CLI::App* validate_cmd =
      app.add_subcommand("validate", "Check a workflow file");
  validate_cmd->set_version_flag("--version",
                                 std::string("wizq ") + WIZQ_VERSION);
  validate_cmd->add_option("WORKFLOW", workflow, "Workflow file")->required();

  ExportArgs export_args;
  CLI::App* export_cmd = AddExportCommand(app, &export_args);

  AgentCli agent(app);

  CrashtestOptions crashtest;
  CLI::App* crashtest_cmd = AddCrashtestCommand(&app, &crashtest);
  crashtest_cmd->set_version_flag("--version",
                                  std::string("wizq ") + WIZQ_VERSION);
  McpArgs mcp;
  CLI::App* mcp_cmd = AddMcpCommand(app, &mcp, WIZQ_VERSION);

  // CLI11 reports an unknown command as "A subcommand is required"; name it.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub :
         app.get_subcommands([](CLI::App*) { return true; })) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr,
                   "wizq: unknown command \"%s\"; the commands are %s (see "
                   "wizq --help)\n",
                   argv[1], names.c_str());
      return kExitInvalid;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitInvalid;
  }
  if (*run_cmd && !resume_from.empty()) {
    return DoResumeFrom(resume_from, run.options, run.input_file, run.json,
                        run.quiet, InstallSignalHandlers);
  }
  if (*run_cmd && run.options.workflow_path.empty()) {
    std::fprintf(stderr,
                 "wizq run: WORKFLOW is required (or --resume-from "
                 "BARNUM_LOG)\n");
    return kExitInvalid;
  }
  if (*export_cmd) return DoExport(export_args);
  if (*run_cmd) return DoRun(run);
  if (*status_cmd) return PrintStatus(dir, json);
  if (*log_cmd) return PrintLog(dir, task_id, json);
  if (*validate_cmd) return DoValidate(workflow);
  if (*crashtest_cmd) return RunCrashtest(crashtest);
  if (*answer_cmd) return DoAnswer(answer);
  if (*mcp_cmd) return RunMcpCommand(mcp, WIZQ_VERSION);
  if (agent.chosen()) return agent.Run();
  return kExitInvalid;
}

}  // namespace
}  // namespace wizq

int main(int argc, char** argv) { return wizq::Main(argc, argv); }
