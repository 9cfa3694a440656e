// What a person sees of `wizq run` (docs/CLI.md, "Progress", "Signals",
// "--halt"): the live line on a terminal (driven in tmux panes), Ctrl+C,
// a second Ctrl+C, SIGHUP, Ctrl+Z, --quiet with failures, --halt. The
// workflows are in tests/data/progress/.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using test::Contains;
using test::Json;
using test::ReadAll;
using test::RunWizq;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

std::string Workflow(const std::string& name) {
  return test::SourceDir() + "/tests/data/progress/" + name;
}

// One tmux server of its own (a unique socket) with one pane of
// `columns` x 10 running `command` (exec'd by sh); the pane stays after the
// command exits, so that its exit status can be read.
class Tmux {
 public:
  Tmux(int columns, const std::string& command) {
    static std::atomic<int> counter{0};
    socket_ = "wizq-test-" + std::to_string(getpid()) + "-" +
              std::to_string(counter++);
    ok_ = Tmux::Run({"-f", "/dev/null", "new-session", "-d", "-x",
                     std::to_string(columns), "-y", "10", "exec " + command,
                     ";", "set-option", "-g", "remain-on-exit", "on"})
              .code == 0;
  }
  ~Tmux() { Run({"kill-server"}); }

  bool ok() const { return ok_; }
  // The pane's rows, as shown.
  std::vector<std::string> Rows() {
    std::vector<std::string> rows;
    std::string text = Run({"capture-pane", "-p"}).out;
    size_t start = 0;
    while (start < text.size()) {
      size_t nl = text.find('\n', start);
      if (nl == std::string::npos) nl = text.size();
      rows.push_back(text.substr(start, nl - start));
      start = nl + 1;
    }
    return rows;
  }
  std::string Screen() {
    std::string s;
    for (const std::string& r : Rows()) s += r + "\n";
    return s;
  }
  // The rows joined without line breaks: a wrapped line is whole again.
  std::string Text() {
    std::string s;
    for (const std::string& r : Rows()) s += r;
    return s;
  }
  // The screen with its colours as escape sequences.
  std::string Escaped() { return Run({"capture-pane", "-p", "-e"}).out; }
  void Keys(const std::string& keys) { Run({"send-keys", keys}); }
  // -1 while the command runs, then its exit status; kUnknown when tmux
  // says the pane is dead but never learnt how its process ended (seen
  // under load with several tmux servers: the status stays empty).
  static constexpr int kUnknown = 1000;
  int DeadStatus() {
    const std::string out =
        Run({"display-message", "-p",
             "#{pane_dead} #{pane_dead_status} #{pane_dead_signal}"})
            .out;
    if (out.rfind("1 ", 0) != 0) return -1;
    // tmux may mark the pane dead (its terminal closed) before it has
    // reaped the process: no status and no signal yet is "not yet".
    int status = -1, signo = -1;
    const char* p = out.c_str() + 2;
    if (*p != ' ') status = std::atoi(p);
    const char* sig = std::strchr(p, ' ');
    if (sig != nullptr && sig[1] >= '0' && sig[1] <= '9') {
      signo = std::atoi(sig + 1);
    }
    if (status >= 0) return status;
    return signo > 0 ? 128 + signo : kUnknown;
  }
  void KillSession() { Run({"kill-session"}); }

 private:
  WizqResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/tmux", "-L", socket_});
    return RunWizq(args);
  }
  std::string socket_;
  bool ok_ = false;
};

// The row the live line is drawn on ("[done/total] ..."), or -1.
int LiveRow(const std::vector<std::string>& rows) {
  int found = -1;
  for (size_t i = 0; i < rows.size(); i++) {
    if (rows[i].rfind("[", 0) == 0 && Contains(rows[i], "/")) {
      found = static_cast<int>(i);
    }
  }
  return found;
}

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

class ProgressCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  // The command line a pane runs: `wizq run WORKFLOW --dir <scratch>`.
  std::string Command(const std::string& workflow, const std::string& env,
                      const std::string& input = "",
                      const std::string& dir = "") {
    return "env " + env + " " + test::WizqPath() + " run " +
           Workflow(workflow) + " --dir " + (dir.empty() ? dir_.path() : dir) +
           (input.empty() ? "" : " --input " + Quoted(input));
  }
  std::vector<Json> Audit() { return test::ReadAudit(dir_.path()); }
  // The task_reset events: each must be an uncharged interruption.
  int UnchargedResets() {
    int n = 0;
    for (const Json& e : Audit()) {
      if (e["event"] != "task_reset") continue;
      EXPECT_EQ(e["reason"], "interrupted") << e.dump();
      EXPECT_EQ(e.value("refund", false), true) << e.dump();
      n++;
    }
    return n;
  }
  bool Started() { return !ReadAll(dir_.Join("started")).empty(); }

  ScratchDir dir_;
};

