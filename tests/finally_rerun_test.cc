// A finally hook whose subtree changed after it ran runs again (issue 21,
// item 1), through the real binary: `wizq run --retry-failed` repairs a
// failed child of a fan-out, and the owner's hook, which aggregated the
// children's output without it, runs again as a hook of generation 2 once
// the subtree has settled, then every ancestor's hook, innermost first.
//
// The workflow (written per test into a directory of its own):
//   Root {}   -> Fan {n: 3};               finally ./top.sh (TOP = ALL)
//   Fan {n}   -> Child {i} for i in 1..n;  finally ./agg.sh (ALL = out.*)
//   Child {i} -> [];  writes out.<i>; waits for <dir>/go while
//                <dir>/wait-<i> exists, then fails while <dir>/fail-<i> does
// Each hook appends "<role> $WIZQ_IDEMPOTENCY_KEY" to <dir>/hooks; agg.sh
// fails while <dir>/fail-hook exists.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tasks/workflow/run_rules.h"
#include "tasks/workflow/workflow.h"
#include "tests/integration_util.h"
#include "tests/queue_fixture.h"
#include "tests/test_util.h"
#include "util/crash_point.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Json;
using test::ScratchDir;
using test::WizqResult;

const char kWorkflow[] = R"({
  "entrypoint": "ENTRY",
  "options": { "max_retries": 0 },
  "steps": [
    { "name": "Root", "action": { "kind": "Command", "script": "./root.sh" },
      "next": ["Fan"], "finally": { "kind": "Command", "script": "./top.sh" } },
    { "name": "Fan", "action": { "kind": "Command", "script": "./fan.sh" },
      "next": ["Child"], "finally": { "kind": "Command", "script": "./agg.sh" } },
    { "name": "Child", "action": { "kind": "Command", "script": "./child.sh" },
      "next": [] }
  ]
})";

// What the log says of the finally hooks of one step's task.
struct HookRuns {
  std::vector<Json> submitted;  // task_submitted, in order
  int completed = 0;            // task_completed of those tasks
};

class FinallyRerunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::BecomeSubreaper();
    wf_dir_ = scratch_.Join("wf");
    dir_ = scratch_.Join("install");
    fs::create_directories(wf_dir_);
    fs::create_directories(dir_);
    Script("root.sh", "echo '[{\"kind\":\"Fan\",\"value\":{\"n\":3}}]'");
    Script("fan.sh",
           "n=$(jq .value.n)\n"
           "seq 1 \"$n\" | jq -cs 'map({kind: \"Child\", value: {i: .}})'");
    Script("child.sh",
           "i=$(jq .value.i)\ncd \"$WIZQ_INSTALL_DIR\"\n"
           "if [ -e \"wait-$i\" ]; then\n"
           "  while [ ! -e go ]; do sleep 0.02; done\nfi\n"
           "[ -e \"fail-$i\" ] && exit 3\n"
           "echo \"child $i\" > \"out.$i\"\necho '[]'");
    Script("agg.sh",
           "cd \"$WIZQ_INSTALL_DIR\"\n[ -e fail-hook ] && exit 3\n"
           "cat out.* > ALL\necho \"agg $WIZQ_IDEMPOTENCY_KEY\" >> hooks\n"
           "echo '[]'");
    Script("top.sh",
           "cd \"$WIZQ_INSTALL_DIR\"\ncp ALL TOP\n"
           "echo \"top $WIZQ_IDEMPOTENCY_KEY\" >> hooks\necho '[]'");
    Entry("Fan");
  }
  void TearDown() override { test::ReapStrays(); }

  void Script(const std::string& name, const std::string& body) {
    const std::string path = wf_dir_ + "/" + name;
    test::WriteAll(path, "#!/bin/sh\n" + body + "\n");
    fs::permissions(path, fs::perms::owner_all);
  }
  void Entry(const std::string& step) {
    std::string wf = kWorkflow;
    wf.replace(wf.find("ENTRY"), 5, step);
    test::WriteAll(wf_dir_ + "/wf.json", wf);
  }
  void Touch(const std::string& name) { test::WriteAll(dir_ + "/" + name, ""); }
  std::vector<std::string> Args(std::vector<std::string> flags) const {
    std::vector<std::string> args = {
        "wizq",       "run",    wf_dir_ + "/wf.json",
        "--dir",      dir_,     "--input",
        R"({"n":3})", "--jobs", "4"};
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }
  WizqResult Run(std::vector<std::string> flags = {},
                 const test::SpawnOptions& opts = {}) {
    return test::RunWizq(Args(std::move(flags)), opts);
  }
  // A first run in which the children `fail` fail for good (ALL lacks
  // them), then the cause removed for those in `fix`.
  void FailFirst(std::set<int> fail, std::set<int> fix) {
    for (int i : fail) Touch("fail-" + std::to_string(i));
    const WizqResult r = Run();
    ASSERT_EQ(r.code, 1) << r.Describe() << r.err;
    std::string all;
    for (int i = 1; i <= 3; i++) {
      if (!fail.count(i)) all += "child " + std::to_string(i) + "\n";
    }
    if (!fs::exists(dir_ + "/fail-hook")) {
      ASSERT_EQ(test::ReadAll(dir_ + "/ALL"), all);
    }
    for (int i : fix) fs::remove(dir_ + "/fail-" + std::to_string(i));
  }
  void FailChild2ThenFix() { FailFirst({2}, {2}); }
  // The hooks of `step`'s task as the audit log has them.
  HookRuns Hooks(const std::string& step) const {
    HookRuns out;
    std::map<int64_t, bool> hook;
    for (const Json& e : test::ReadAudit(dir_)) {
      if (e["event"] == "task_submitted") {
        const bool mine = e["origin"] == "Finally" && e["type"] == step;
        hook[e["id"]] = mine;
        if (mine) out.submitted.push_back(e);
      }
      if (e["event"] == "task_completed" && hook[e["id"]]) out.completed++;
    }
    return out;
  }
  // The seq of the first `event` of task `id`.
  int64_t SeqOf(const std::string& event, int64_t id) const {
    for (const Json& e : test::ReadAudit(dir_)) {
      if (e["event"] == event && e.value("id", int64_t{0}) == id) {
        return e["seq"];
      }
    }
    return 0;
  }
  std::vector<std::string> HookKeys() const {
    return test::SplitLines(test::ReadAll(dir_ + "/hooks"));
  }

  ScratchDir scratch_;
  std::string wf_dir_, dir_;
};

const char kAll[] = "child 1\nchild 2\nchild 3\n";

