// wizq_torture: the kill -9 torture harness (`make torture`,
// tests/torture_test.cc, docs/RELIABILITY.md "Kill -9 torture").
//
//   wizq_torture [--wizq PATH] --mode single|group|multi --cycles N
//                [--seed S] [--fanout F] [--workdir D] [--workflow W]
//                [--keep] [--verbose]
//   wizq_torture --check DIR [--fanout F]   (the checker alone, no kills)
//
// Drives the real binary on the fan-out workflow (tests/data/cli/
// fanout.jsonc, input {"n": F}, default F = 27) and SIGKILLs it at random
// moments, then resumes, until the run completes; a completed run is
// checked and a fresh install directory starts the next one, until N
// cycles (kills) are done; the last run is then finished without kills.
//
//   single  one wizq at a time; SIGKILL to its pid. Its tasks (in their own
//           process groups) live on as orphans the next wizq must deal with.
//   group   one wizq at a time, started as the leader of its own process
//           group; SIGKILL to the whole group (kill(-pgid)). In every other
//           cycle, at random ("power cut"), also every process holding a
//           file of the run's locks/ or .wizard/tasks/ open (the task
//           trees: lib.sh's ledger lock, wizq's running.lock), and its
//           process group: nothing of the run survives the kill.
//   multi   three wizq (`--jobs 3`) share the install directory; each cycle
//           SIGKILLs one of them at random (one cycle in seven: all three)
//           and starts it again after 0-100 ms.
//
// Kill delays: 30 % 2-30 ms after the (re)start (opening, recovery, the
// first claims), 50 % 30-300 ms, 20 % 300-900 ms (tasks completing, finally
// hooks). Right after each kill, queue.json (if present) must parse and the
// committed prefix of audit.jsonl must parse, with the snapshot inside it
// (torture::CheckStateAtKill). A completed run is checked by
// torture::CheckFanoutRun (tests/torture/checker.h: lost, duplicated,
// overlapped, extra runs and their matching to kills), `wizq status --json`
// must say completed, and running wizq again must change nothing.
//
// Output: a TORTURE-DETAIL line, then one line
//   TORTURE mode=<m> cycles=<n> runs=<k> lost=0 duplicated=0 overlapped=0
//   extra_runs=<x> extra_runs_unmatched=0 queue_json_parsed_every_kill=true
// Exit 0 only if every count that must be 0 is 0, every other check held
// and the state parsed at every kill; 1 otherwise (details on stderr; the
// install directories of failed runs are kept), 2 on bad arguments.
//
// The child processes it starts and waits for: tests/torture/processes.h.
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/torture/checker.h"
#include "tests/torture/processes.h"

#ifndef WIZQ_BUILD_DIR
#define WIZQ_BUILD_DIR "build"
#endif
#ifndef WIZQ_SOURCE_DIR
#define WIZQ_SOURCE_DIR "."
#endif

namespace wizq::torture {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// --- the harness -------------------------------------------------------------

struct Options {
  std::string wizq = std::string(WIZQ_BUILD_DIR) + "/wizq";
  std::string workflow =
      std::string(WIZQ_SOURCE_DIR) + "/tests/data/cli/fanout.jsonc";
  std::string mode;
  int cycles = -1;
  uint32_t seed = 0;
  int fanout = 27;
  std::string workdir;
  bool keep = false;
  bool verbose = false;
};

struct Run {
  int number = 0;
  std::string dir;
  std::string err_log;  // wizq's stderr, every process of the run
  std::vector<Kill> kills;
  bool completed = false;
};

constexpr int kProcs = 3;  // multi mode
const auto kFinishTimeout = std::chrono::seconds(600);

class Torture {
 public:
  explicit Torture(Options opts) : o_(std::move(opts)), rng_(o_.seed) {}

  int Main();

