// kill -9 tests of the real `wizq` binary (SPEC §5, §6.2, §6.3, §6.5).
//
// The fan-out workflow of tests/data/cli/fanout.jsonc runs while the test
// SIGKILLs wizq after random delays and starts it again, first one process
// at a time, then three processes sharing the install directory. Every task
// records its start and end in a ledger (tests/data/cli/lib.sh). At the end
// the test checks, from queue.json, audit.jsonl and the ledger, that every
// task completed exactly once, that no two attempts of a task overlapped,
// that a task ran more than once only when a worker running it was killed,
// and that the finally hooks ran once, after everything below them. The
// checks are shared with `make torture` (tests/torture/checker.h).
//
// Sizes: WIZQ_TORTURE_CYCLES (kills of the one-process loop, default 30),
// WIZQ_TORTURE_MP_KILLS (kills of the three-process loop, default 24),
// WIZQ_TORTURE_FANOUT (Work tasks of the root, default 40),
// WIZQ_TORTURE_SEED (the random seed; printed on failure).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"
#include "tests/torture/checker.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Json;
using test::LedgerLine;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

class WizqCrashTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  void SetUp() override {
    const int seed = test::EnvInt("WIZQ_TORTURE_SEED", 0);
    seed_ = seed != 0 ? static_cast<uint32_t>(seed) : std::random_device{}();
    rng_.seed(seed_);
    RecordProperty("seed", static_cast<int>(seed_));
  }
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }

  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

std::string FanoutWorkflow() { return test::DataFile("fanout.jsonc"); }
std::string FanoutInput(int n) { return "{\"n\":" + std::to_string(n) + "}"; }

// Checks a finished fan-out run of `n` in `dir` with the torture checker
// (tests/torture/checker.h: queue.json, audit.jsonl and the ledger; every
// task completed exactly once, no overlapping attempts, every re-run
// matched to a kill of the worker running it, finally hooks after
// everything below them, no task process left), plus `wizq status`.
// `kills` are the wizq processes the test SIGKILLed; `one_process` is true
// when only one wizq ran at a time (then tasks are put back only by a
// resume).
void VerifyFanoutRun(const std::string& dir, int n,
                     const std::vector<torture::Kill>& kills,
                     bool one_process) {
  SCOPED_TRACE("install dir " + dir);
  const torture::RunCheck c =
      torture::CheckFanoutRun(dir, n, kills, one_process);
  for (const std::string& e : c.errors) ADD_FAILURE() << e;
  EXPECT_EQ(c.lost, 0);
  EXPECT_EQ(c.duplicated, 0);
  EXPECT_EQ(c.overlapped, 0);
  EXPECT_EQ(c.extra_runs_unmatched, 0);
  EXPECT_EQ(c.extra_runs_matched, c.extra_runs);
  EXPECT_TRUE(c.hook_runs_ok);
  ::testing::Test::RecordProperty("extra_runs", c.extra_runs);

  const Json st = test::StatusJson(dir);
  ASSERT_TRUE(st.is_object());
  EXPECT_EQ(st["status"], "completed");
  EXPECT_EQ(st["counts"]["failed"], 0);
  EXPECT_EQ(st["counts"]["pending"], 0);
  EXPECT_EQ(st["counts"]["in_progress"], 0);
  EXPECT_EQ(st["tasks"].size(), static_cast<size_t>(c.tasks));
}