// A 40-column pane: the live line stays on one row (cut to the width, by
// display columns, wide characters included), so the pane never scrolls.
TEST_F(ProgressCliTest, NarrowPaneKeepsTheLiveLineOnOneRow) {
  struct Case {
    int columns;
    std::string workflow, input;
    std::string settled;  // in the live line once only it changes
  };
  // fail.jsonc: "[2/4] 1s, ETA 1s, 1 failed, 2 running, longest 1s: Item
  // a.txt, Item b.txt"; wait.jsonc: a value of wide characters cut in the
  // middle.
  for (const Case& c :
       {Case{40, "fail.jsonc", "", "1 failed"},
        Case{50, "wait.jsonc", R"({"name":"漢字漢字漢字漢字漢字漢字漢字漢字"})",
             "[0/1]"}}) {
    SCOPED_TRACE(c.workflow);
    ScratchDir dir;
    Tmux tmux(c.columns, Command(c.workflow, "NAP=3", c.input, dir.path()));
    ASSERT_TRUE(tmux.ok());
    int row = -1;
    ASSERT_TRUE(test::WaitFor(
        [&] {
          const std::vector<std::string> rows = tmux.Rows();
          row = LiveRow(rows);
          return row >= 0 && Contains(rows[row], c.settled);
        },
        test::seconds(20)))
        << tmux.Screen();
    for (int i = 0; i < 4; i++) {
      const std::vector<std::string> rows = tmux.Rows();
      EXPECT_EQ(LiveRow(rows), row) << "the pane scrolled:\n" << tmux.Screen();
      ASSERT_GE(LiveRow(rows), 0) << tmux.Screen();
      EXPECT_TRUE(rows[row + 1].empty()) << "the live line wrapped:\n"
                                         << tmux.Screen();
      EXPECT_TRUE(Contains(rows[row], "…")) << "not cut: " << rows[row];
      std::this_thread::sleep_for(test::milliseconds(300));
    }
  }
}

// The clock moves while a 3-second task runs, with no event to redraw on.
TEST_F(ProgressCliTest, ClockAdvancesDuringALongTask) {
  Tmux tmux(80, Command("wait.jsonc", "NAP=3", R"({"name":"x.txt"})"));
  ASSERT_TRUE(tmux.ok());
  const std::regex longest(R"(longest (\d+)(ms|s))");
  std::set<std::string> seen;
  const auto start = test::Clock::now();
  while (test::Clock::now() - start < test::milliseconds(2600)) {
    const std::vector<std::string> rows = tmux.Rows();
    const int row = LiveRow(rows);
    std::smatch m;
    if (row >= 0 && std::regex_search(rows[row], m, longest)) {
      EXPECT_TRUE(Contains(rows[row], "Wait x.txt")) << rows[row];
      seen.insert(m[0]);
    }
    std::this_thread::sleep_for(test::milliseconds(200));
  }
  EXPECT_GE(seen.size(), 2u) << "the line did not move:\n" << tmux.Screen();
}

// Ctrl+C: the note says what happens; the task (which ignores SIGTERM)
// would get 5 seconds, but a second Ctrl+C ends it at once. The run is
// resumable, no attempt charged.
TEST_F(ProgressCliTest, CtrlCThenSecondCtrlCStopsAtOnce) {
  Tmux tmux(80, Command("wait.jsonc", "NAP=30"));
  ASSERT_TRUE(tmux.ok());
  ASSERT_TRUE(test::WaitFor([&] { return Started(); }, test::seconds(20)))
      << tmux.Screen();
  tmux.Keys("C-c");
  ASSERT_TRUE(test::WaitFor(
      [&] { return Contains(tmux.Text(), "interrupted: stopping 1"); },
      test::seconds(10)))
      << tmux.Screen();
  EXPECT_TRUE(Contains(tmux.Text(), "Ctrl+C again")) << tmux.Screen();
  EXPECT_EQ(tmux.DeadStatus(), -1) << "ended before the grace:\n"
                                   << tmux.Screen();
  const auto second = test::Clock::now();
  tmux.Keys("C-c");
  ASSERT_TRUE(
      test::WaitFor([&] { return tmux.DeadStatus() >= 0; }, test::seconds(20)));
  EXPECT_LT(test::Clock::now() - second, test::milliseconds(2500))
      << "the second Ctrl+C did not stop it at once";
  // Allow tmux a moment to record the status; then it must be 130.
  test::WaitFor([&] { return tmux.DeadStatus() != Tmux::kUnknown; },
                test::seconds(2));
  if (tmux.DeadStatus() != Tmux::kUnknown) {
    EXPECT_EQ(tmux.DeadStatus(), 130) << tmux.Screen();
  }
  EXPECT_EQ(UnchargedResets(), 1);
  EXPECT_EQ(test::StatusJson(dir_.path())["counts"]["pending"], 1);
}

