// `wizq run --resume-from` and `wizq export --format barnum` as users see
// them (SPEC §12, docs/INTEROP.md): the reference's fan-out example
// continued from each log shape with a side-effect ledger, bad logs and
// flags, and round trips of wizq runs in many states (killed with SIGKILL
// mid-run included) through both export formats and back.
//
// The tasks are tests/data/barnum/task.sh; they run in the directory wizq
// is started in (Barnum's rule for a resumed run), here that data folder.
#include <gtest/gtest.h>
#include <signal.h>

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

WizqResult ResumeFrom(const std::string& log, const std::string& dir,
                      std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"wizq", "run",   "--resume-from",
                                   log,    "--dir", dir};
  args.insert(args.end(), extra.begin(), extra.end());
  return RunWizq(args, InBarnumData());
}

std::vector<std::string> Ledger(const std::string& dir) {
  return test::SplitLines(test::ReadAll(dir + "/ledger"));
}

class BarnumCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  ScratchDir dir_;
};

// The reference's example: ListFiles fanned out to three Refactor tasks;
// file-a.js was done, file-b.js in flight and file-c.js pending at the
// crash. Only b and c run again, then ListFiles' finally hook, once.
TEST_F(BarnumCliTest, ReferenceFanOutContinuesFromEveryLogShape) {
  for (const char* shape : {"ref", "v1", "v2"}) {
    SCOPED_TRACE(shape);
    const std::string log =
        BarnumData(std::string("fanout.") + shape + ".ndjson");
    const std::string before = test::ReadAll(log);
    const std::string inst = dir_.Join(shape);
    WizqResult r = ResumeFrom(log, inst);
    ASSERT_TRUE(r.exited && r.code == 0) << r.Describe() << r.err;
    std::vector<std::string> ledger = Ledger(inst);
    ASSERT_EQ(ledger.size(), 3u) << test::ReadAll(inst + "/ledger");
    std::multiset<std::string> first(ledger.begin(), ledger.begin() + 2);
    EXPECT_EQ(first, (std::multiset<std::string>{
                         R"(run ["Refactor",{"file":"file-b.js"}])",
                         R"(run ["Refactor",{"file":"file-c.js"}])"}));
    EXPECT_EQ(ledger[2], R"(finally ["ListFiles",{}])");
    // The import is the run's record: counts, and every task done.
    bool imported = false;
    for (const Json& e : test::ReadAudit(inst)) {
      if (e.value("event", "") != "run_imported") continue;
      imported = true;
      EXPECT_EQ(e["tasks_pending"], 2);
      EXPECT_EQ(e["tasks_waiting"], 1);
      EXPECT_EQ(e["tasks_done"], 1);
      EXPECT_TRUE(test::Contains(e.value("source", ""), log));
    }
    EXPECT_TRUE(imported);
    Json st = test::StatusJson(inst);
    EXPECT_EQ(st["status"], "completed");
    EXPECT_EQ(st["counts"]["done"], 5);
    // Again: nothing runs again; the Barnum log was only read.
    r = ResumeFrom(log, inst);
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe() << r.err;
    EXPECT_EQ(Ledger(inst).size(), 3u);
    EXPECT_EQ(test::ReadAll(log), before);
  }
}

// The reference's "State log format" example: task 2 timed out and its
// retry 3 is pending; 1 is done; the finally hook of 0 (task 4) was logged
// before 0's children were done. Only the retry runs, with one attempt of
// its two spent, then 0's hook, once, after it.
TEST_F(BarnumCliTest, ReferenceFormatExampleContinues) {
  const std::string inst = dir_.Join("inst");
  WizqResult r = ResumeFrom(BarnumData("format.ref.ndjson"), inst);
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe() << r.err;
  EXPECT_EQ(Ledger(inst),
            (std::vector<std::string>{
                R"(run ["Process",{"data":"y"}])",
                R"(finally ["Analyze",{"file":"src/main.rs"}])"}));
  Json st = test::StatusJson(inst);
  EXPECT_EQ(st["status"], "completed");
  for (const Json& t : st["tasks"]) {
    if (t["inputs"] == Json{{"data", "y"}}) {
      EXPECT_EQ(t["attempts"], 2);  // the Barnum timeout, then ours
      EXPECT_EQ(t["max_attempts"], 2);
    }
  }
  for (const Json& e : test::ReadAudit(inst)) {
    if (e.value("event", "") != "run_imported") continue;
    EXPECT_EQ(e["tasks_pending"], 2);  // 3 and the hook 4
    EXPECT_EQ(e["tasks_waiting"], 1);  // 0
    EXPECT_EQ(e["tasks_done"], 2);     // 1, and 2 (its retry handles it)
  }
}

