// The crash-point sweep: for every named crash point of util/crash_point.h
// (kCrashPoints) and every n = 1..WIZQ_SWEEP_N (default 3), the real `wizq`
// binary runs the fan-out workflow of tests/data/crash/sweep.jsonc with
// WIZQ_CRASH_AT=<point>:<n>, so that it _exit(86)s the n-th time it passes
// that point. Then:
//   - right after the crash, `wizq status --json` must work and parse, and so
//     must queue.json if there is one;
//   - plain `wizq run` (the same arguments) resumes until it exits 0;
//   - every task is done exactly once, each <type, inputs> was submitted
//     once, the finally hook ran once and after every other task had ended,
//     no task ran more often than 1 + the number of crashes, no two attempts
//     of a task overlapped, and audit.jsonl is one gap-free `seq` sequence.
// A point that a run never passes n times is recorded as "not reached"
// (wizq then exits 0); every point must be reached for some n, so a new
// point without a way to reach it here fails its test.
//
// Points that need a setup:
//   torn.after_copy        a run is crashed first and a partial line is
//                          appended to its audit.jsonl (a torn tail);
//   archive.after_snapshot the run is completed first, then started again
//                          with --fresh (which archives it) and crashed.
//   reuse.before_commit    the run is completed first, then started again
//                          with --fresh, which reuses every task, crashed,
//                          and resumed with a plain `wizq run`: every task
//                          must end reused and nothing may run again.
//   retry.before_commit    a first run fails one Work task for good, then
//                          `--retry-failed` (after the cause is gone) is
//                          crashed and resumed: only that task runs again.
//
// Each point is its own test (CrashPoints/CrashPointSweep.Point/<point>), so
// `ctest -j` runs them in parallel.
#include "util/crash_point.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Json;
using test::LedgerLine;
using test::ScratchDir;
using test::WizqResult;

constexpr int kWorks = 8;  // Work tasks of the root
// How many times a crashed run is resumed at most before the test gives up.
constexpr int kMaxResumes = 4;

std::string SweepWorkflow() {
  return test::SourceDir() + "/tests/data/crash/sweep.jsonc";
}

std::vector<std::string> RunArgs(const std::string& dir, bool fresh) {
  std::vector<std::string> args = {"wizq",
                                   "run",
                                   SweepWorkflow(),
                                   "--dir",
                                   dir,
                                   "--input",
                                   "{\"n\":" + std::to_string(kWorks) + "}",
                                   "--jobs",
                                   "3",
                                   "--quiet"};
  if (fresh) args.push_back("--fresh");
  return args;
}

test::SpawnOptions CrashEnv(const std::string& spec) {
  test::SpawnOptions o;
  o.env = {{"WIZQ_CRASH_AT", spec}};  // empty: no crash point armed
  return o;
}

// The <type, inputs> of every non-hook task of the sweep workflow.
std::set<std::string> ExpectedTasks() {
  std::set<std::string> want = {"Root " + Json{{"n", kWorks}}.dump()};
  for (int i = 0; i < kWorks; i++) {
    want.insert("Work " + Json{{"i", i}}.dump());
    if (i % 2 == 0) want.insert("Leaf " + Json{{"k", i % 3}}.dump());
  }
  return want;
}

