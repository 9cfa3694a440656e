// Round trips of named wizq runs through Barnum's state log (SPEC §12,
// docs/INTEROP.md; issue 21, item 2), through the real binary: each run is
// exported in both formats (`barnum`, `barnum-v1`), each export imported
// with `wizq run --resume-from` into a fresh directory, and
//   - right after the import (its first commit) the imported run has the
//     same done/pending/waiting split per (step, value) as the original at
//     the export (Barnum's classes; v2 gives hooks no task, so hooks count
//     in the v1 split only);
//   - run to the end (agents and answers supplied the same way to both),
//     both end with the same status and the same multiset of completed
//     (step, value), hooks included.
// The runs: completed, failed, paused at a gate, repaired by
// --retry-failed (whose finally hook ran twice: a re-run hook), with a
// hook that spawns, with deduplicated children, and with a Pool step.
// Workflow: tests/data/barnum/cases.jsonc; tasks: tests/data/barnum/task.sh.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "interop/barnum_import.h"
#include "interop/barnum_log.h"
#include "queue/dir/queue.h"
#include "tests/barnum_test_util.h"
#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Json;
using test::RunWizq;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

using test::BarnumData;
using test::InBarnumData;

// How a run is driven to its end.
enum class Drive {
  kRun,          // `wizq run` finishes it
  kRetryFailed,  // it fails, then `wizq run --retry-failed` repairs it
  kGate,         // it pauses at a Prompt (exit 4): `wizq answer`, run again
  kPool,         // `wizq agent take/done` answer its Pool tasks meanwhile
};

struct Case {
  const char* name;
  Json input;  // Root's value (tests/data/barnum/task.sh)
  Drive drive;
  int code;  // the end's exit code
};

Json Spawn(const std::string& step, Json value) {
  return {{"kind", step}, {"value", std::move(value)}};
}
Json Work(int w, Json extra = Json::object()) {
  extra["w"] = w;
  return Spawn("Work", std::move(extra));
}

const Case kCases[] = {
    {"Completed",
     {{"children", {Work(1), Work(2, {{"children", {Work(3)}}})}}},
     Drive::kRun,
     0},
    {"Failed",
     {{"children", {Work(1, {{"fail_times", 9}}), Work(2)}}},
     Drive::kRun,
     1},
    {"PausedAtAGate",
     {{"children", {Work(1), Spawn("Confirm", {{"q", 1}})}}},
     Drive::kGate,
     0},
    // Work 1 fails both attempts; --retry-failed runs it a third time, and
    // Root's hook, which ran without it, runs again (generation 2).
    {"RepairedByRetryFailed",
     {{"children", {Work(1, {{"fail_times", 2}}), Work(2)}}},
     Drive::kRetryFailed,
     0},
    {"FinallyHookSpawns",
     {{"children", {Work(1)}}, {"hook_children", {Work(9)}}},
     Drive::kRun,
     0},
    {"Deduplicated",
     {{"children", {Work(1), Work(1), Work(2, {{"children", {Work(1)}}})}}},
     Drive::kRun,
     0},
    {"PoolStep",
     {{"children", {Work(1), Spawn("Review", {{"children", {Work(5)}}})}}},
     Drive::kPool,
     0},
};

using Key = std::pair<std::string, std::string>;  // step, canonical value
// Per (step, value), the classes of its tasks ("pending", "waiting",
// "done"): several tasks may share a key (a hook shares its owner's).
using Split = std::map<Key, std::multiset<std::string>>;

Split SplitOf(const QueueState& s, bool hooks_are_tasks) {
  const std::map<int64_t, bool> alive = test::BarnumAlive(s, hooks_are_tasks);
  Split out;
  for (const Task& t : s.tasks()) {
    if (!hooks_are_tasks && t.origin == Origin::kFinally) continue;
    const char* c = !alive.at(t.id)               ? "done"
                    : t.state == TaskState::kDone ? "waiting"
                                                  : "pending";
    out[{t.type, Json::parse(t.inputs).dump()}].insert(c);
  }
  return out;
}