// One process at a time: wizq is SIGKILLed after 10-400ms and started
// again, in fresh install directories until the kills add up.
TEST_F(WizqCrashTest, KillNineLoopCompletesEveryTaskExactlyOnce) {
  const int cycles = test::EnvInt("WIZQ_TORTURE_CYCLES", 30);
  const int n = test::EnvInt("WIZQ_TORTURE_FANOUT", 40);
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (WIZQ_TORTURE_SEED)");
  int kills = 0, rounds = 0;
  while (kills < cycles || rounds == 0) {
    rounds++;
    ScratchDir dir;
    std::vector<torture::Kill> killed;
    bool finished = false;
    int runs = 0;
    while (!finished && (kills < cycles || runs == 0)) {
      runs++;
      WizqProcess p({"wizq", "run", FanoutWorkflow(), "--dir", dir.path(),
                     "--input", FanoutInput(n), "--quiet"});
      const auto kill_at =
          p.start_time() + test::milliseconds(Uniform(10, 400));
      while (!p.Poll() && test::Clock::now() < kill_at) {
        std::this_thread::sleep_for(test::milliseconds(1));
      }
      p.Kill(SIGKILL);
      const WizqResult& r = p.Wait();
      if (r.exited) {
        ASSERT_EQ(r.code, 0) << r.Describe();
        finished = true;
      } else {
        ASSERT_EQ(r.signal, SIGKILL) << r.Describe();
        killed.push_back({p.pid(), torture::WallMs()});
        kills++;
      }
    }
    if (!finished) {
      const WizqResult r =
          test::RunWizq({"wizq", "run", FanoutWorkflow(), "--dir", dir.path(),
                         "--input", FanoutInput(n)});
      ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
    }
    VerifyFanoutRun(dir.path(), n, killed, /*one_process=*/true);
    if (HasFailure()) break;
  }
  RecordProperty("kills", kills);
  RecordProperty("rounds", rounds);
  EXPECT_GE(kills, cycles);
}

// Three processes share the install directory; one of them, at random, is
// SIGKILLed every 20-300ms and started again after 0-100ms.
TEST_F(WizqCrashTest, ThreeProcessesKilledAtRandomCompleteEveryTaskOnce) {
  const int target = test::EnvInt("WIZQ_TORTURE_MP_KILLS", 24);
  const int n = test::EnvInt("WIZQ_TORTURE_FANOUT", 40);
  constexpr int kProcs = 3;
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (WIZQ_TORTURE_SEED)");
  int kills = 0, rounds = 0;
  while (kills < target || rounds == 0) {
    rounds++;
    ScratchDir dir;
    const std::vector<std::string> cmd = {
        "wizq",    "run",          FanoutWorkflow(), "--dir",  dir.path(),
        "--input", FanoutInput(n), "--quiet",        "--jobs", "3"};
    std::vector<std::unique_ptr<WizqProcess>> procs;
    for (int i = 0; i < kProcs; i++) {
      procs.push_back(std::make_unique<WizqProcess>(cmd));
    }
    std::vector<torture::Kill> killed;
    bool finished = false;
    // Returns true once one of them has finished the run (exit 0).
    auto poll = [&]() {
      for (auto& p : procs) {
        if (p && p->Poll()) {
          const WizqResult& r = p->result();
          EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
          if (r.exited && r.code == 0) finished = true;
        }
      }
      return finished;
    };
    while (!finished && kills < target) {
      const auto until =
          test::Clock::now() + test::milliseconds(Uniform(20, 300));
      while (!poll() && test::Clock::now() < until) {
        std::this_thread::sleep_for(test::milliseconds(1));
      }
      if (finished || HasFailure()) break;
      const int victim = Uniform(0, kProcs - 1);
      procs[victim]->Kill(SIGKILL);
      const WizqResult& r = procs[victim]->Wait();
      if (r.exited) {
        ASSERT_EQ(r.code, 0) << r.Describe();
        finished = true;
        break;
      }
      killed.push_back({procs[victim]->pid(), torture::WallMs()});
      kills++;
      std::this_thread::sleep_for(test::milliseconds(Uniform(0, 100)));
      procs[victim] = std::make_unique<WizqProcess>(cmd);
    }
    ASSERT_FALSE(HasFailure());
    // No more kills: they all finish the run.
    for (auto& p : procs) {
      const WizqResult& r = p->Wait();
      ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
    }
    VerifyFanoutRun(dir.path(), n, killed, /*one_process=*/false);
    if (HasFailure()) break;
  }
  RecordProperty("kills", kills);
  RecordProperty("rounds", rounds);
  EXPECT_GE(kills, target);
}