// Files of `dir` (recursively) whose name starts with `prefix`.
std::vector<std::string> FindFiles(const std::string& dir,
                                   const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Right after a crash: the state must be readable.
void CheckReadableAfterCrash(const std::string& dir) {
  const WizqResult r =
      test::RunWizq({"wizq", "status", "--dir", dir, "--json"});
  EXPECT_TRUE(r.exited && r.code == 0)
      << "wizq status after the crash: " << r.Describe();
  EXPECT_FALSE(test::ParseJsonOrNull(r.out).is_discarded())
      << "wizq status --json after the crash: " << r.out;
  const std::string queue = dir + "/.wizard/queue.json";
  if (fs::exists(queue)) {
    EXPECT_FALSE(test::ReadJsonFile(queue).is_discarded())
        << "queue.json does not parse after the crash";
  }
}

// The checks on a run that the resumes completed. `crashes`: how many wizq
// processes crashed during it.
void VerifyRun(const std::string& dir, int crashes) {
  // --- audit.jsonl: one gap-free sequence, one run, finished once.
  const std::vector<Json> audit = test::ReadAudit(dir);
  ASSERT_FALSE(audit.empty());
  std::map<int64_t, int> completions;
  int run_finished = 0;
  for (size_t i = 0; i < audit.size(); i++) {
    ASSERT_FALSE(audit[i].is_discarded()) << "audit line " << i + 1;
    ASSERT_EQ(audit[i]["seq"], static_cast<int64_t>(i + 1))
        << "audit line " << i + 1;
    const std::string ev = audit[i]["event"];
    if (ev == "task_completed") completions[audit[i]["id"]]++;
    if (ev == "run_finished") run_finished++;
  }
  EXPECT_EQ(run_finished, 1);
  EXPECT_EQ(audit.back().value("commit", false), true);

  // --- the run, as `wizq status --json` and queue.json show it.
  const Json st = test::StatusJson(dir);
  ASSERT_TRUE(st.is_object());
  EXPECT_EQ(st["status"], "completed");
  const Json q = test::ReadQueue(dir);
  ASSERT_FALSE(q.is_discarded()) << "queue.json does not parse";
  // SPEC §4: the snapshot "is exact whenever the run is at rest".
  const bool exact = q["seq"] == audit.back()["seq"];
  EXPECT_TRUE(exact) << "queue.json is not exact although the run is at "
                        "rest: it covers seq "
                     << q["seq"] << ", the log ends at seq "
                     << audit.back()["seq"];
  std::set<std::string> seen;
  std::set<int64_t> ids;
  int64_t hook = 0;
  for (const Json& t : st["tasks"]) {
    const int64_t id = t["id"];
    EXPECT_TRUE(ids.insert(id).second) << "task id twice: " << id;
    EXPECT_EQ(t["state"], "done") << t.dump();
    EXPECT_EQ(completions[id], 1) << "task_completed events of " << t.dump();
    if (t["origin"] == "Finally") {
      EXPECT_EQ(hook, 0) << "a second finally hook: " << t.dump();
      EXPECT_EQ(t["type"], "Root");
      hook = id;
      continue;
    }
    const std::string key =
        t["type"].get<std::string>() + " " + t["inputs"].dump();
    EXPECT_TRUE(seen.insert(key).second) << "submitted twice: " << key;
  }
  EXPECT_EQ(seen, ExpectedTasks());
  ASSERT_NE(hook, 0) << "the finally hook never ran";
  if (exact) {
    EXPECT_EQ(q["status"], "completed");
    EXPECT_EQ(q["tasks"].size(), st["tasks"].size());
    for (const Json& t : q["tasks"]) EXPECT_EQ(t["state"], "done") << t.dump();
  }

  // --- the ledger: no overlap, at most 1 + crashes starts per task, the
  // hook's start after every other task's end.
  const std::vector<LedgerLine> ledger = test::ReadLedger(dir);
  std::map<int64_t, int> starts, ends;
  size_t hook_start = SIZE_MAX, last_other_end = 0;
  for (const LedgerLine& l : ledger) {
    EXPECT_NE(l.kind, "OVERLAP") << "task " << l.task << " attempt "
                                 << l.attempt << " overlapped an earlier one";
    EXPECT_TRUE(ids.count(l.task)) << "ledger line of unknown task " << l.task;
    if (l.kind == "start") starts[l.task]++;
    if (l.kind == "end") ends[l.task]++;
    if (l.task == hook && l.kind == "start") {
      hook_start = std::min(hook_start, l.index);
    }
    if (l.task != hook && l.kind == "end") {
      last_other_end = std::max(last_other_end, l.index);
    }
  }
  for (int64_t id : ids) {
    EXPECT_GE(starts[id], 1) << "task " << id << " never ran";
    EXPECT_GE(ends[id], 1) << "task " << id << " never ended";
    EXPECT_LE(starts[id], 1 + crashes)
        << "task " << id << " ran " << starts[id] << " times with " << crashes
        << " crash(es)";
  }
  EXPECT_LE(ends[hook], 1 + crashes);
  EXPECT_GT(hook_start, last_other_end)
      << "the finally hook started (ledger line " << hook_start
      << ") before every other task had ended (line " << last_other_end << ")";
  EXPECT_EQ(test::HeldLocks(dir + "/locks"), std::vector<std::string>{})
      << "task processes outlived the run";
}

// The archive of the run that `archive.after_snapshot` interrupted: its
// queue.json, audit.jsonl and tasks/ must all be kept under archive/ (in
// however many directories).
void VerifyArchivedFirstRun(const std::string& dir) {
  const std::string archive = dir + "/.wizard/archive";
  // One queue.json, or two when a plain re-run of the finished old run
  // wrote the snapshot its crash cut short (exact at rest) before --fresh
  // archived that one too: both must describe the completed run.
  const std::vector<std::string> queues = FindFiles(archive, "queue.json");
  ASSERT_GE(queues.size(), 1u) << "archived queue.json files";
  ASSERT_LE(queues.size(), 2u) << "archived queue.json files";
  Json q;
  for (const std::string& path : queues) {
    const Json candidate = test::ReadJsonFile(path);
    EXPECT_EQ(candidate["status"], "completed") << path;
    if (q.is_null() || candidate["seq"] > q["seq"]) q = candidate;
  }
  const std::vector<std::string> logs = FindFiles(archive, "audit.jsonl");
  ASSERT_EQ(logs.size(), 1u) << "archived audit.jsonl files";
  const std::vector<Json> old_log =
      test::ParseJsonLines(test::ReadAll(logs[0]));
  ASSERT_FALSE(old_log.empty());
  EXPECT_TRUE(std::any_of(old_log.begin(), old_log.end(), [](const Json& e) {
    return e["event"] == "run_finished";
  })) << "the archived log is not the whole first run";
  EXPECT_EQ(q["seq"], old_log.back()["seq"]);
  // Each task ran once: its stdout file (tasks/exec/attempt_files.h).
  int task_outputs = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(archive, ec)) {
    if (e.path().parent_path().filename() == "tasks" &&
        e.path().extension() == ".stdout") {
      task_outputs++;
    }
  }
  EXPECT_EQ(task_outputs, static_cast<int>(q["tasks"].size()))
      << "the archived tasks' stdout files";
}