TEST_F(BarnumCliTest, BadLogsAndFlagsExit2AndWriteNothing) {
  const std::string cfg =
      test::SplitLines(test::ReadAll(BarnumData("fanout.v1.ndjson")))[0];
  const std::string seed =
      R"({"kind":"TaskSubmitted","task_id":0,"step":"ListFiles","value":{},"parent_id":null,"origin":{"kind":"Initial"}})";
  const std::string done0 =
      R"({"kind":"TaskCompleted","task_id":0,"outcome":{"kind":"Success","value":{"spawned_task_ids":[],"finally_value":{}}}})";
  const struct {
    std::string text, want;
  } logs[] = {
      {"hello\n", ":1: not a JSON object"},
      {seed + "\n", ":1: kind: the first entry must be the Config"},
      {cfg + "\n" + done0 + "\n", ":2: task_id: completion of unknown task 0"},
      {cfg + "\n" + seed + "\n" + done0 + "\n" + done0 + "\n",
       ":4: task_id: task 0 was already completed"},
      {cfg + "\n" + seed + "\n" + seed + "\n",
       ":3: task_id: task 0 was already submitted"},
      {R"({"kind":"Config","config":{"steps":[{"name":"A","action":{"kind":"Command","script":"x"},"next":["Nope"],"options":{}}]}})"
       "\n",
       ":1 (the Config)"},
  };
  int n = 0;
  for (const auto& c : logs) {
    const std::string log = dir_.Join("bad" + std::to_string(n++) + ".ndjson");
    test::WriteAll(log, c.text);
    const std::string inst = dir_.Join("inst");
    WizqResult r = ResumeFrom(log, inst);
    EXPECT_TRUE(r.exited && r.code == 2) << r.Describe() << r.err;
    EXPECT_TRUE(test::Contains(r.err, log + c.want)) << r.err;
    EXPECT_FALSE(fs::exists(inst)) << "wrote to DIR for " << c.text;
  }
  // Incompatible flags.
  const std::string good = BarnumData("fanout.v1.ndjson");
  const std::string inst = dir_.Join("inst");
  for (std::vector<std::string> extra :
       {std::vector<std::string>{"--input", "{}"},
        std::vector<std::string>{"--input-file", good}}) {
    WizqResult r = ResumeFrom(good, inst, extra);
    EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
    EXPECT_FALSE(fs::exists(inst));
  }
  WizqResult w = RunWizq({"wizq", "run", BarnumData("roundtrip.jsonc"),
                          "--resume-from", good, "--dir", inst});
  EXPECT_TRUE(w.exited && w.code == 2) << w.Describe();
  WizqResult none = RunWizq({"wizq", "run", "--dir", inst});
  EXPECT_TRUE(none.exited && none.code == 2) << none.Describe();
  EXPECT_FALSE(fs::exists(inst));
  ASSERT_EQ(ResumeFrom(good, inst).code, 0);
  // export: no run, unknown format.
  WizqResult e = RunWizq(
      {"wizq", "export", "--format", "barnum", "--dir", dir_.Join("nothing")});
  EXPECT_TRUE(e.exited && e.code == 2) << e.Describe();
  e = RunWizq({"wizq", "export", "--format", "xml", "--dir", inst});
  EXPECT_TRUE(e.exited && e.code == 2) << e.Describe();
}