// A task that SIGKILLs its own wizq every time: attempts are counted at
// claim, so after max_attempts (3) it ends failed with worker_lost and the
// rest of the run completes; exit 1.
TEST_F(WizqCrashTest, PoisonTaskFailsWithWorkerLostAfterMaxAttempts) {
  ScratchDir dir;
  const std::vector<std::string> cmd = {
      "wizq", "run", test::DataFile("poison.jsonc"), "--dir", dir.path()};
  int killed_runs = 0;
  WizqResult last;
  for (int i = 0; i < 10; i++) {
    last = test::RunWizq(cmd);
    ASSERT_FALSE(last.timed_out) << last.Describe();
    if (last.exited) break;
    ASSERT_EQ(last.signal, SIGKILL) << last.Describe();
    killed_runs++;
  }
  EXPECT_EQ(killed_runs, 3) << "one crash per attempt of the poison task";
  ASSERT_TRUE(last.exited) << last.Describe();
  EXPECT_EQ(last.code, 1) << last.Describe();
  EXPECT_TRUE(test::Contains(last.err, "worker_lost")) << last.err;

  const Json st = test::StatusJson(dir.path());
  ASSERT_TRUE(st.is_object());
  EXPECT_EQ(st["status"], "failed");
  const std::vector<Json> poison = test::FindTasks(st, "Poison");
  ASSERT_EQ(poison.size(), 1u);
  EXPECT_EQ(poison[0]["state"], "failed");
  EXPECT_EQ(poison[0]["attempts"], 3);
  EXPECT_EQ(poison[0]["max_attempts"], 3);
  EXPECT_EQ(poison[0]["error"]["reason"], "worker_lost");
  for (const Json& t : st["tasks"]) {
    if (t["type"] != "Poison") {
      EXPECT_EQ(t["state"], "done") << t.dump();
    }
  }
  EXPECT_EQ(test::FindTasks(st, "Ok").size(), 6u);

  // The poison ran once per attempt; the root's hook ran after it failed
  // for good.
  const std::vector<LedgerLine> ledger = test::ReadLedger(dir.path());
  const std::vector<LedgerLine> runs =
      test::LedgerFind(ledger, "start", "poison");
  ASSERT_EQ(runs.size(), 3u);
  for (int a = 1; a <= 3; a++) EXPECT_EQ(runs[a - 1].attempt, a);
  const std::vector<LedgerLine> hook =
      test::LedgerFind(ledger, "start", "hook");
  ASSERT_EQ(hook.size(), 1u);
  EXPECT_GT(hook[0].index, runs.back().index);
  for (const LedgerLine& l : ledger) {
    EXPECT_NE(l.kind, "OVERLAP") << l.task << " " << l.role;
  }
  // Each crash's attempt is charged one of two ways, by timing: put back
  // by the next wizq (task_reset, no refund) or, when it finds the attempt
  // maybe still running here, adopted: a task_reset with refund, the
  // adopter's claim of that same attempt, then the tree found dead without
  // an exit record (task_failed worker_lost, will_retry). Every refund is
  // taken back so; a fresh claim is always the next attempt. The last
  // attempt fails the task for good, once.
  int lost_event = 0;
  int64_t last_attempt = 0;
  int64_t owed = 0;   // a refunded attempt not charged yet (0: none)
  std::string story;  // the poison task's events, said on a failure
  for (const Json& e : test::ReadAudit(dir.path())) {
    if (!e.contains("id") || e["id"] != poison[0]["id"]) continue;
    story += e.dump() + "\n";
    const int64_t attempt = e.value("attempt", int64_t{0});
    if (e["event"] == "task_claimed") {
      const int64_t want = owed != 0 ? owed : last_attempt + 1;
      EXPECT_EQ(attempt, want) << "a claim out of turn:\n" << story;
      last_attempt = attempt;
    } else if (e["event"] == "task_reset") {
      EXPECT_EQ(attempt, last_attempt) << story;
      if (e.value("refund", false)) {
        owed = attempt;
      } else {
        owed = 0;
      }
    } else if (e["event"] == "task_failed") {
      EXPECT_EQ(e["reason"], "worker_lost") << e.dump();
      owed = 0;
      if (e["will_retry"] == false) lost_event++;
    }
  }
  EXPECT_EQ(owed, 0) << "an adopted attempt was not charged:\n" << story;
  EXPECT_EQ(last_attempt, 3) << story;
  EXPECT_EQ(lost_event, 1) << story;

  // A finished run is not run again: exit 1, nothing runs.
  const WizqResult again = test::RunWizq(cmd);
  EXPECT_TRUE(again.exited && again.code == 1) << again.Describe();
  EXPECT_EQ(test::ReadLedger(dir.path()).size(), ledger.size());
}

}  // namespace
}  // namespace wizq