TEST_F(FinallyRerunTest, RetryFailedRerunsTheHookOfTheRepairedSubtree) {
  FailChild2ThenFix();
  const WizqResult r = Run({"--retry-failed"});
  ASSERT_EQ(r.code, 0) << r.Describe() << r.err;
  // The aggregate holds the retried child's output.
  EXPECT_EQ(test::ReadAll(dir_ + "/ALL"), kAll);
  const HookRuns fan = Hooks("Fan");
  ASSERT_EQ(fan.submitted.size(), 2u);
  EXPECT_EQ(fan.completed, 2);
  // Generation 1 keeps its key; generation 2 adds it.
  const int64_t owner = fan.submitted[0]["finally_for"];
  EXPECT_EQ(fan.submitted[0]["dedup_key"], "finally:" + std::to_string(owner));
  EXPECT_FALSE(fan.submitted[0].contains("generation"));
  EXPECT_EQ(fan.submitted[1]["finally_for"], owner);
  EXPECT_EQ(fan.submitted[1]["generation"], 2);
  EXPECT_EQ(fan.submitted[1]["dedup_key"],
            "finally:" + std::to_string(owner) + ":2");
  // ... and so does its idempotency key.
  const std::vector<std::string> keys = HookKeys();
  ASSERT_EQ(keys.size(), 2u);
  const std::string gen2 = "-" + fan.submitted[1]["id"].dump() + "-g2";
  EXPECT_FALSE(test::Contains(keys[0], "-g"));
  EXPECT_EQ(keys[1].substr(keys[1].size() - gen2.size()), gen2) << keys[1];
  // The new hook ran after the retried child completed.
  const int64_t child2 = fan.submitted[1]["id"].get<int64_t>() - 1;
  EXPECT_LT(SeqOf("task_completed", child2),
            SeqOf("task_claimed", fan.submitted[1]["id"]));
  // status says which run of the hook each task is.
  const WizqResult st = test::RunWizq({"wizq", "status", "--dir", dir_});
  EXPECT_TRUE(test::Contains(st.out, "(finally)  done")) << st.out;
  EXPECT_TRUE(test::Contains(st.out, "(finally, run 2)  done")) << st.out;
  const Json js =
      test::FindTask(test::StatusJson(dir_), fan.submitted[1]["id"]);
  EXPECT_EQ(js["generation"], 2) << js.dump();
  EXPECT_EQ(js["finally_for"], owner) << js.dump();
  // Done: nothing runs again.
  EXPECT_EQ(Run({"--retry-failed"}).code, 0);
  EXPECT_EQ(Hooks("Fan").completed, 2);
}

TEST_F(FinallyRerunTest, RetryFailedRerunsEveryAncestorsHookInnermostFirst) {
  Entry("Root");
  FailChild2ThenFix();
  ASSERT_EQ(test::ReadAll(dir_ + "/TOP"), "child 1\nchild 3\n");
  const WizqResult r = Run({"--retry-failed"});
  ASSERT_EQ(r.code, 0) << r.Describe() << r.err;
  EXPECT_EQ(test::ReadAll(dir_ + "/ALL"), kAll);
  EXPECT_EQ(test::ReadAll(dir_ + "/TOP"), kAll);
  const HookRuns fan = Hooks("Fan"), root = Hooks("Root");
  ASSERT_EQ(fan.submitted.size(), 2u);
  ASSERT_EQ(root.submitted.size(), 2u);
  EXPECT_EQ(fan.completed, 2);
  EXPECT_EQ(root.completed, 2);
  EXPECT_EQ(root.submitted[1]["generation"], 2);
  // Innermost first: Root's new hook was submitted only once Fan's new
  // hook had completed.
  EXPECT_LT(SeqOf("task_completed", fan.submitted[1]["id"]),
            root.submitted[1]["seq"].get<int64_t>());
}

// A hook that failed too is put back with the child; it waits for the
// child (SPEC §2) and then sees its output: it ran after the change, so no
// second generation is needed.
TEST_F(FinallyRerunTest, AHookRetriedWithItsSubtreeWaitsForIt) {
  Touch("fail-hook");
  FailChild2ThenFix();
  ASSERT_FALSE(fs::exists(dir_ + "/ALL"));
  fs::remove(dir_ + "/fail-hook");
  Touch("wait-2");
  test::WizqProcess p(Args({"--retry-failed"}));
  // The hook is pending and free to run as far as slots go: it must not.
  ASSERT_TRUE(test::WaitFor(
      [&] {
        const Json st = test::StatusJson(dir_);
        return st.is_object() && st["counts"]["in_progress"] == 1;
      },
      std::chrono::seconds(30)));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(fs::exists(dir_ + "/ALL")) << "the hook ran before the child";
  Touch("go");
  const WizqResult r = p.Wait(std::chrono::seconds(60));
  ASSERT_EQ(r.code, 0) << r.Describe() << r.err;
  EXPECT_EQ(test::ReadAll(dir_ + "/ALL"), kAll);
  const HookRuns fan = Hooks("Fan");
  EXPECT_EQ(fan.submitted.size(), 1u);
  EXPECT_EQ(fan.completed, 1);
}

