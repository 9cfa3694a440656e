// Crash tests of the queue store (SPEC §6.1, 6.6, 6.7) beyond the scripted
// run of queue_crash_test.cc: a power loss in the middle of a big batch,
// crashes while archiving a finished run and while setting a torn tail
// aside. Views of a state are in queue_crash_util.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fs/fault_env.h"
#include "queue/dir/queue.h"
#include "tests/queue_crash_util.h"
#include "tests/queue_test_util.h"
#include "tests/test_util.h"

namespace wizq::queue_crash_test {
namespace {

namespace fs = std::filesystem;
using test::MakeTask;
using test::NoSyncEnv;
using test::ReadAll;
using test::ScratchDir;
using test::WriteAll;

// --- crashes while archiving and while setting a torn tail aside -------------

QueueOptions SimpleOptions(const std::string& install, const std::string& run,
                           Env* env) {
  QueueOptions o;
  o.env = env;
  o.install_dir = install;
  o.run_id = run;
  o.workflow_json = "{}";
  o.initial_tasks.push_back(
      MakeTask("T", "{\"run\":\"" + run + "\"}", 0, 2, Origin::kInitial));
  return o;
}

// Every file named `name` under `root`, with its content.
std::vector<std::string> FindAll(const std::string& root,
                                 const std::string& name) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.path().filename() == name) out.push_back(ReadAll(e.path().string()));
  }
  return out;
}

// A power loss while a batch that spans many sectors is being written and
// synced, with the disk keeping a random subset of the unsynced sectors:
// the batch is there whole or not at all, whatever mix of its sectors
// survived, and the run goes on.
TEST(QueueCrashTest, PartialPowerLossInABigBatchKeepsAllOrNothing) {
  int whole = 0, lost = 0, torn = 0;
  for (uint32_t seed = 1; seed <= 30; seed++) {
    for (int64_t k = 1; k <= 4; k++) {
      const std::string context = "seed " + std::to_string(seed) +
                                  ", crash at op +" + std::to_string(k) + ": ";
      ScratchDir dir;
      const std::string install = fs::canonical(dir.path()).string();
      NoSyncEnv no_sync;
      FaultInjectionEnv env(&no_sync);
      env.SetPartialPowerLoss(true);
      env.SetTornWrites(true);
      env.SetSeed(seed);
      {
        std::unique_ptr<Queue> q;
        ASSERT_TRUE(
            Queue::Open(SimpleOptions(install, "run-P", &env), &q, nullptr)
                .ok());
        int64_t id = 0;
        ASSERT_TRUE(q->Transact([&](Txn& txn) {
                       return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
                     }).ok());
        // 40 children of ~300 bytes: a batch of ~12 KB, 24 sectors.
        std::vector<NewTask> kids;
        for (int i = 0; i < 40; i++) {
          kids.push_back(MakeTask("Child",
                                  "{\"i\":" + std::to_string(i) +
                                      ",\"pad\":\"" + std::string(200, 'x') +
                                      "\"}",
                                  id, 2, Origin::kSpawned));
        }
        // The Transact's ops: lock, (grow the log: write, sync,) write,
        // sync. Crash at one of them.
        env.CrashAtOp(env.op_count() + k);
        Status s = q->Transact(
            [&](Txn& txn) { return txn.Complete(id, kids, nullptr); });
        if (s.ok()) continue;  // the crash came after the commit
        ASSERT_TRUE(env.crashed()) << context << s.ToString();
      }
      ASSERT_TRUE(env.DropUnsyncedData().ok()) << context;
      std::unique_ptr<Queue> q;
      OpenReport report;
      Status s =
          Queue::Open(SimpleOptions(install, "run-P", &env), &q, &report);
      ASSERT_TRUE(s.ok()) << context << s.ToString();
      if (!report.torn_tail_path.empty()) torn++;
      const size_t tasks = q->state().tasks().size();
      if (tasks == 1) {
        lost++;
      } else {
        whole++;
        EXPECT_EQ(tasks, 41u) << context;
      }
      int64_t id = 0;
      ASSERT_TRUE(q->Transact([&](Txn& txn) {
                     return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
                   }).ok())
          << context;
      EXPECT_EQ(id, tasks == 1 ? 1 : 2) << context;
    }
  }
  // The loop met the interesting case: parts of the batch kept, so a torn
  // tail with holes of padding in it.
  EXPECT_GT(torn, 5) << "lost " << lost << ", whole " << whole;
}