// A closed terminal (the pane's session killed: SIGHUP) is an interruption
// like Ctrl+C: the task is ended and put back, no attempt charged, and the
// run resumes.
TEST_F(ProgressCliTest, SighupLeavesAResumableRun) {
  {
    Tmux tmux(80, Command("wait.jsonc", "NAP=30"));
    ASSERT_TRUE(tmux.ok());
    ASSERT_TRUE(test::WaitFor([&] { return Started(); }, test::seconds(20)))
        << tmux.Screen();
    tmux.KillSession();
  }
  // The task ignores SIGTERM: it ends at the end of the grace (5s).
  ASSERT_TRUE(test::WaitFor(
      [&] {
        for (const Json& e : Audit()) {
          if (e["event"] == "worker_left") return true;
        }
        return false;
      },
      test::seconds(20)))
      << "wizq did not leave the run cleanly";
  EXPECT_EQ(UnchargedResets(), 1);
  const Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["counts"]["in_progress"], 0) << st.dump();
  EXPECT_EQ(st["counts"]["pending"], 1) << st.dump();
  const WizqResult r =
      RunWizq({"wizq", "run", Workflow("wait.jsonc"), "--dir", dir_.path()},
              {"", {{"NAP", "0"}}});
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(test::StatusJson(dir_.path())["tasks"][0]["attempts"], 1);
}

// Ctrl+Z (SIGTSTP) stops the task with wizq; SIGCONT resumes both, and the
// time stopped does not count towards the task's 3-second timeout.
TEST_F(ProgressCliTest, CtrlZStopsTasksAndTheirTimeoutClock) {
  WizqProcess run(
      {"wizq", "run", Workflow("ticks.jsonc"), "--dir", dir_.path()});
  ASSERT_TRUE(test::WaitFor(
      [&] { return ReadAll(dir_.Join("ticks")).size() >= 4 || run.Poll(); },
      test::seconds(20)));
  run.Kill(SIGTSTP);
  std::this_thread::sleep_for(test::milliseconds(500));
  const std::string before = ReadAll(dir_.Join("ticks"));
  std::this_thread::sleep_for(test::milliseconds(3500));
  EXPECT_EQ(ReadAll(dir_.Join("ticks")), before)
      << "the task went on while wizq was stopped";
  run.Kill(SIGCONT);
  const WizqResult& r = run.Wait(test::seconds(30));
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(ReadAll(dir_.Join("ticks")), "1\n2\n3\n4\n5\n6\n7\n8\n");
}

// The most attempts claimed and not finished at once, by the audit log.
int MostHeld(const std::vector<Json>& audit) {
  std::set<int64_t> held;
  size_t most = 0;
  for (const Json& e : audit) {
    const std::string ev = e["event"];
    if (ev == "task_claimed") held.insert(e["id"].get<int64_t>());
    if (ev == "task_completed" || ev == "task_failed" || ev == "task_reset") {
      held.erase(e["id"].get<int64_t>());
    }
    most = std::max(most, held.size());
  }
  return static_cast<int>(most);
}

// When each attempt's shell started ("<task>.<attempt>" -> wall ms), by
// the journal's start lines (tasks/exec/attempt_journal.h).
std::map<std::string, int64_t> JournalStarts(const std::string& dir) {
  std::map<std::string, int64_t> out;
  std::istringstream in(ReadAll(test::TaskFilesDir(dir) + "/attempts.journal"));
  std::string kind, key, attempt, pid, ticks, boot;
  int64_t ms = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    if (l >> kind >> key >> attempt >> pid >> ticks >> boot >> ms &&
        kind == "start") {
      out[key + "." + attempt] = ms;
    }
  }
  return out;
}