// The imported run is an ordinary wizq run: killed with SIGKILL while a
// task runs, the same command resumes it (nothing is imported twice) and
// only the task in flight runs again.
TEST_F(BarnumCliTest, ImportedRunKilledAndResumedBySameCommand) {
  const std::string marker = dir_.Join("go");
  // The fan-out Config with two retries per step: the attempt in flight at
  // the kill counts (SPEC §6.3) and must not be the last.
  std::string cfg =
      test::SplitLines(test::ReadAll(BarnumData("fanout.v1.ndjson")))[0];
  for (size_t at; (at = cfg.find("\"max_retries\":0")) != std::string::npos;) {
    cfg.replace(at, 15, "\"max_retries\":2");
  }
  const Json slow = {{"wait_for", marker}, {"file", "file-b.js"}};
  const std::string log = dir_.Join("state.ndjson");
  test::WriteAll(
      log,
      cfg + "\n" +
          R"({"kind":"TaskSubmitted","task_id":0,"step":"ListFiles","value":{},"parent_id":null,"origin":{"kind":"Initial"}})"
          "\n" +
          R"({"kind":"TaskCompleted","task_id":0,"outcome":{"kind":"Success","value":{"spawned_task_ids":[1,2],"finally_value":{}}}})"
          "\n" +
          R"({"kind":"TaskSubmitted","task_id":1,"step":"Refactor","value":)" +
          slow.dump() + R"(,"parent_id":0,"origin":{"kind":"Spawned"}})" +
          "\n" +
          R"({"kind":"TaskSubmitted","task_id":2,"step":"Refactor","value":{"file":"file-c.js"},"parent_id":0,"origin":{"kind":"Spawned"}})"
          "\n");
  const std::string inst = dir_.Join("inst");
  {
    WizqProcess p({"wizq", "run", "--resume-from", log, "--dir", inst},
                  InBarnumData());
    ASSERT_TRUE(test::WaitFor(
        [&] {
          const std::string l = test::ReadAll(inst + "/ledger");
          return test::Contains(l, "wait_for") &&
                 test::Contains(l, "file-c.js");
        },
        std::chrono::seconds(30)));
    // Let file-c.js's completion become durable before the kill.
    ASSERT_TRUE(test::WaitFor(
        [&] {
          Json st = test::StatusJson(inst);
          return st.is_object() && st["counts"]["done"] == 2;
        },
        std::chrono::seconds(30)));
    p.Kill(SIGKILL);
    WizqResult r = p.Wait(std::chrono::seconds(30));
    ASSERT_EQ(r.signal, SIGKILL) << r.Describe();
  }
  test::WriteAll(marker, "");
  WizqResult r = ResumeFrom(log, inst);
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe() << r.err;
  std::multiset<std::string> ledger;
  for (const std::string& l : Ledger(inst)) ledger.insert(l);
  const std::string b = "run [\"Refactor\"," + slow.dump() + "]";
  // In flight when only wizq was killed: its tree finished on its own and
  // was adopted, not run again (docs/PROTOCOL.md, "Orphans after a crash").
  EXPECT_EQ(ledger.count(b), 1u);
  EXPECT_EQ(ledger.count(R"(run ["Refactor",{"file":"file-c.js"}])"), 1u);
  EXPECT_EQ(ledger.count(R"(finally ["ListFiles",{}])"), 1u);
  EXPECT_EQ(ledger.size(), 3u);
  int imported = 0;
  for (const Json& e : test::ReadAudit(inst)) {
    imported += e.value("event", "") == "run_imported";
  }
  EXPECT_EQ(imported, 1);
  EXPECT_EQ(test::StatusJson(inst)["status"], "completed");
}

// --- round trips ---------------------------------------------------------

using Key = std::pair<std::string, std::string>;  // step, canonical value

struct Classes {
  std::multiset<Key> pending, waiting;
  std::set<Key> done;
};

std::string Canon(const std::string& json) { return Json::parse(json).dump(); }

// Barnum's classes of a wizq run, from its state (test::BarnumAlive).
// On PostgreSQL, the run's events exported as a log the directory store
// reads (`wizq export --format audit`), opened beside it.
Classes FromWizq(const std::string& dir, bool hooks_are_tasks) {
  QueueOptions o;
  o.install_dir = fs::canonical(dir);
  if (test::OnPgStore()) {
    o.install_dir += "/exported";
    fs::remove_all(o.install_dir);
    fs::create_directories(o.install_dir + "/.wizard");
    const WizqResult r =
        test::RunWizq({"wizq", "export", "--format", "audit", "--dir", dir,
                       "-o", o.install_dir + "/.wizard/audit.jsonl"});
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  }
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Queue> q;
  const Status opened = Queue::Open(o, &q, nullptr);
  EXPECT_TRUE(opened.ok()) << opened.ToString();
  if (!opened.ok()) return {};
  const QueueState& s = q->state();
  std::map<int64_t, bool> alive = test::BarnumAlive(s, hooks_are_tasks);
  Classes out;
  for (const Task& t : s.tasks()) {
    if (!hooks_are_tasks && t.origin == Origin::kFinally) continue;
    Key k{t.type, Canon(t.inputs)};
    if (!alive[t.id]) {
      out.done.insert(k);
    } else if (t.state == TaskState::kDone) {
      out.waiting.insert(k);
    } else {
      out.pending.insert(k);
    }
  }
  return out;
}