// The new generation is submitted in the batch that settles the subtree:
// a crash anywhere in the repair submits it exactly once.
TEST_F(FinallyRerunTest, ACrashDuringTheRepairSubmitsTheNewHookOnce) {
  const std::vector<std::string> points = {
      "run.before_result_commit:1", "run.after_result_commit:1",
      "run.after_claim_commit:2",   "run.after_result_commit:2",
      "log.after_sync:2",           "log.after_sync:3",
      "log.after_sync:4",           "run.before_finish:1"};
  for (std::string point : points) {
    // On PostgreSQL a commit's durable step is its acknowledgement.
    if (test::OnPgStore() && point.rfind("log.after_sync", 0) == 0) {
      point = "pg.after_commit_ack" + point.substr(point.find(':'));
    }
    SCOPED_TRACE(point);
    test::StartOver(dir_);
    FailChild2ThenFix();
    test::SpawnOptions crash;
    crash.env = {{"WIZQ_CRASH_AT", point}};
    WizqResult r = Run({"--retry-failed"}, crash);
    ASSERT_TRUE(r.exited) << r.Describe();
    EXPECT_EQ(r.code, kCrashExitCode) << "not reached: " << r.err;
    for (int i = 0; i < 3 && r.code != 0; i++) r = Run({"--retry-failed"});
    ASSERT_EQ(r.code, 0) << r.Describe() << r.err;
    EXPECT_EQ(test::ReadAll(dir_ + "/ALL"), kAll);
    const HookRuns fan = Hooks("Fan");
    ASSERT_EQ(fan.submitted.size(), 2u);
    EXPECT_EQ(fan.submitted[1]["generation"], 2);
    EXPECT_EQ(fan.completed, 2);
  }
}

// A repair interrupted after one child completed (its owner's hook stale,
// the subtree still open) comes to rest in queue.json, which must keep the
// stale mark: the other retried child fails again, which marks nothing,
// and the resumed run must still re-run the hook.
TEST_F(FinallyRerunTest, AnInterruptedRepairKeepsTheStaleHookInTheSnapshot) {
  FailFirst({2, 3}, {2});
  Touch("wait-3");
  test::WizqProcess p(Args({"--retry-failed"}));
  ASSERT_TRUE(test::WaitFor(
      [&] {
        const Json st = test::StatusJson(dir_);
        return st.is_object() && st["counts"]["in_progress"] == 1 &&
               st["counts"]["failed"] == 0 && fs::exists(dir_ + "/out.2");
      },
      std::chrono::seconds(30)));
  ASSERT_TRUE(test::WaitFor(
      [&] {
        const Json st = test::StatusJson(dir_);
        for (const Json& t : st.is_object() ? st["tasks"] : Json()) {
          if (t["inputs"] == Json{{"i", 2}}) return t["state"] == "done";
        }
        return false;
      },
      std::chrono::seconds(30)));
  p.Kill(SIGINT);
  const WizqResult r = p.Wait(std::chrono::seconds(60));
  ASSERT_EQ(r.code, 130) << r.Describe() << r.err;
  const Json q = test::ReadQueue(dir_);
  ASSERT_EQ(q["seq"], test::ReadAudit(dir_).back()["seq"]) << "not at rest";
  int stale = 0;
  for (const Json& t : q["tasks"]) stale += t.value("hook_stale", false);
  EXPECT_EQ(stale, 1) << q.dump();
  Touch("go");
  const WizqResult again = Run();
  ASSERT_EQ(again.code, 1) << again.Describe() << again.err;
  EXPECT_EQ(test::ReadAll(dir_ + "/ALL"), "child 1\nchild 2\n");
  EXPECT_EQ(Hooks("Fan").completed, 2);
}