TEST(QueueCrashTest, CrashWhileArchivingLosesNothing) {
  for (bool power_loss : {false, true}) {
    for (int64_t k = 1;; k++) {
      const std::string context = CrashContext(power_loss, k);
      ScratchDir dir;
      const std::string install = fs::canonical(dir.path()).string();
      // Run A, closed cleanly.
      std::string a_log, a_snapshot;
      {
        std::unique_ptr<Queue> q;
        ASSERT_TRUE(
            Queue::Open(SimpleOptions(install, "run-A", nullptr), &q, nullptr)
                .ok());
        int64_t id = 0;
        ASSERT_TRUE(q->Transact([&](Txn& txn) {
                       return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
                     }).ok());
        ASSERT_TRUE(q->Close().ok());
        a_log = ReadAll(install + "/.wizard/audit.jsonl");
        a_snapshot = ReadAll(install + "/.wizard/queue.json");
      }
      // Run B archives it, crashing at op k.
      NoSyncEnv no_sync;
      FaultInjectionEnv env(&no_sync);
      env.SetTornWrites(true);
      env.CrashAtOp(k);
      std::unique_ptr<Queue> q;
      Status s =
          Queue::Open(SimpleOptions(install, "run-B", &env), &q, nullptr);
      if (s.ok()) {
        ASSERT_FALSE(env.crashed());
        ASSERT_GT(k, 5) << "too few operations to test";
        break;  // no crash: k is past the last op
      }
      q.reset();
      ASSERT_TRUE(AfterCrash(&env, power_loss).ok()) << context;
      // Nothing of run A is ever lost.
      std::vector<std::string> logs =
          FindAll(install + "/.wizard", "audit.jsonl");
      EXPECT_EQ(std::count(logs.begin(), logs.end(), a_log), 1) << context;
      std::vector<std::string> snapshots =
          FindAll(install + "/.wizard", "queue.json");
      EXPECT_GE(std::count(snapshots.begin(), snapshots.end(), a_snapshot), 1)
          << context;
      // Run B starts (again); A's files are all archived.
      OpenReport report;
      s = Queue::Open(SimpleOptions(install, "run-B", &env), &q, &report);
      ASSERT_TRUE(s.ok()) << context << s.ToString();
      // (Resumed if run B's start was durable before the crash.)
      EXPECT_TRUE(report.action == OpenAction::kStartedFresh ||
                  report.action == OpenAction::kResumed)
          << context;
      EXPECT_EQ(q->state().run().run_id, "run-B") << context;
      EXPECT_EQ(q->state().total(), 1) << context;
      ASSERT_TRUE(q->Close().ok());
      logs = FindAll(install + "/.wizard/archive", "audit.jsonl");
      EXPECT_EQ(std::count(logs.begin(), logs.end(), a_log), 1) << context;
      snapshots = FindAll(install + "/.wizard/archive", "queue.json");
      EXPECT_GE(std::count(snapshots.begin(), snapshots.end(), a_snapshot), 1)
          << context;
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(QueueCrashTest, CrashWhileSettingATornTailAsideLosesNothing) {
  // A run whose last batch was cut short by a crash.
  ScratchDir seed;
  const std::string seed_install = fs::canonical(seed.path()).string();
  std::string tasks_before_last;
  std::string full_log;
  {
    std::unique_ptr<Queue> q;
    ASSERT_TRUE(
        Queue::Open(SimpleOptions(seed_install, "run-T", nullptr), &q, nullptr)
            .ok());
    int64_t id = 0;
    ASSERT_TRUE(q->Transact([&](Txn& txn) {
                   return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
                 }).ok());
    ASSERT_TRUE(q->Transact([&](Txn& txn) {
                   return txn.Complete(
                       id,
                       {MakeTask("C", "{\"c\":1}", id, 2, Origin::kSpawned)},
                       nullptr);
                 }).ok());
    tasks_before_last = ToString(ViewOf(q->state()));
    full_log =
        test::WithoutFreeSpace(ReadAll(seed_install + "/.wizard/audit.jsonl"));
    ASSERT_TRUE(q->Transact([&](Txn& txn) {
                   return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
                 }).ok());
  }
  const std::string torn =
      test::WithoutFreeSpace(ReadAll(seed_install + "/.wizard/audit.jsonl"));
  const size_t committed = full_log.size();
  ASSERT_GT(torn.size(), committed + 10);
  const std::string torn_log = torn.substr(0, torn.size() - 7);
  const std::string tail = torn_log.substr(committed);

  for (bool power_loss : {false, true}) {
    for (int64_t k = 1;; k++) {
      const std::string context = CrashContext(power_loss, k);
      ScratchDir dir;
      const std::string install = fs::canonical(dir.path()).string();
      fs::copy(seed_install + "/.wizard", install + "/.wizard",
               fs::copy_options::recursive);
      WriteAll(install + "/.wizard/audit.jsonl", torn_log);
      // The snapshot was written for seed_install: fix its install_dir.
      std::string snap = ReadAll(install + "/.wizard/queue.json");
      snap.replace(snap.find(seed_install), seed_install.size(), install);
      WriteAll(install + "/.wizard/queue.json", snap);

      NoSyncEnv no_sync;
      FaultInjectionEnv env(&no_sync);
      env.SetTornWrites(true);
      env.CrashAtOp(k);
      std::unique_ptr<Queue> q;
      Status s =
          Queue::Open(SimpleOptions(install, "run-T", &env), &q, nullptr);
      if (s.ok()) {
        ASSERT_FALSE(env.crashed());
        break;
      }
      q.reset();
      ASSERT_TRUE(AfterCrash(&env, power_loss).ok()) << context;
      const std::string log_now = ReadAll(install + "/.wizard/audit.jsonl");
      // The committed records are intact ...
      EXPECT_EQ(log_now.substr(0, committed), full_log) << context;
      // ... and the torn bytes are still in the log or in an aside file.
      bool kept = log_now.substr(committed, tail.size()) == tail;
      for (const auto& e : fs::directory_iterator(install + "/.wizard")) {
        if (e.path().filename().string().rfind("audit.torn-", 0) == 0 &&
            ReadAll(e.path().string()) == tail) {
          kept = true;
        }
      }
      EXPECT_TRUE(kept) << context << "the torn tail was lost";
      OpenReport report;
      s = Queue::Open(SimpleOptions(install, "run-T", &env), &q, &report);
      ASSERT_TRUE(s.ok()) << context << s.ToString();
      EXPECT_EQ(ToString(ViewOf(q->state())), tasks_before_last) << context;
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace wizq::queue_crash_test