Classes FromBarnum(const std::string& text) {
  BarnumLog log;
  BarnumImport imp;
  Status s = ReadBarnumLog("export", text, &log);
  if (s.ok()) s = ImportBarnumLog(log, "export", &imp);
  EXPECT_TRUE(s.ok()) << s.ToString() << "\n" << text;
  Classes out;
  for (const auto& [id, c] : imp.classes) {
    Key k{log.tasks[id].step, log.tasks[id].value.dump()};
    if (c == BarnumClass::kPending) out.pending.insert(k);
    if (c == BarnumClass::kWaiting) out.waiting.insert(k);
    if (c == BarnumClass::kDone) out.done.insert(k);
  }
  return out;
}

// Every task's step, value and state once a run is over.
std::multiset<std::string> EndState(const std::string& dir) {
  std::multiset<std::string> out;
  Json st = test::StatusJson(dir);
  for (const Json& t : st["tasks"]) {
    out.insert(t["type"].get<std::string>() + " " + t["inputs"].dump() + " " +
               t["state"].get<std::string>());
  }
  return out;
}

class BarnumRoundTripTest : public BarnumCliTest {
 protected:
  std::string Marker() const { return dir_.Join("go"); }
  WizqResult RunOriginal(const Json& input) {
    return RunWizq({"wizq", "run", BarnumData("roundtrip.jsonc"), "--dir",
                    dir_.Join("orig"), "--input", input.dump()});
  }
  // Starts the original run and SIGKILLs it once the ledger holds every
  // line of `wait_lines`; then lets the blocked tasks go.
  void KillMidRun(const Json& input, std::vector<std::string> wait_lines) {
    WizqProcess p({"wizq", "run", BarnumData("roundtrip.jsonc"), "--dir",
                   dir_.Join("orig"), "--input", input.dump()});
    ASSERT_TRUE(test::WaitFor(
        [&] {
          const std::string l = test::ReadAll(dir_.Join("orig/ledger"));
          for (const std::string& w : wait_lines) {
            if (!test::Contains(l, w)) return false;
          }
          return true;
        },
        std::chrono::seconds(30)));
    p.Kill(SIGKILL);
    WizqResult r = p.Wait(std::chrono::seconds(30));
    ASSERT_EQ(r.signal, SIGKILL) << r.Describe();
    test::WriteAll(Marker(), "");
  }

  // Exports the original in both formats, checks the classes, imports
  // each into a new directory, then finishes both and compares.
  void RoundTrip(const Json& input, int want_code) {
    std::string exported[2];
    for (int v = 0; v < 2; v++) {
      const std::string fmt = v == 0 ? "barnum" : "barnum-v1";
      SCOPED_TRACE(fmt);
      const std::string file = dir_.Join(fmt + ".ndjson");
      WizqResult e = RunWizq({"wizq", "export", "--format", fmt, "--dir",
                              dir_.Join("orig"), "-o", file});
      ASSERT_TRUE(e.exited && e.code == 0) << e.Describe() << e.err;
      exported[v] = test::ReadAll(file);
      Classes want = FromWizq(dir_.Join("orig"), /*hooks_are_tasks=*/v == 1);
      Classes got = FromBarnum(exported[v]);
      EXPECT_EQ(got.pending, want.pending) << exported[v];
      EXPECT_EQ(got.waiting, want.waiting) << exported[v];
      for (const Key& k : want.done)
        EXPECT_TRUE(got.done.count(k)) << k.first << k.second;
    }
    WizqResult orig = RunOriginal(input);
    ASSERT_TRUE(orig.exited) << orig.Describe();
    EXPECT_EQ(orig.code, want_code) << orig.err;
    const std::multiset<std::string> end = EndState(dir_.Join("orig"));
    for (int v = 0; v < 2; v++) {
      SCOPED_TRACE(v == 0 ? "v2" : "v1");
      const std::string inst = dir_.Join(v == 0 ? "imp2" : "imp1");
      WizqResult r = ResumeFrom(
          dir_.Join(v == 0 ? "barnum.ndjson" : "barnum-v1.ndjson"), inst);
      ASSERT_TRUE(r.exited) << r.Describe();
      EXPECT_EQ(r.code, want_code) << r.err;
      EXPECT_EQ(EndState(inst), end) << exported[v];
    }
  }
};