// The split of the run in `dir` as it stands.
Split SplitNow(const std::string& dir, bool hooks_are_tasks) {
  QueueOptions o;
  o.install_dir = fs::canonical(dir);
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Queue> q;
  Status s = Queue::Open(o, &q, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return s.ok() ? SplitOf(q->state(), hooks_are_tasks) : Split();
}

// The split of an imported run right after its import: its log's first
// commit (run_started, run_imported and every task) replayed.
Split SplitAfterImport(const std::string& dir, bool hooks_are_tasks) {
  QueueState state;
  for (const std::string& line :
       test::SplitLines(test::ReadAll(dir + "/.wizard/audit.jsonl"))) {
    if (line.empty()) continue;
    Status s = state.ApplyEvent(line);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok() || test::Contains(line, "\"commit\":true")) break;
  }
  EXPECT_TRUE(test::Contains(test::ReadAll(dir + "/.wizard/audit.jsonl"),
                             "\"run_imported\""));
  return SplitOf(state, hooks_are_tasks);
}

// The end of a run: its status and its completed (step, value)s.
struct End {
  std::string status;
  std::multiset<Key> completed;
  bool operator==(const End& o) const {
    return status == o.status && completed == o.completed;
  }
};

End EndOf(const std::string& dir) {
  End out;
  const Json st = test::StatusJson(dir);
  out.status = st.value("status", "");
  for (const Json& t : st["tasks"]) {
    if (t["state"] == "done") {
      out.completed.insert({t["type"].get<std::string>(), t["inputs"].dump()});
    }
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, const End& e) {
  os << e.status << ":";
  for (const Key& k : e.completed) os << " " << k.first << k.second;
  return os;
}

// Answers the Pool tasks of the run in `dir` with their value's children,
// as an agent would, until `wizq agent take` says the run has finished.
void DriveAgents(const std::string& dir) {
  ASSERT_TRUE(test::WaitFor(  // the run in `dir` is being started
      [&] { return fs::exists(dir + "/.wizard/queue.json"); },
      std::chrono::seconds(30)));
  for (int i = 0; i < 200; i++) {
    const WizqResult t =
        RunWizq({"wizq", "agent", "take", "--dir", dir, "--wait", "1"});
    const Json p = test::ParseJsonOrNull(t.out);
    if (t.code == 5 && p.value("status", "") == "finished") return;
    if (t.code == 5) continue;
    ASSERT_EQ(t.code, 0) << t.Describe() << t.err;
    const Json response = p["task"]["value"].value("children", Json::array());
    const WizqResult d =
        RunWizq({"wizq", "agent", "done", "--dir", dir, "--task",
                 p["task_id"].dump(), "--lease", p["lease"].get<std::string>(),
                 "--response", response.dump()});
    ASSERT_EQ(d.code, 0) << d.Describe() << d.err;
  }
  ADD_FAILURE() << "the run in " << dir << " never finished";
}

class BarnumRoundTrip : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  void TearDown() override { test::ReapStrays(); }

  std::vector<std::string> RunArgs(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"wizq",
                                     "run",
                                     BarnumData("cases.jsonc"),
                                     "--dir",
                                     dir_.Join("orig"),
                                     "--input",
                                     GetParam().input.dump()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  std::vector<std::string> ImportArgs(const std::string& log,
                                      const std::string& inst) {
    return {"wizq", "run", "--resume-from", log, "--dir", inst};
  }
  // Runs `args` to its end; a Pool run is driven by agents meanwhile.
  WizqResult Finish(const std::vector<std::string>& args,
                    const std::string& dir,
                    const test::SpawnOptions& opts = {}) {
    if (GetParam().drive != Drive::kPool) return RunWizq(args, opts);
    WizqProcess p(args, opts);
    DriveAgents(dir);
    return p.Wait(std::chrono::seconds(60));
  }
  // Brings the original to the state it is exported in. A Pool run is
  // left running, waiting for its agents.
  void RunOriginalToExport() {
    const Case& c = GetParam();
    if (c.drive == Drive::kPool) {
      pool_run_ = std::make_unique<WizqProcess>(RunArgs());
      ASSERT_TRUE(test::WaitFor(
          [&] {
            // Until the run has written its state, there is no status.
            if (!fs::exists(dir_.Join("orig") + "/.wizard/queue.json")) {
              return false;
            }
            const Json st = test::StatusJson(dir_.Join("orig"));
            if (!st.is_object() || !st.contains("tasks")) return false;
            for (const Json& t : st["tasks"]) {
              if (t["type"] == "Review" && t["state"] == "pending") {
                return st["counts"]["in_progress"] == 0;
              }
            }
            return false;
          },
          std::chrono::seconds(30)));
      return;
    }
    WizqResult r = RunWizq(RunArgs());
    const int first = c.drive == Drive::kGate          ? 4
                      : c.drive == Drive::kRetryFailed ? 1
                                                       : c.code;
    ASSERT_EQ(r.code, first) << r.Describe() << r.err;
    if (c.drive != Drive::kRetryFailed) return;
    r = RunWizq(RunArgs({"--retry-failed"}));
    ASSERT_EQ(r.code, c.code) << r.Describe() << r.err;
  }
  // Answers the gate of the paused run in `dir` (`wizq answer`) and runs it
  // to its end with `wizq run WORKFLOW --run-id <its id>`, which resumes
  // it with the workflow frozen in it (an import's: the Config), tasks in
  // the data folder. For an import, `wizq run --resume-from` again would
  // resume it too, but that entry point runs no Prompt task (issue 21,
  // item 3, fixed apart).
  WizqResult AnswerAndFinish(const std::string& dir) {
    const WizqResult a =
        RunWizq({"wizq", "answer", "--dir", dir, "Confirm=true"});
    EXPECT_EQ(a.code, 0) << a.Describe() << a.err;
    const std::string run_id =
        test::StatusJson(dir).value("run_id", std::string());
    return RunWizq({"wizq", "run", BarnumData("cases.jsonc"), "--dir", dir,
                    "--input", GetParam().input.dump(), "--run-id", run_id});
  }

  ScratchDir dir_;
  std::unique_ptr<WizqProcess> pool_run_;
};

TEST_P(BarnumRoundTrip, ExportImportAndRunToTheEnd) {
  const Case& c = GetParam();
  const std::string orig = dir_.Join("orig");
  RunOriginalToExport();
  if (HasFatalFailure()) return;
  const Split want[2] = {SplitNow(orig, false), SplitNow(orig, true)};
  std::string logs[2];
  for (int v = 0; v < 2; v++) {
    const std::string fmt = v == 0 ? "barnum" : "barnum-v1";
    logs[v] = dir_.Join(fmt + ".ndjson");
    const WizqResult e = RunWizq(
        {"wizq", "export", "--format", fmt, "--dir", orig, "-o", logs[v]});
    ASSERT_EQ(e.code, 0) << e.Describe() << e.err;
  }
  // The original, run to its end.
  if (pool_run_) {
    DriveAgents(orig);
    const WizqResult r = pool_run_->Wait(std::chrono::seconds(60));
    ASSERT_EQ(r.code, c.code) << r.Describe() << r.err;
  } else if (c.drive == Drive::kGate) {
    const WizqResult r = AnswerAndFinish(orig);
    ASSERT_EQ(r.code, c.code) << r.Describe() << r.err;
  }
  const End end = EndOf(orig);
  EXPECT_EQ(end.status, c.code == 0 ? "completed" : "failed");
  for (int v = 0; v < 2; v++) {
    SCOPED_TRACE(v == 0 ? "barnum (v2)" : "barnum-v1");
    const std::string inst = dir_.Join(v == 0 ? "imp2" : "imp1");
    const std::vector<std::string> args = ImportArgs(logs[v], inst);
    WizqResult r = c.drive == Drive::kGate ? RunWizq(args, InBarnumData())
                                           : Finish(args, inst, InBarnumData());
    ASSERT_TRUE(r.exited) << r.Describe();
    ASSERT_TRUE(fs::exists(inst + "/.wizard/queue.json"))
        << "not imported: " << r.err;
    EXPECT_EQ(SplitAfterImport(inst, v == 1), want[v])
        << test::ReadAll(logs[v]);
    if (c.drive == Drive::kGate) {
      ASSERT_EQ(r.code, 4) << r.Describe() << r.err;
      r = AnswerAndFinish(inst);
    }
    EXPECT_EQ(r.code, c.code) << r.Describe() << r.err;
    EXPECT_EQ(EndOf(inst), end) << test::ReadAll(logs[v]);
  }
}

// The shape of the export of a repaired run: the failure for good that
// --retry-failed put back is written as a retry (`Retry {replaces}`), as
// Barnum writes one, not as a dropped task that later succeeds; Root's
// hook, which ran twice, is two Finally tasks in v1 and one FinallyRun in
// v2 (the re-run is the import's to make).
TEST(BarnumExport, ARepairedFailureIsWrittenAsARetry) {
  test::BecomeSubreaper();
  ScratchDir dir;
  const Json input = {{"children", {Work(1, {{"fail_times", 2}}), Work(2)}}};
  const std::vector<std::string> run = {
      "wizq",    "run",       BarnumData("cases.jsonc"), "--dir", dir.path(),
      "--input", input.dump()};
  ASSERT_EQ(RunWizq(run).code, 1);
  std::vector<std::string> retry = run;
  retry.push_back("--retry-failed");
  ASSERT_EQ(RunWizq(retry).code, 0);
  for (const char* fmt : {"barnum", "barnum-v1"}) {
    SCOPED_TRACE(fmt);
    const WizqResult e =
        RunWizq({"wizq", "export", "--format", fmt, "--dir", dir.path()});
    ASSERT_EQ(e.code, 0) << e.Describe() << e.err;
    BarnumLog log;
    BarnumImport imp;
    Status s = ReadBarnumLog("export", e.out, &log);
    if (s.ok()) s = ImportBarnumLog(log, "export", &imp);
    ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << e.out;
    // Work 1's chain: submitted, then retried twice (its budget's retry
    // and --retry-failed's), each failure naming its retry; the last one
    // succeeded.
    std::vector<uint32_t> chain;
    for (const auto& [id, t] : log.tasks) {
      if (t.value == Json{{"fail_times", 2}, {"w", 1}}) chain.push_back(id);
    }
    ASSERT_EQ(chain.size(), 3u) << e.out;
    for (size_t i = 0; i < chain.size(); i++) {
      const BarnumCompletion& c = log.completions.at(chain[i]);
      if (i + 1 == chain.size()) {
        EXPECT_TRUE(c.success) << e.out;
        continue;
      }
      EXPECT_FALSE(c.success);
      ASSERT_TRUE(c.retry.has_value()) << "failure " << i << "\n" << e.out;
      EXPECT_EQ(*c.retry, chain[i + 1]);
      EXPECT_EQ(log.tasks.at(chain[i + 1]).origin, BarnumTask::Origin::kRetry);
      EXPECT_EQ(log.tasks.at(chain[i + 1]).replaces, chain[i]);
    }
    for (const auto& [id, c] : imp.classes) {
      EXPECT_EQ(c, BarnumClass::kDone) << "Barnum task " << id << "\n" << e.out;
    }
    int hooks = 0;
    for (const auto& [id, t] : log.tasks) {
      hooks += t.origin == BarnumTask::Origin::kFinally;
    }
    EXPECT_EQ(hooks, std::string(fmt) == "barnum" ? 0 : 2) << e.out;
    EXPECT_EQ(log.finally_runs.size(), std::string(fmt) == "barnum" ? 1u : 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Runs, BarnumRoundTrip, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace wizq