// Every task_started (--json) comes when its shell runs, not before: its
// time is not earlier than the journal's start line; a task_queued, if
// any, comes first. Returns how many task_queued there were.
int CheckStartsAreReal(const std::string& dir, const std::string& ndjson) {
  const std::map<std::string, int64_t> starts = JournalStarts(dir);
  std::set<std::string> queued, started;
  for (const Json& e : test::ParseJsonLines(ndjson)) {
    if (e["event"] != "task_started" && e["event"] != "task_queued") continue;
    const std::string key = std::to_string(e["id"].get<int64_t>()) + "." +
                            std::to_string(e["attempt"].get<int>());
    if (e["event"] == "task_queued") {
      EXPECT_EQ(started.count(key), 0u) << key << " queued after its start";
      queued.insert(key);
      continue;
    }
    EXPECT_TRUE(started.insert(key).second) << key << " started twice";
    auto it = starts.find(key);
    if (it == starts.end()) {
      ADD_FAILURE() << "attempt " << key << " has no start in the journal";
      continue;
    }
    // Under ThreadSanitizer vfork is a fork: the spawner tells the start
    // before the child wrote its journal line.
    if (test::UnderThreadSanitizer()) continue;
    EXPECT_GE(e["ts"].get<int64_t>(), it->second)
        << "attempt " << key << " was reported started "
        << it->second - e["ts"].get<int64_t>() << " ms before its shell ran";
  }
  EXPECT_EQ(started.size(), starts.size());
  return static_cast<int>(queued.size());
}

