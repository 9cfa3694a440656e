#include "tools/crashtest/crashtest.h"

#include <stdlib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "fs/env.h"
#include "orchestrator/run.h"
#include "tasks/exec/prompt.h"
#include "tasks/workflow/workflow.h"
#include "tools/crashtest/audit.h"
#include "tools/crashtest/proc.h"
#include "tools/crashtest/report.h"
#include "tools/crashtest/tree.h"
#include "util/crash_point.h"
#include "util/environment.h"
#include "util/exit_code.h"

namespace wizq {
namespace {

using crashtest::CaseResult;
using crashtest::ChildResult;
using crashtest::Commit;
using crashtest::KillPoint;
using crashtest::PathDiff;
using crashtest::Report;
using crashtest::Tree;

// How many times a killed run is resumed before crashtest gives up on it.
constexpr int kMaxResumes = 5;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The last line of a file (a run's stderr), for an error message.
std::string LastLine(const std::string& path) {
  std::string data;
  if (!Env::Posix()->ReadFile(path, &data).ok()) return "";
  while (!data.empty() && data.back() == '\n') data.pop_back();
  const size_t nl = data.rfind('\n');
  return nl == std::string::npos ? data : data.substr(nl + 1);
}

// What crashtest cannot run unattended with these options, before anything
// runs (exit 2): every run starts without a terminal and fresh, so a Pool
// step needs --agent, a Prompt without a default an --answer naming its
// step (a task id means nothing before the run has tasks), and a Function
// step runs only in the program that embeds wizq.
Status CheckRunnable(const Workflow& wf, const CrashtestOptions& o) {
  std::set<std::string> answered;
  for (const std::string& a : o.answers) {
    const std::string step = a.substr(0, a.find('='));
    const Step* s = wf.FindStep(step);
    if (a.find('=') == std::string::npos || s == nullptr ||
        s->action.kind != Action::Kind::kPrompt) {
      return Status::InvalidArgument(
          "--answer " + a +
          ": name a Prompt step (--answer STEP=VALUE): every run crashtest "
          "makes starts fresh, so no task id exists yet");
    }
    answered.insert(step);
  }
  for (const Step& s : wf.steps()) {
    const Action::Kind kind = s.action.kind;
    const bool hook_fn = s.finally_hook.has_value() &&
                         s.finally_hook->kind == Action::Kind::kFunction;
    if (kind == Action::Kind::kFunction || hook_fn) {
      return Status::InvalidArgument(
          "step " + s.name +
          " has a Function action, which runs only in the program that "
          "embeds wizq: `wizq run`, and so crashtest, cannot run it");
    }
    if (kind == Action::Kind::kPool && o.agent.empty()) {
      return Status::InvalidArgument(
          "step " + s.name +
          " is a Pool step: give --agent COMMAND, the agent every run "
          "starts for its tasks (as `wizq run --agent`)");
    }
    if (kind == Action::Kind::kPrompt && !s.action.prompt->default_json &&
        answered.count(s.name) == 0) {
      return Status::InvalidArgument(
          "step " + s.name +
          " is a Prompt without a default, and no run of crashtest has a "
          "terminal: give --answer " +
          s.name + "=VALUE");
    }
  }
  return Status::OK();
}

// One crashtest: the options, the scratch directory and the undisturbed
// run's end state.
class Crashtest {
 public:
  explicit Crashtest(const CrashtestOptions& o) : o_(o) {}

  int Run();

 private:
  int Prepare();
  int Undisturbed();
  // Undisturbed run number `k` (from 1), set aside in `dir`.
  int Baseline(int k, const std::string& dir, std::vector<Commit>* log);
  CaseResult KillAt(const KillPoint& point, size_t n);
  // Runs `wizq run` in the install directory; a non-empty `point` arms
  // its crash point.
  ChildResult RunWizq(const KillPoint* point, int64_t deadline_ms);
  void Finish(CaseResult* c);
  // The differences between the first undisturbed run's tree and `got`,
  // the tree of the files under `got_root`, each file's lines compared.
  std::vector<PathDiff> Compare(const Tree& got, const std::string& got_root);
  // Sets the install directory aside as `name` (--keep) or removes it.
  Status Retire(const std::string& name);
  void Progress(const std::string& line) const {
    std::fprintf(stderr, "wizq crashtest: %s\n", line.c_str());
  }

  const CrashtestOptions& o_;
  std::string wizq_, input_, scratch_, install_;
  Tree want_;
  std::string want_root_;           // the first undisturbed run's files
  std::set<std::string> unstable_;  // paths that differ between them
  std::map<std::string, crashtest::TaskRuns> want_runs_;
  int64_t deadline_ms_ = 0;
  Report report_;
};

int Crashtest::Prepare() {
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Status s = Workflow::Load(o_.workflow, &wf, &findings);
  if (s.ok()) s = CheckRunnable(*wf, o_);
  if (!s.ok()) {
    if (findings.empty()) {
      std::fprintf(stderr, "wizq crashtest: %s\n", s.message().c_str());
    }
    for (const Finding& f : findings) {
      std::fprintf(stderr, "%s: %s: %s\n", o_.workflow.c_str(), f.path.c_str(),
                   f.message.c_str());
    }
    return kExitInvalid;
  }
  input_ = o_.input;
  if (!o_.input_file.empty()) {
    // Read once: the file may be a pipe (`--input-file <(...)`).
    s = Env::Posix()->ReadUserFile(o_.input_file, &input_);
    if (!s.ok()) {
      std::fprintf(stderr, "wizq crashtest: cannot read --input-file %s: %s\n",
                   o_.input_file.c_str(), s.message().c_str());
      return kExitInvalid;
    }
  }
  std::error_code ec;
  if (!o_.template_dir.empty() &&
      !std::filesystem::is_directory(o_.template_dir, ec)) {
    std::fprintf(stderr, "wizq crashtest: --template %s is not a directory\n",
                 o_.template_dir.c_str());
    return kExitInvalid;
  }
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  const char* tmp = getenv(kEnvTmpdir);
  std::string dir =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/wizq-crashtest-XXXXXX";
  if (n <= 0 || mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "wizq crashtest: cannot create %s: %s\n", dir.c_str(),
                 strerror(errno));
    return kExitEnvironment;
  }
  wizq_.assign(exe, static_cast<size_t>(n));
  scratch_ = dir;
  // Every run works in the same path, so that a workflow writing absolute
  // paths into its files leaves the same bytes each time.
  install_ = scratch_ + "/install";
  want_root_ = scratch_ + "/undisturbed";
  crashtest::InitProcessControl();
  return kExitCompleted;
}

ChildResult Crashtest::RunWizq(const KillPoint* point, int64_t deadline_ms) {
  crashtest::SpawnSpec spec;
  spec.argv = {wizq_, "run", o_.workflow, "--dir", install_, "--quiet"};
  if (!input_.empty()) spec.argv.insert(spec.argv.end(), {"--input", input_});
  if (o_.jobs > 0) {
    spec.argv.insert(spec.argv.end(), {"--jobs", std::to_string(o_.jobs)});
  }
  if (!o_.agent.empty())
    spec.argv.insert(spec.argv.end(), {"--agent", o_.agent});
  for (const std::string& a : o_.answers) {
    spec.argv.insert(spec.argv.end(), {"--answer", a});
  }
  if (point == nullptr) {
    spec.unset_env = {kEnvCrashAt, kEnvCrashIf};
  } else {
    spec.env = {{kEnvCrashAt, point->crash_at}, {kEnvCrashIf, point->crash_if}};
  }
  spec.stdout_path = scratch_ + "/wizq.out";
  spec.stderr_path = scratch_ + "/wizq.err";
  pid_t pid = 0;
  Status s = crashtest::Spawn(spec, &pid);
  ChildResult r;
  if (!s.ok()) {
    std::fprintf(stderr, "wizq crashtest: %s\n", s.message().c_str());
    return r;  // neither exited nor signalled: an environment error
  }
  return crashtest::WaitChild(pid, deadline_ms);
}

Status Crashtest::Retire(const std::string& name) {
  if (!o_.keep) return crashtest::RemoveTree(install_);
  return crashtest::MoveTree(install_, scratch_ + "/" + name);
}

Status CopyTemplate(const std::string& template_dir, const std::string& to) {
  if (!template_dir.empty()) return crashtest::CopyTree(template_dir, to);
  return Env::Posix()->CreateDir(to, 0755);
}

std::vector<PathDiff> Crashtest::Compare(const Tree& got,
                                         const std::string& got_root) {
  std::vector<PathDiff> diffs = crashtest::CompareTrees(want_, got);
  for (PathDiff& d : diffs) crashtest::LineDiff(want_root_, got_root, &d);
  return diffs;
}

int Crashtest::Baseline(int k, const std::string& dir,
                        std::vector<Commit>* log) {
  const std::string nth = "undisturbed run " + std::to_string(k) + " of " +
                          std::to_string(o_.baseline_runs);
  Status s = CopyTemplate(o_.template_dir, install_);
  if (!s.ok()) {
    std::fprintf(stderr, "wizq crashtest: %s\n", s.message().c_str());
    return kExitEnvironment;
  }
  Progress(nth + " in " + install_);
  const int64_t start = NowMs();
  const ChildResult r = RunWizq(nullptr, 0);
  report_.undisturbed_ms = std::max(report_.undisturbed_ms, NowMs() - start);
  crashtest::KillDescendants();  // what a task left running
  if (r.interrupted) return kExitInterrupted;
  if (!r.exited || r.code != kExitCompleted) {
    // Its directory is removed with the scratch one: name no file in it.
    std::string why = r.exited && r.code == kExitPaused
                          ? "a Prompt task waits for an answer: give "
                            "crashtest --answer STEP=VALUE"
                          : LastLine(scratch_ + "/wizq.err");
    if (crashtest::ReadCommits(install_, log).ok()) {
      for (const std::string& t : crashtest::EndOf(*log).failed) {
        why += (why.empty() ? "failed: " : ", ") + t;
      }
    }
    std::fprintf(stderr, "wizq crashtest: the %s did not complete (%s): %s\n",
                 nth.c_str(), r.Describe().c_str(), why.c_str());
    return r.exited && r.code != kExitCompleted ? r.code : kExitEnvironment;
  }
  Tree tree;
  s = crashtest::ReadCommits(install_, log);
  if (s.ok()) s = crashtest::SnapshotTree(install_, o_.ignore, &tree);
  if (s.ok()) s = crashtest::MoveTree(install_, dir);
  if (!s.ok()) {
    std::fprintf(stderr, "wizq crashtest: %s\n", s.message().c_str());
    return kExitEnvironment;
  }
  if (k == 1) {
    want_ = std::move(tree);
    return kExitCompleted;
  }
  for (PathDiff& d : Compare(tree, dir)) {
    // The same lines in another order are never a difference; the lines
    // of such a file are still compared at every kill point.
    if (d.what == "order") continue;
    if (unstable_.insert(d.path).second) {
      report_.nondeterministic.push_back({std::move(d), k});
    }
  }
  if (o_.keep) return kExitCompleted;
  s = crashtest::RemoveTree(dir);
  if (!s.ok())
    std::fprintf(stderr, "wizq crashtest: %s\n", s.message().c_str());
  return s.ok() ? kExitCompleted : kExitEnvironment;
}

int Crashtest::Undisturbed() {
  std::vector<Commit> log, first;
  for (int k = 1; k <= o_.baseline_runs; k++) {
    const std::string dir =
        k == 1 ? want_root_ : want_root_ + "-" + std::to_string(k);
    const int code = Baseline(k, dir, k == 1 ? &first : &log);
    if (code != kExitCompleted) return code;
  }
  want_runs_ = crashtest::ExecutionsOf(first);
  report_.undisturbed_status = crashtest::EndOf(first).status;
  report_.baseline_runs = o_.baseline_runs;
  report_.tasks = want_runs_.size();
  report_.files = want_.size();
  const std::vector<KillPoint> all = crashtest::KillPointsOf(first);
  report_.kill_points_total = all.size();
  for (const KillPoint& p : crashtest::Sample(all, o_.kills)) {
    report_.cases.push_back(CaseResult{});
    report_.cases.back().point = p;
  }
  // A resumed run redoes at most what the undisturbed one did, plus what
  // it waits for; past this it is taken to hang.
  deadline_ms_ = 60000 + 5 * report_.undisturbed_ms;
  return kExitCompleted;
}

// The end state after the last resume, against the undisturbed one.
void Crashtest::Finish(CaseResult* c) {
  std::vector<Commit> log;
  Tree got;
  Status s = crashtest::ReadCommits(install_, &log);
  if (s.ok()) s = crashtest::SnapshotTree(install_, o_.ignore, &got);
  if (!s.ok()) {
    c->error = s.message();
    return;
  }
  const crashtest::RunEnd end = crashtest::EndOf(log);
  c->status = end.status;
  c->failed = end.failed;
  c->adopted = crashtest::AdoptedOf(log);
  for (const auto& [key, runs] : crashtest::ExecutionsOf(log)) {
    auto it = want_runs_.find(key);
    const int want = it == want_runs_.end() ? 0 : it->second.executions;
    if (runs.executions > want) c->reexecuted.push_back(runs);
  }
  for (PathDiff& d : Compare(got, install_)) {
    if (unstable_.count(d.path)) continue;  // differs without a crash too
    if (d.what == "order") {
      c->reordered.push_back(d.path);
    } else {
      c->differences.push_back(std::move(d));
    }
  }
  c->matches =
      c->differences.empty() && c->status == report_.undisturbed_status;
}

CaseResult Crashtest::KillAt(const KillPoint& point, size_t n) {
  CaseResult c;
  c.point = point;
  Status s = CopyTemplate(o_.template_dir, install_);
  if (!s.ok()) {
    c.error = s.message();
    crashtest::RemoveTree(install_).IgnoreError();  // the next case's place
    return c;
  }
  ChildResult r = RunWizq(&point, deadline_ms_);
  c.crashed = r.exited && r.code == kCrashExitCode;
  // A power cut: every task process tree (and the spawner) dies with wizq,
  // and what the page cache held and nobody synced is gone: the exit
  // records the spawner wrote while wizq lived (docs/PROTOCOL.md).
  if (c.crashed && !o_.orchestrator_only) {
    crashtest::KillDescendants();
    crashtest::DropUnsyncedExitRecords(install_);
  }
  while (c.crashed && c.resumes < kMaxResumes && !r.interrupted) {
    c.resumes++;
    r = RunWizq(nullptr, deadline_ms_);
    if (!r.exited || r.code != kCrashExitCode) break;
  }
  crashtest::KillDescendants();  // what a task left running
  c.exit_code = r.exited ? r.code : -1;
  if (r.interrupted) return c;
  if (!r.exited || (r.code != kExitCompleted && r.code != kExitTaskFailed)) {
    c.error =
        "wizq run " + r.Describe() + ": " + LastLine(scratch_ + "/wizq.err");
  } else {
    Finish(&c);
  }
  s = Retire("kill-" + std::to_string(n));
  if (!s.ok() && c.error.empty()) c.error = s.message();
  return c;
}

int Crashtest::Run() {
  int code = Prepare();
  if (code != kExitCompleted) return code;
  report_.workflow = o_.workflow;
  report_.mode = o_.orchestrator_only ? "orchestrator_only" : "power_cut";
  code = Undisturbed();
  for (size_t i = 0; code == kExitCompleted && i < report_.cases.size(); i++) {
    CaseResult& c = report_.cases[i];
    c = KillAt(c.point, i + 1);
    if (crashtest::Interrupted()) code = kExitInterrupted;
    Progress(std::to_string(i + 1) + "/" +
             std::to_string(report_.cases.size()) + " " + c.point.name + ": " +
             (code != kExitCompleted ? "interrupted"
              : !c.error.empty()     ? "error"
              : c.matches            ? "same"
                                     : "DIFFERENT"));
  }
  crashtest::KillDescendants();
  if (o_.keep) {
    report_.scratch = scratch_;
    Progress("scratch directories kept in " + scratch_);
  } else if (!crashtest::RemoveTree(scratch_).ok()) {
    Progress("could not remove " + scratch_);
  }
  if (code != kExitCompleted) return code;
  if (o_.json) {
    crashtest::PrintJson(report_);
  } else {
    crashtest::PrintTable(report_);
  }
  for (const CaseResult& c : report_.cases) {
    if (!c.error.empty()) return kExitEnvironment;
  }
  for (const CaseResult& c : report_.cases) {
    if (!c.matches) return kExitTaskFailed;
  }
  return kExitCompleted;
}

}  // namespace

CLI::App* AddCrashtestCommand(CLI::App* app, CrashtestOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "crashtest", "Kill -9 a workflow at every durable step and compare");
  cmd->add_option("WORKFLOW", o->workflow, "Workflow file")->required();
  auto* input = cmd->add_option("--input", o->input, "Entry input (JSON)");
  cmd->add_option("--input-file", o->input_file,
                  "Read the entry input from a file")
      ->excludes(input);
  cmd->add_option("--template", o->template_dir,
                  "Directory each run starts from (default: an empty one)");
  cmd->add_option("--kills", o->kills,
                  "Test N kill points, spread evenly (default: all)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--baseline-runs", o->baseline_runs,
                  "Undisturbed runs; paths that differ between them are not "
                  "compared (default: 3)")
      ->check(CLI::Range(1, 100));
  auto* cut = cmd->add_flag("--power-cut", o->power_cut,
                            "Kill wizq and every task tree (the default)");
  cmd->add_flag("--orchestrator-only", o->orchestrator_only,
                "Kill wizq alone; its task trees run on")
      ->excludes(cut);
  cmd->add_option("--ignore", o->ignore,
                  "Skip paths matching GLOB when comparing (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--keep", o->keep, "Keep the scratch directories");
  cmd->add_flag("--json", o->json, "One JSON object on stdout");
  cmd->add_option("--jobs,-j", o->jobs, "Passed to wizq run")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--agent", o->agent,
                  "Passed to wizq run: the agent for Pool steps");
  cmd->add_option("--answer", o->answers,
                  "Passed to wizq run: STEP=VALUE answers a Prompt step "
                  "(repeatable)")
      ->allow_extra_args(false);
  return cmd;
}

int RunCrashtest(const CrashtestOptions& options) {
  return Crashtest(options).Run();
}

}  // namespace wizq