// SPEC §11: a hook is reused only when its owner and everything beneath
// it were; it is reused from the hook that saw the whole subtree, the
// latest generation.
TEST_F(FinallyRerunTest, AFreshRunReusesTheLatestGeneration) {
  FailChild2ThenFix();
  ASSERT_EQ(Run({"--retry-failed"}).code, 0);
  ASSERT_EQ(Hooks("Fan").submitted.size(), 2u);
  const int64_t gen2 = Hooks("Fan").submitted[1]["id"];
  const std::string keys = test::ReadAll(dir_ + "/hooks");
  const WizqResult r = Run({"--fresh"});
  ASSERT_EQ(r.code, 0) << r.Describe() << r.err;
  EXPECT_EQ(test::ReadAll(dir_ + "/hooks"), keys) << "a hook ran";
  const HookRuns fan = Hooks("Fan");
  ASSERT_EQ(fan.submitted.size(), 1u);
  bool reused = false;
  for (const Json& e : test::ReadAudit(dir_)) {
    if (e["event"] == "task_completed" && e["id"] == fan.submitted[0]["id"]) {
      reused = true;
      EXPECT_EQ(e["reused"]["id"], gen2) << e.dump();
    }
  }
  EXPECT_TRUE(reused);
}

// The store itself (queue/dir/state.cc, queue/dir/txn_impl.cc): a retried task
// that completes under a hook that ran makes its owner due again; the next hook
// is generation 2 with its own key, a second submission of it is
// deduplicated, and the mark and the generation read back the same from
// queue.json and from the log.
class HookGenerationTest : public queue_fixture::QueueTest {};

TEST_F(HookGenerationTest, AStaleHookIsDueAgainAndItsNextGenerationDedups) {
  QueueOptions o = Options();
  o.initial_tasks = {test::MakeTask("R", "{}", 0, 1, Origin::kInitial, true)};
  auto q = OpenOk(o);
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1,
           {test::MakeTask("C", "{\"i\":1}", 1),
            test::MakeTask("C", "{\"i\":2}", 1)});
  ASSERT_EQ(Claim(q.get()), 2);
  Complete(q.get(), 2);
  ASSERT_EQ(Claim(q.get()), 3);
  EXPECT_FALSE(Fail(q.get(), 3, false));
  const int64_t h1 = Submit(q.get(), queue_fixture::Hook(*q->state().Find(1)));
  ASSERT_EQ(Claim(q.get()), h1);
  Complete(q.get(), h1);
  ASSERT_TRUE(q->state().AllSettled());
  ASSERT_TRUE(q->Close().ok());
  // --retry-failed: task 3 is back; nothing is due while it runs.
  o.retry_failed = true;
  q = OpenOk(o);
  EXPECT_TRUE(q->state().hooks_due().empty());
  ASSERT_EQ(Claim(q.get()), 3);
  Complete(q.get(), 3);
  EXPECT_TRUE(q->state().Find(1)->hook_stale);
  EXPECT_EQ(q->state().hooks_due(), std::set<int64_t>{1});
  ExpectDiskMatches(q.get());
  // At rest in queue.json, and back.
  ASSERT_TRUE(q->Close().ok());
  o.retry_failed = false;
  q = OpenOk(o);
  EXPECT_EQ(q->state().hooks_due(), std::set<int64_t>{1});
  bool dup = true;
  const int64_t h2 =
      Submit(q.get(), queue_fixture::Hook(*q->state().Find(1)), &dup);
  EXPECT_FALSE(dup);
  const Task& hook = *q->state().Find(h2);
  EXPECT_EQ(hook.generation, 2);
  EXPECT_EQ(hook.dedup_key, "finally:1:2");
  EXPECT_EQ(q->state().Find(h1)->dedup_key, "finally:1");
  EXPECT_EQ(q->state().Find(1)->finally_task, h2);
  EXPECT_FALSE(q->state().Find(1)->hook_stale);
  EXPECT_TRUE(q->state().hooks_due().empty());
  EXPECT_EQ(Submit(q.get(), queue_fixture::Hook(*q->state().Find(1)), &dup),
            h2);
  EXPECT_TRUE(dup);
  ExpectDiskMatches(q.get());
  ASSERT_EQ(Claim(q.get()), h2);
  Complete(q.get(), h2);
  EXPECT_TRUE(q->state().AllSettled());
  ASSERT_TRUE(q->Close().ok());
  q = OpenOk(o);
  EXPECT_TRUE(q->state().AllSettled());
  ExpectDiskMatches(q.get());
}