// After reuse.before_commit: every task reused, none ran (the ledger of
// the re-run is empty), the counts of run_finished say so.
void VerifyAllReused(const std::string& dir) {
  const Json st = test::StatusJson(dir);
  ASSERT_TRUE(st.is_object());
  EXPECT_EQ(st["status"], "completed");
  for (const Json& t : st["tasks"]) {
    EXPECT_EQ(t["state"], "done") << t.dump();
    EXPECT_TRUE(t.contains("reused_from")) << "not reused: " << t.dump();
  }
  EXPECT_EQ(test::ReadLedger(dir).size(), 0u) << "a reused task ran";
  const std::vector<Json> audit = test::ReadAudit(dir);
  ASSERT_FALSE(audit.empty());
  int finished = 0;
  for (const Json& e : audit) {
    if (e["event"] != "run_finished") continue;
    finished++;
    EXPECT_EQ(e["tasks_reused"], st["tasks"].size());
    EXPECT_EQ(e["tasks_live"], 0);
  }
  EXPECT_EQ(finished, 1);
}

// After retry.before_commit: the failed Work task ran again, and so did
// Root's finally hook, which had run without it, as a hook of generation 2
// (docs/FORMAT.md, "Re-run finally hooks"); each once per crash at most,
// nothing else; it was retried once, the run completed.
void VerifyRetried(const std::string& dir, int crashes) {
  const Json st = test::StatusJson(dir);
  ASSERT_TRUE(st.is_object());
  EXPECT_EQ(st["status"], "completed");
  std::set<int64_t> again;
  for (const Json& t : st["tasks"]) {
    if (t.value("generation", 1) == 2) again.insert(t["id"].get<int64_t>());
    if (t["type"] == "Work" && t["inputs"] == Json{{"i", 3}}) {
      again.insert(t["id"].get<int64_t>());
    }
  }
  EXPECT_EQ(again.size(), 2u) << st.dump();
  std::map<int64_t, int> starts;
  for (const LedgerLine& l : test::ReadLedger(dir)) {
    EXPECT_NE(l.kind, "OVERLAP");
    if (l.kind == "start") starts[l.task]++;
  }
  EXPECT_EQ(starts.size(), again.size());
  for (const auto& [id, n] : starts) {
    EXPECT_TRUE(again.count(id)) << "task " << id << " ran again";
    EXPECT_LE(n, 1 + crashes) << "task " << id;
  }
  int retried = 0;
  for (const Json& e : test::ReadAudit(dir)) {
    if (e["event"] == "task_retried") retried++;
  }
  EXPECT_EQ(retried, 1);
}

enum class Reached { kYes, kNo };