 private:
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }
  // A kill delay, biased to hit both early and late moments.
  int PickDelayMs() {
    const int p = Uniform(0, 99);
    if (p < 30) return Uniform(2, 30);
    if (p < 80) return Uniform(30, 300);
    return Uniform(300, 900);
  }
  std::vector<std::string> RunCommand(const Run& run) const {
    std::vector<std::string> cmd = {o_.wizq,
                                    "run",
                                    o_.workflow,
                                    "--dir",
                                    run.dir,
                                    "--input",
                                    "{\"n\":" + std::to_string(o_.fanout) + "}",
                                    "--quiet"};
    if (o_.mode == "multi") {
      cmd.push_back("--jobs");
      cmd.push_back("3");
    }
    return cmd;
  }
  std::string ErrTail(const Run& run) const {
    const std::string err = ReadFileOrEmpty(run.err_log);
    return err.size() > 3000 ? "..." + err.substr(err.size() - 3000) : err;
  }
  void HarnessError(const Run& run, const std::string& msg) {
    fprintf(stderr, "wizq_torture: run %d (%s): %s\n--- wizq stderr:\n%s\n",
            run.number, run.dir.c_str(), msg.c_str(), ErrTail(run).c_str());
    harness_failed_ = true;
  }
  // Records a kill at `ms` and checks the state the kill left.
  void AfterKill(Run* run, pid_t pid, int64_t ms, int64_t delay_ms,
                 bool trees = false) {
    run->kills.push_back(Kill{pid, ms, trees});
    if (delay_ms <= 30) early_kills_++;
    const std::string bad = CheckStateAtKill(run->dir);
    if (!bad.empty()) {
      parsed_every_kill_ = false;
      fprintf(stderr, "wizq_torture: run %d (%s), after kill %d: %s\n",
              run->number, run->dir.c_str(), cycles_ + 1, bad.c_str());
    }
  }
  void CountCycle() {
    cycles_++;
    if (cycles_ % 100 == 0) {
      fprintf(stderr, "wizq_torture: mode=%s %d cycles, %d runs, %.0f s\n",
              o_.mode.c_str(), cycles_, runs_, Elapsed());
    }
  }
  double Elapsed() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }
  void KillTaskTrees(const Run& run);
  void DriveSerial(Run* run);
  void DriveMulti(Run* run);
  void Verify(Run* run);

  Options o_;
  std::mt19937 rng_;
  Clock::time_point start_ = Clock::now();
  int cycles_ = 0, runs_ = 0;
  int lost_ = 0, duplicated_ = 0, overlapped_ = 0, extra_runs_ = 0;
  int matched_ = 0, unmatched_ = 0, resets_ = 0, joins_ = 0, tasks_ = 0;
  int errors_ = 0;
  int early_kills_ = 0, power_cuts_ = 0, kill_alls_ = 0;
  bool hooks_ok_ = true, parsed_every_kill_ = true, harness_failed_ = false;
};

// SIGKILLs every process holding a file of the run's task trees open, and
// its process group, until none is left.
void Torture::KillTaskTrees(const Run& run) {
  const std::vector<std::string> prefixes = {run.dir + "/locks/",
                                             run.dir + "/.wizard/tasks/"};
  const pid_t own_group = getpgrp();
  for (int round = 0; round < 200; round++) {
    const std::vector<pid_t> pids = ProcessesHolding(prefixes);
    if (pids.empty()) return;
    for (pid_t pid : pids) {
      const pid_t group = getpgid(pid);
      if (group > 1 && group != own_group) kill(-group, SIGKILL);
      kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(milliseconds(2));
    ReapAll();
  }
}

// single and group: one wizq at a time.
void Torture::DriveSerial(Run* run) {
  const bool group = o_.mode == "group";
  while (!run->completed && cycles_ < o_.cycles) {
    const pid_t pid = Spawn(RunCommand(*run), run->err_log);
    if (pid < 0) return HarnessError(*run, "fork failed");
    const int delay = PickDelayMs();
    int status = 0;
    if (!WaitFor(pid, milliseconds(delay), &status)) {
      kill(group ? -pid : pid, SIGKILL);
      const int64_t ms = WallMs();
      if (!WaitFor(pid, std::chrono::seconds(30), &status)) {
        return HarnessError(*run, "a SIGKILLed wizq did not die");
      }
      // The power cut: the task trees go too, once wizq can no longer
      // start any.
      const bool trees = group && Uniform(0, 1) == 1;
      if (trees) {
        KillTaskTrees(*run);
        power_cuts_++;
      }
      if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
        AfterKill(run, pid, ms, delay, trees);
        CountCycle();
        continue;
      }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      run->completed = true;
    } else {
      return HarnessError(*run, "wizq ended with " + DescribeStatus(status));
    }
  }
  if (!run->completed) {  // out of cycles: finish it without kills
    const int status = RunToEnd(RunCommand(*run), run->err_log, kFinishTimeout);
    if (status != 0) {
      return HarnessError(*run, status < 0 ? std::string("wizq hung (killed)")
                                           : "the final wizq ended with " +
                                                 DescribeStatus(status));
    }
    run->completed = true;
  }
}