// The run rules both drivers share (tasks/workflow/run_rules.h).
TEST(RunRulesTest, RetryDelayDoublesFromATenthOfASecondUpToFiveSeconds) {
  EXPECT_EQ(RetryDelayMs(0), 100);
  EXPECT_EQ(RetryDelayMs(1), 100);
  EXPECT_EQ(RetryDelayMs(2), 200);
  EXPECT_EQ(RetryDelayMs(3), 400);
  EXPECT_EQ(RetryDelayMs(6), 3200);
  EXPECT_EQ(RetryDelayMs(7), 5000);
  EXPECT_EQ(RetryDelayMs(1000000), 5000);
}

// The run loop's Commands and the agent service's Pool payload get this one
// key: a re-run hook's names its generation, the first's does not.
TEST(RunRulesTest, IdempotencyKeyNamesTheHookGenerationAfterTheFirst) {
  Task t;
  t.id = 7;
  EXPECT_EQ(IdempotencyKey("r1", 1000, t), "r1-1000-7");
  t.generation = 2;
  EXPECT_EQ(IdempotencyKey("r1", 1000, t), "r1-1000-7-g2");
}

// SettleRun: the due hook is submitted while the run is running; once
// everything has settled the run finishes (failed: a task failed), calling
// before_finish just before; a finished run is left alone.
TEST_F(HookGenerationTest, SettleRunSubmitsDueHooksThenFinishesTheRun) {
  std::unique_ptr<Workflow> wf;
  ASSERT_TRUE(Workflow::Parse(R"({"entrypoint": "R", "steps": [
      {"name": "R", "action": {"kind": "Command", "script": "r"},
       "next": ["C"], "finally": {"kind": "Command", "script": "f"}},
      {"name": "C", "action": {"kind": "Command", "script": "c"},
       "next": []}]})",
                              "wf.json", &wf)
                  .ok());
  QueueOptions o = Options();
  o.initial_tasks = {test::MakeTask("R", "{}", 0, 1, Origin::kInitial, true)};
  auto q = OpenOk(o);
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1, {test::MakeTask("C", "{}", 1)});
  ASSERT_EQ(Claim(q.get()), 2);
  EXPECT_FALSE(Fail(q.get(), 2, false));
  ASSERT_EQ(q->state().hooks_due(), std::set<int64_t>{1});
  int finishing = 0;
  // Settled through the store contract, by another worker on the run.
  StoreOptions so;
  so.install_dir = install_;
  so.mode = OpenMode::kAttach;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(so, &store, nullptr).ok());
  auto settle = [&] {
    Status s = store->Transact([&](StoreTxn& txn) {
      return SettleRun(txn, *wf, 42, [&] { finishing++; });
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(q->Refresh().ok());
  };
  settle();
  const int64_t hook = q->state().Find(1)->finally_task;
  ASSERT_GT(hook, 2);
  EXPECT_EQ(q->state().Find(hook)->origin, Origin::kFinally);
  EXPECT_TRUE(q->state().hooks_due().empty());
  EXPECT_EQ(q->state().run().status, RunStatus::kRunning);
  EXPECT_EQ(finishing, 0);
  ASSERT_EQ(Claim(q.get()), hook);
  Complete(q.get(), hook);
  settle();
  EXPECT_EQ(q->state().run().status, RunStatus::kFailed);
  EXPECT_EQ(finishing, 1);
  const int64_t seq = q->state().last_seq();
  settle();
  EXPECT_EQ(q->state().last_seq(), seq);
  EXPECT_EQ(finishing, 1);
  ExpectDiskMatches(q.get());
}

}  // namespace
}  // namespace wizq