// One point, one n: crash, check, resume, verify.
Reached RunScenario(const std::string& point, int n) {
  SCOPED_TRACE(point + ":" + std::to_string(n));
  ScratchDir scratch;
  const std::string dir = scratch.path();
  int crashes = 0;
  bool fresh = false;
  std::vector<std::string> extra;  // more flags, for the crash and resumes
  if (point == "reuse.before_commit") {
    const WizqResult r = test::RunWizq(RunArgs(dir, false), CrashEnv(""));
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
    fs::rename(dir + "/ledger", dir + "/ledger.first");
  } else if (point == "retry.before_commit") {
    test::WriteAll(dir + "/fail-work-3", "");
    const WizqResult r = test::RunWizq(RunArgs(dir, false), CrashEnv(""));
    EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
    fs::remove(dir + "/fail-work-3");
    fs::rename(dir + "/ledger", dir + "/ledger.first");
    extra = {"--retry-failed"};
  }
  if (point == "torn.after_copy") {
    // A run crashed before, then a torn line at the end of its log.
    const WizqResult r = test::RunWizq(RunArgs(dir, false),
                                       CrashEnv("run.after_result_commit:3"));
    EXPECT_TRUE(r.exited && r.code == kCrashExitCode) << r.Describe();
    crashes++;
    const std::string log = dir + "/.wizard/audit.jsonl";
    // Torn where a write would tear it: at the end of the lines.
    test::WriteAll(log, test::WithoutFreeSpace(test::ReadAll(log)) +
                            "{\"seq\":999,\"ts\":1,\"ev");
  } else if (point == "archive.after_snapshot") {
    // A completed run, which the crashing run archives (--fresh).
    const WizqResult r = test::RunWizq(RunArgs(dir, false), CrashEnv(""));
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
    fs::rename(dir + "/ledger", dir + "/ledger.first");
    fresh = true;
    // The checks below want every task to run again (reuse has its own
    // point, reuse.before_commit).
    extra = {"--no-reuse"};
  }
  const std::string spec = point + ":" + std::to_string(n);
  std::vector<std::string> crash_args =
      RunArgs(dir, fresh || point == "reuse.before_commit");
  crash_args.insert(crash_args.end(), extra.begin(), extra.end());
  const WizqResult crash = test::RunWizq(crash_args, CrashEnv(spec));
  EXPECT_TRUE(crash.exited) << crash.Describe();
  Reached reached = Reached::kNo;
  if (crash.exited && crash.code == kCrashExitCode) {
    reached = Reached::kYes;
    crashes++;
  } else {
    EXPECT_TRUE(crash.code == 0 || crash.code == 1) << crash.Describe();
  }
  if (reached == Reached::kYes) {
    CheckReadableAfterCrash(dir);
    if (point == "torn.after_copy") {
      // Copied aside, the log not yet cut.
      EXPECT_EQ(FindFiles(dir + "/.wizard", "audit.torn-").size(), 1u);
      const std::string log = test::ReadAll(dir + "/.wizard/audit.jsonl");
      EXPECT_TRUE(!log.empty() && log.back() != '\n');
    }
    // Resume with the very same command, as a user would.
    int code = -1;
    for (int i = 0; i < kMaxResumes && code != 0; i++) {
      std::vector<std::string> args = RunArgs(dir, fresh);
      args.insert(args.end(), extra.begin(), extra.end());
      const WizqResult r = test::RunWizq(args, CrashEnv(""));
      EXPECT_TRUE(r.exited) << r.Describe();
      code = r.exited ? r.code : -1;
      EXPECT_EQ(code, 0) << "resume " << i + 1 << ": " << r.Describe();
    }
    if (code != 0) return reached;
  }
  if (point == "reuse.before_commit") {
    VerifyAllReused(dir);
    test::ReapStrays();
    return reached;
  }
  if (point == "retry.before_commit") {
    VerifyRetried(dir, crashes);
    test::ReapStrays();
    return reached;
  }
  VerifyRun(dir, crashes);
  if (point == "torn.after_copy" && reached == Reached::kYes) {
    // Both copies of the torn tail are kept.
    const std::vector<std::string> torn =
        FindFiles(dir + "/.wizard", "audit.torn-");
    EXPECT_EQ(torn.size(), 2u);
    for (const std::string& t : torn) {
      EXPECT_EQ(test::ReadAll(t), "{\"seq\":999,\"ts\":1,\"ev") << t;
    }
  }
  if (point == "archive.after_snapshot" && reached == Reached::kYes) {
    VerifyArchivedFirstRun(dir);
  }
  test::ReapStrays();
  return reached;
}

class CrashPointSweep : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
};

TEST_P(CrashPointSweep, Point) {
  const std::string point = GetParam();
  const int max_n = std::max(1, test::EnvInt("WIZQ_SWEEP_N", 3));
  std::string summary;
  int reached = 0;
  for (int n = 1; n <= max_n; n++) {
    const bool yes = RunScenario(point, n) == Reached::kYes;
    reached += yes ? 1 : 0;
    summary += " n=" + std::to_string(n) + (yes ? ":crashed" : ":not-reached");
  }
  RecordProperty("reached", summary);
  std::printf("[ sweep    ] %s%s\n", point.c_str(), summary.c_str());
  EXPECT_GT(reached, 0) << "crash point " << point
                        << " was never reached: give it a setup in "
                           "tests/crash_point_test.cc";
}