Json Work(int w, Json extra = Json::object()) {
  extra["w"] = w;
  return {{"kind", "Work"}, {"value", extra}};
}

TEST_F(BarnumRoundTripTest, FreshRunKilledBeforeItsFirstTaskEnded) {
  Json input = {{"wait_for", Marker()},
                {"children", {Work(1)}},
                {"hook_children", {Work(9)}}};
  KillMidRun(input, {R"(run ["Root")"});
  RoundTrip(input, 0);
}

TEST_F(BarnumRoundTripTest, MidRunAfterKill9) {
  Json input = {{"children",
                 {Work(1), Work(2, {{"wait_for", Marker()}}),
                  Work(3, {{"children", {Work(4)}}})}},
                {"hook_children", {Work(9)}}};
  KillMidRun(input, {R"("w":2)", R"("w":4)"});
  RoundTrip(input, 0);
}

TEST_F(BarnumRoundTripTest, FinishedWithRetriesAndFinallyHooks) {
  Json input = {{"children", {Work(1, {{"fail_times", 1}}), Work(2)}},
                {"hook_children", {Work(9, {{"fail_times", 2}})}}};
  ASSERT_EQ(RunOriginal(input).code, 0);
  RoundTrip(input, 0);
}

TEST_F(BarnumRoundTripTest, KilledWhileRetriesAreUnderWay) {
  Json input = {{"children",
                 {Work(1, {{"fail_times", 1}}),
                  Work(2, {{"wait_for", Marker()}, {"fail_times", 1}})}}};
  KillMidRun(input,
             {R"(run ["Work",{"fail_times":1,"w":1}])", R"("wait_for")"});
  RoundTrip(input, 0);
}

// A live run is exported as a consistent snapshot: what is in flight is
// submitted and not completed (pending for Barnum).
TEST_F(BarnumRoundTripTest, ExportOfALiveRun) {
  Json input = {{"wait_for", Marker()}, {"children", {Work(1)}}};
  WizqProcess p({"wizq", "run", BarnumData("roundtrip.jsonc"), "--dir",
                 dir_.Join("orig"), "--input", input.dump()});
  ASSERT_TRUE(test::WaitFor(
      [&] {
        return test::Contains(test::ReadAll(dir_.Join("orig/ledger")),
                              R"(run ["Root")");
      },
      std::chrono::seconds(30)));
  for (const char* fmt : {"barnum", "barnum-v1"}) {
    WizqResult e = RunWizq(
        {"wizq", "export", "--format", fmt, "--dir", dir_.Join("orig")});
    ASSERT_TRUE(e.exited && e.code == 0) << e.Describe() << e.err;
    Classes got = FromBarnum(e.out);
    EXPECT_EQ(got.pending, (std::multiset<Key>{{"Root", Canon(input.dump())}}))
        << e.out;
    EXPECT_TRUE(got.waiting.empty() && got.done.empty()) << e.out;
  }
  test::WriteAll(Marker(), "");
  WizqResult r = p.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  WizqResult e = RunWizq(
      {"wizq", "export", "--format", "barnum", "--dir", dir_.Join("orig")});
  Classes after = FromBarnum(e.out);
  EXPECT_TRUE(after.pending.empty() && after.waiting.empty()) << e.out;
  EXPECT_EQ(after.done.size(), 2u) << e.out;  // Root, Work 1 (v2 hook: no id)
}

TEST_F(BarnumRoundTripTest, FailedRun) {
  Json input = {{"children", {Work(1, {{"fail_times", 9}}), Work(2)}}};
  ASSERT_EQ(RunOriginal(input).code, 1);
  RoundTrip(input, 1);
}

}  // namespace
}  // namespace wizq