// Tasks of 1 to 3 s with -j 3: never queued in the spawner nor claimed
// ahead (Root's one short attempt is no history), so no more than 3
// attempts are claimed and unfinished at once; each "started" line (and
// task_started) comes when the task's shell starts, and the log never
// shows more than 3 started tasks unfinished.
TEST_F(ProgressCliTest, SlowTasksAreNeitherQueuedNorClaimedAhead) {
  const WizqResult r = RunWizq({"wizq", "run", Workflow("slow.jsonc"), "--dir",
                                dir_.path(), "-j", "3", "--json"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(MostHeld(Audit()), 3);
  EXPECT_EQ(CheckStartsAreReal(dir_.path(), r.out), 0) << r.out;
  int unfinished = 0, most = 0;
  for (const std::string& line : test::SplitLines(r.err)) {
    if (Contains(line, " Slow started ")) most = std::max(most, ++unfinished);
    if (Contains(line, " Slow done ")) unfinished--;
  }
  EXPECT_EQ(most, 3) << r.err;
}

// Short tasks still wait in the spawner beyond the slots (once 8 have
// ended): more than -j attempts are claimed at once, each queued one is
// told as task_queued first and as task_started when its shell runs.
TEST_F(ProgressCliTest, ShortTasksQueueAheadAndStartWhenTheyRun) {
  const WizqResult r = RunWizq({"wizq", "run", Workflow("fast.jsonc"), "--dir",
                                dir_.path(), "-j", "2", "--json", "--quiet"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_GT(MostHeld(Audit()), 2);
  EXPECT_GT(CheckStartsAreReal(dir_.path(), r.out), 0) << "none queued";
}

// --quiet hides progress, never failures: the run ends with the list
// (task, step, value, reason, the last stderr lines, the stderr file).
// Without --quiet, deduplicated children are counted.
TEST_F(ProgressCliTest, QuietRunListsItsFailures) {
  const std::vector<std::string> cmd = {"wizq", "run", Workflow("fail.jsonc"),
                                        "--dir", dir_.path()};
  std::vector<std::string> quiet = cmd;
  quiet.push_back("--quiet");
  const WizqResult r = RunWizq(quiet);
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_FALSE(Contains(r.err, "started run")) << r.err;
  EXPECT_FALSE(Contains(r.err, "Item started")) << r.err;
  const std::string file = test::TaskFilesDir(dir_.path()) + "/2.1.stderr";
  for (const std::string& part :
       {std::string("1 task(s) FAILED:"),
        std::string("task 2 Bad [c.txt]: exit_code: exit code 3"),
        std::string("| first words"), std::string("| last words"),
        "stderr: " + file}) {
    EXPECT_TRUE(Contains(r.err, part)) << part << " missing:\n" << r.err;
  }
  EXPECT_FALSE(Contains(r.err, "\033[")) << "colour off a terminal";
  std::vector<std::string> fresh = cmd;
  fresh.insert(fresh.end(), {"--fresh", "--no-reuse"});
  const WizqResult v = RunWizq(fresh);
  EXPECT_TRUE(Contains(v.err, "task 1 Root done (+3 tasks, 1 deduplicated)"))
      << v.err;
  EXPECT_TRUE(Contains(v.err, "task 3 Item started (attempt 1) [a.txt]"))
      << v.err;
  EXPECT_TRUE(Contains(v.err, "1 task(s) FAILED:")) << v.err;
}

// --halt now,fail=1: the first failure stops the running task as Ctrl+C
// does (put back, uncharged); soon: it finishes, nothing new starts. Both
// leave the rest pending and exit 1; the run resumes.
TEST_F(ProgressCliTest, HaltNowAndSoon) {
  for (const std::string when : {"now", "soon"}) {
    SCOPED_TRACE(when);
    ScratchDir dir;
    test::StartOver(dir.path());  // with a store: a new run each
    const std::vector<std::string> cmd = {
        "wizq", "run", Workflow("fail.jsonc"), "--dir", dir.path(), "-j", "2"};
    std::vector<std::string> halt = cmd;
    halt.insert(halt.end(), {"--halt", when + ",fail=1"});
    const WizqResult r = RunWizq(halt, {"", {{"NAP", "2"}}});
    ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
    EXPECT_TRUE(Contains(r.err, "halted (--halt " + when + ",fail=1)"))
        << r.err;
    EXPECT_TRUE(Contains(r.err, "1 task(s) FAILED:")) << r.err;
    Json st = test::StatusJson(dir.path());
    EXPECT_EQ(st["status"], "running") << st.dump();
    EXPECT_EQ(st["counts"]["in_progress"], 0) << st.dump();
    EXPECT_EQ(st["counts"]["failed"], 1) << st.dump();
    // now: both Items pending, Item a's attempt refunded; soon: Item a ran.
    EXPECT_EQ(st["counts"]["pending"], when == "now" ? 2 : 1) << st.dump();
    EXPECT_EQ(st["counts"]["done"], when == "now" ? 1 : 2) << st.dump();
    const WizqResult again = RunWizq(cmd, {"", {{"NAP", "0"}}});
    EXPECT_TRUE(again.exited && again.code == 1) << again.Describe();
    st = test::StatusJson(dir.path());
    EXPECT_EQ(st["counts"]["done"], 3) << st.dump();
    for (const Json& t : st["tasks"]) {
      EXPECT_EQ(t["attempts"], 1) << "an attempt was charged: " << t.dump();
    }
  }
  const WizqResult bad = RunWizq({"wizq", "run", Workflow("fail.jsonc"),
                                  "--dir", dir_.path(), "--halt", "later"});
  EXPECT_TRUE(bad.exited && bad.code == 2) << bad.Describe();
  EXPECT_TRUE(Contains(bad.err, "soon,fail=N")) << bad.err;
}

// On a terminal FAILED is red, unless NO_COLOR is set (no-color.org).
TEST_F(ProgressCliTest, FailedIsRedUnlessNoColor) {
  for (const std::string no_color : {"", "1"}) {
    SCOPED_TRACE("NO_COLOR=" + no_color);
    ScratchDir dir;
    test::StartOver(dir.path());  // with a store: a new run each
    Tmux tmux(80, Command("fail.jsonc", "NAP=0 NO_COLOR=" + no_color, "",
                          dir.path()));
    ASSERT_TRUE(tmux.ok());
    ASSERT_TRUE(test::WaitFor([&] { return tmux.DeadStatus() >= 0; },
                              test::seconds(20)));
    const std::string screen = tmux.Escaped();
    // "run failed:" (the list above it, "FAILED:", may have scrolled off).
    ASSERT_TRUE(Contains(screen, "failed")) << screen;
    EXPECT_EQ(Contains(screen, "\033[31m"), no_color.empty()) << screen;
  }
}

// Warnings are not progress: --quiet still says that a fixed --run-id
// resumed with a workflow file that differs from the run's frozen copy.
TEST_F(ProgressCliTest, QuietStillWarnsOfAChangedWorkflow) {
  const std::string wf = dir_.Join("wf.jsonc");
  std::string text = ReadAll(Workflow("wait.jsonc"));
  test::WriteAll(wf, text);
  const std::vector<std::string> cmd = {
      "wizq", "run", wf, "--dir", dir_.path(), "--run-id", "fixed", "--quiet"};
  const WizqResult first = RunWizq(cmd, {"", {{"NAP", "0"}}});
  ASSERT_TRUE(first.exited && first.code == 0) << first.Describe();
  EXPECT_EQ(first.err, "");
  text.replace(text.find("sleep ${NAP"), 5, "sleep  ");  // the script
  test::WriteAll(wf, text);
  const WizqResult r = RunWizq(cmd, {"", {{"NAP", "0"}}});
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err,
                       "warning: run fixed keeps the workflow it was "
                       "started with: " +
                           wf + " has changed since"))
      << r.err;
}

}  // namespace
}  // namespace wizq