std::string PointName(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

// The human gate's points need a Prompt step: tests/prompt_crash_test.cc
// sweeps them.
std::vector<const char*> SweptPoints() {
  std::vector<const char*> out;
  for (const char* p : kCrashPoints) {
    if (!IsGateCrashPoint(p) && !IsPgCrashPoint(p)) out.push_back(p);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(CrashPoints, CrashPointSweep,
                         ::testing::ValuesIn(SweptPoints()), PointName);

// Every CrashPoint("...") in the sources is listed in kCrashPoints (so the
// sweep covers it), and every listed point exists in the sources. Every
// source folder is scanned, and each must be readable: a folder skipped or a
// wrong SourceDir() would otherwise make both sets empty and the test pass.
TEST(CrashPointList, MatchesTheSources) {
  std::set<std::string> in_source;
  const std::string marker = "CrashPoint(\"";
  for (const char* sub : {"agent", "audit", "cli", "embed", "fs", "interop",
                          "mcp", "orchestrator", "queue", "tasks", "util"}) {
    const std::string folder = test::SourceDir() + "/" + sub;
    std::error_code ec;
    size_t files = 0;
    for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end;
         it.increment(ec)) {
      const std::string ext = it->path().extension().string();
      if (ext != ".cc" && ext != ".h") continue;
      files++;
      const std::string text = test::ReadAll(it->path().string());
      for (size_t at = text.find(marker); at != std::string::npos;
           at = text.find(marker, at + 1)) {
        const size_t begin = at + marker.size();
        in_source.insert(text.substr(begin, text.find('"', begin) - begin));
      }
    }
    ASSERT_FALSE(ec) << folder << ": " << ec.message();
    ASSERT_GT(files, 0u) << "no .cc or .h file under " << folder;
  }
  ASSERT_FALSE(in_source.empty()) << "no CrashPoint(\"...\") in the sources";
  const std::set<std::string> listed(std::begin(kCrashPoints),
                                     std::end(kCrashPoints));
  EXPECT_EQ(in_source, listed)
      << "add every crash point to kCrashPoints in util/crash_point.h";
}

// archive.after_snapshot, then the command run again *without* --fresh:
// what is left in .wizard/ is the old run's log alone, which has the same
// run_id, so it is that completed run: nothing runs again, exit 0, and the
// old run is split between archive/ (queue.json) and .wizard/ (audit.jsonl,
// tasks/). A later --fresh archives the rest and starts over; nothing of
// the old run is ever lost.
TEST(CrashPointArchive, ResumeWithoutFreshKeepsTheOldRun) {
  test::BecomeSubreaper();
  ScratchDir scratch;
  const std::string dir = scratch.path();
  WizqResult r = test::RunWizq(RunArgs(dir, false), CrashEnv(""));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const std::string old_log = test::ReadAll(dir + "/.wizard/audit.jsonl");
  const size_t ledger_size = test::ReadAll(dir + "/ledger").size();
  r = test::RunWizq(RunArgs(dir, true), CrashEnv("archive.after_snapshot:1"));
  ASSERT_TRUE(r.exited && r.code == kCrashExitCode) << r.Describe();
  EXPECT_FALSE(fs::exists(dir + "/.wizard/queue.json"));
  EXPECT_EQ(FindFiles(dir + "/.wizard/archive", "queue.json").size(), 1u);

  r = test::RunWizq(RunArgs(dir, false), CrashEnv(""));
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(test::ReadAll(dir + "/ledger").size(), ledger_size)
      << "a task ran again";
  EXPECT_EQ(test::ReadAll(dir + "/.wizard/audit.jsonl"), old_log)
      << "the old run's log changed";
  const Json st = test::StatusJson(dir);
  EXPECT_EQ(st["status"], "completed");
  EXPECT_EQ(st["counts"]["done"], static_cast<int>(ExpectedTasks().size()) + 1);

  // --fresh now archives the rest of the old run and starts a new one
  // (--no-reuse: every task runs again, as VerifyRun checks).
  fs::rename(dir + "/ledger", dir + "/ledger.first");
  std::vector<std::string> fresh_args = RunArgs(dir, true);
  fresh_args.push_back("--no-reuse");
  r = test::RunWizq(fresh_args, CrashEnv(""));
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  VerifyRun(dir, 0);
  VerifyArchivedFirstRun(dir);
  EXPECT_EQ(
      test::ReadAll(FindFiles(dir + "/.wizard/archive", "audit.jsonl")[0]),
      old_log);
  test::ReapStrays();
}

}  // namespace
}  // namespace wizq