// multi: three wizq share the directory; one (or all) killed each cycle.
void Torture::DriveMulti(Run* run) {
  const std::vector<std::string> cmd = RunCommand(*run);
  std::vector<pid_t> procs(kProcs, -1);
  for (pid_t& p : procs) p = Spawn(cmd, run->err_log);
  // Polls them all; a process that ended leaves -1. False on an error.
  auto poll = [&]() {
    for (pid_t& p : procs) {
      int status = 0;
      if (p < 0 || !TryWait(p, &status)) continue;
      p = -1;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        run->completed = true;
      } else {
        HarnessError(*run, "a wizq ended with " + DescribeStatus(status));
        return false;
      }
    }
    return true;
  };
  while (!run->completed && cycles_ < o_.cycles && !harness_failed_) {
    const int delay = PickDelayMs();
    const Clock::time_point until = Clock::now() + milliseconds(delay);
    while (poll() && !run->completed && Clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    if (run->completed || harness_failed_) break;
    std::vector<int> victims;
    if (Uniform(0, 6) == 0) {
      for (int i = 0; i < kProcs; i++) victims.push_back(i);
      kill_alls_++;
    } else {
      victims.push_back(Uniform(0, kProcs - 1));
    }
    for (int v : victims) kill(procs[v], SIGKILL);
    const int64_t ms = WallMs();
    bool killed_any = false;
    for (int v : victims) {
      int status = 0;
      if (!WaitFor(procs[v], std::chrono::seconds(30), &status)) {
        return HarnessError(*run, "a SIGKILLed wizq did not die");
      }
      if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
        AfterKill(run, procs[v], ms, delay);
        killed_any = true;
      } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        run->completed = true;
      } else {
        return HarnessError(*run,
                            "a wizq ended with " + DescribeStatus(status));
      }
      procs[v] = -1;
    }
    if (killed_any) CountCycle();
    if (run->completed) break;
    std::this_thread::sleep_for(milliseconds(Uniform(0, 100)));
    for (int v : victims) procs[v] = Spawn(cmd, run->err_log);
  }
  // No more kills: they all finish the run.
  const Clock::time_point until = Clock::now() + kFinishTimeout;
  while (!harness_failed_) {
    if (!poll()) break;
    if (std::all_of(procs.begin(), procs.end(), [](pid_t p) { return p < 0; }))
      break;
    if (Clock::now() > until) {
      for (pid_t p : procs) {
        if (p > 0) kill(p, SIGKILL);
      }
      return HarnessError(*run, "wizq hung (killed)");
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  if (!run->completed && !harness_failed_) {
    HarnessError(*run, "every wizq ended, yet none said the run completed");
  }
}

void Torture::Verify(Run* run) {
  const RunCheck c =
      CheckFanoutRun(run->dir, o_.fanout, run->kills, o_.mode != "multi");
  std::vector<std::string> errors = c.errors;
  // `wizq status --json` agrees; and a completed run is not run again.
  const std::string status_out = run->dir + ".status.json";
  const int st = RunToEnd({o_.wizq, "status", "--dir", run->dir, "--json"},
                          run->err_log, std::chrono::seconds(120), status_out);
  const Json status = ParseJsonOrDiscarded(ReadFileOrEmpty(status_out));
  fs::remove(status_out);
  if (st != 0 || !status.is_object()) {
    errors.push_back("wizq status --json: " + DescribeStatus(st));
  } else if (status["status"] != "completed" ||
             status["counts"]["failed"] != 0 ||
             status["counts"]["pending"] != 0 ||
             status["counts"]["in_progress"] != 0 ||
             status["tasks"].size() != static_cast<size_t>(c.tasks)) {
    errors.push_back("wizq status --json: " + status["status"].dump() + " " +
                     status["counts"].dump());
  }
  const std::string audit_before =
      ReadFileOrEmpty(run->dir + "/.wizard/audit.jsonl");
  const std::string ledger_before = ReadFileOrEmpty(run->dir + "/ledger");
  const int again =
      RunToEnd(RunCommand(*run), run->err_log, std::chrono::seconds(120));
  if (again != 0) {
    errors.push_back("wizq run on the completed run: " + DescribeStatus(again));
  }
  if (ReadFileOrEmpty(run->dir + "/.wizard/audit.jsonl") != audit_before ||
      ReadFileOrEmpty(run->dir + "/ledger") != ledger_before) {
    errors.push_back(
        "wizq run on the completed run changed the log or ran "
        "tasks");
  }

  runs_++;
  tasks_ += c.tasks;
  lost_ += c.lost;
  duplicated_ += c.duplicated;
  overlapped_ += c.overlapped;
  extra_runs_ += c.extra_runs;
  matched_ += c.extra_runs_matched;
  unmatched_ += c.extra_runs_unmatched;
  resets_ += c.resets;
  joins_ += c.joins;
  hooks_ok_ = hooks_ok_ && c.hook_runs_ok;
  errors_ += static_cast<int>(errors.size());
  if (o_.verbose || !errors.empty()) {
    fprintf(stderr,
            "wizq_torture: run %d (%s): kills=%zu tasks=%d resets=%d "
            "extra_runs=%d matched=%d unmatched=%d lost=%d duplicated=%d "
            "overlapped=%d errors=%zu\n",
            run->number, run->dir.c_str(), run->kills.size(), c.tasks, c.resets,
            c.extra_runs, c.extra_runs_matched, c.extra_runs_unmatched, c.lost,
            c.duplicated, c.overlapped, errors.size());
  }
  for (size_t i = 0; i < errors.size() && i < 40; i++) {
    fprintf(stderr, "  %s\n", errors[i].c_str());
  }
  if (!errors.empty()) {
    fprintf(stderr, "  (install directory kept: %s; kills:", run->dir.c_str());
    for (const Kill& k : run->kills) {
      fprintf(stderr, " %lld@%lld", static_cast<long long>(k.pid),
              static_cast<long long>(k.ms));
    }
    fprintf(stderr, ")\n");
  } else if (!o_.keep) {
    std::error_code ec;
    fs::remove_all(run->dir, ec);
  }
}

int Torture::Main() {
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  while (!harness_failed_ && (cycles_ < o_.cycles || runs_ == 0)) {
    Run run;
    run.number = runs_ + 1;
    run.dir = o_.workdir + "/run-" + std::to_string(run.number);
    run.err_log = o_.workdir + "/run-" + std::to_string(run.number) + ".err";
    if (o_.mode == "multi") {
      DriveMulti(&run);
    } else {
      DriveSerial(&run);
    }
    if (harness_failed_) break;
    Verify(&run);
    std::error_code ec;
    if (!o_.keep && errors_ == 0) fs::remove(run.err_log, ec);
  }
  const bool ok = !harness_failed_ && errors_ == 0 && lost_ == 0 &&
                  duplicated_ == 0 && overlapped_ == 0 && unmatched_ == 0 &&
                  hooks_ok_ && parsed_every_kill_;
  printf(
      "TORTURE-DETAIL mode=%s seed=%u fanout=%d kills_within_30ms=%d "
      "power_cuts=%d kill_all=%d tasks=%d resets=%d joins=%d "
      "extra_runs_matched=%d "
      "hook_runs_ok=%s other_errors=%d harness_error=%s elapsed_s=%.1f\n",
      o_.mode.c_str(), o_.seed, o_.fanout, early_kills_, power_cuts_,
      kill_alls_, tasks_, resets_, joins_, matched_,
      hooks_ok_ ? "true" : "false", errors_, harness_failed_ ? "true" : "false",
      Elapsed());
  printf(
      "TORTURE mode=%s cycles=%d runs=%d lost=%d duplicated=%d overlapped=%d "
      "extra_runs=%d extra_runs_unmatched=%d "
      "queue_json_parsed_every_kill=%s\n",
      o_.mode.c_str(), cycles_, runs_, lost_, duplicated_, overlapped_,
      extra_runs_, unmatched_, parsed_every_kill_ ? "true" : "false");
  fflush(stdout);
  if (ok && !o_.keep) {
    std::error_code ec;
    fs::remove(o_.workdir, ec);  // only if empty: our own directory
  }
  return ok ? 0 : 1;
}

int Usage(const char* msg) {
  fprintf(stderr,
          "wizq_torture: %s\nusage: wizq_torture [--wizq PATH] --mode "
          "single|group|multi --cycles N [--seed S] [--fanout F] "
          "[--workdir D] [--workflow W] [--keep] [--verbose]\n"
          "       wizq_torture --check DIR [--fanout F]\n",
          msg);
  return 2;
}

// --check DIR: the checker alone, on a run that was never killed.
int CheckOnly(const std::string& dir, int fanout) {
  const RunCheck c = CheckFanoutRun(dir, fanout, {}, /*one_process=*/true);
  for (const std::string& e : c.errors) fprintf(stderr, "  %s\n", e.c_str());
  printf(
      "CHECK tasks=%d lost=%d duplicated=%d overlapped=%d extra_runs=%d "
      "extra_runs_unmatched=%d hook_runs_ok=%s errors=%zu\n",
      c.tasks, c.lost, c.duplicated, c.overlapped, c.extra_runs,
      c.extra_runs_unmatched, c.hook_runs_ok ? "true" : "false",
      c.errors.size());
  return c.ok() ? 0 : 1;
}

int Main(int argc, char** argv) {
  Options o;
  bool have_seed = false;
  std::string check_dir;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    const char* v = nullptr;
    if (a == "--keep") {
      o.keep = true;
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if ((v = value()) == nullptr) {
      return Usage(("missing value or unknown option: " + a).c_str());
    } else if (a == "--wizq") {
      o.wizq = v;
    } else if (a == "--workflow") {
      o.workflow = v;
    } else if (a == "--mode") {
      o.mode = v;
    } else if (a == "--cycles") {
      o.cycles = atoi(v);
    } else if (a == "--seed") {
      o.seed = static_cast<uint32_t>(strtoul(v, nullptr, 10));
      have_seed = true;
    } else if (a == "--fanout") {
      o.fanout = atoi(v);
    } else if (a == "--workdir") {
      o.workdir = v;
    } else if (a == "--check") {
      check_dir = v;
    } else {
      return Usage(("unknown option: " + a).c_str());
    }
  }
  if (!check_dir.empty()) return CheckOnly(check_dir, o.fanout);
  if (o.mode != "single" && o.mode != "group" && o.mode != "multi") {
    return Usage("--mode must be single, group or multi");
  }
  if (o.cycles < 0) return Usage("--cycles N is required");
  if (o.fanout < 0) return Usage("--fanout must be >= 0");
  if (!have_seed) o.seed = std::random_device{}();
  std::error_code ec;
  if (o.workdir.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/wizq-torture-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) return Usage("mkdtemp failed");
    o.workdir = tmpl;
  } else {
    fs::create_directories(o.workdir, ec);
  }
  // Canonical paths: wizq canonicalizes --dir, and /proc shows real paths.
  o.workdir = fs::canonical(o.workdir, ec).string();
  if (ec) return Usage(("bad --workdir: " + ec.message()).c_str());
  o.wizq = fs::absolute(o.wizq, ec).string();
  o.workflow = fs::absolute(o.workflow, ec).string();
  if (access(o.wizq.c_str(), X_OK) != 0) {
    return Usage(("not executable: " + o.wizq).c_str());
  }
  signal(SIGPIPE, SIG_IGN);
  Torture t(o);
  return t.Main();
}

}  // namespace
}  // namespace wizq::torture

int main(int argc, char** argv) { return wizq::torture::Main(argc, argv); }
