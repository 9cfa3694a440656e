// The kill -9 torture harness (tests/torture/torture.cc) at a bounded size:
// each mode must pass with lost=0 duplicated=0 overlapped=0, every extra
// run matched to a kill, and the state parsing at every kill. `make
// torture` runs it at full size (docs/RELIABILITY.md, "Kill -9 torture").
//
// The checker itself (tests/torture/checker.h) is tested first, on runs
// with faults injected into their files.
//
// Sizes: single 40 cycles, group 20, multi 20, times WIZQ_TORTURE_SCALE
// (default 1); WIZQ_TORTURE_SEED fixes the seed (printed either way).
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"
#include "tests/torture/checker.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Json;
using test::ScratchDir;
using test::WizqResult;

class TortureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }

  // Runs wizq_torture in `mode` for `cycles` x WIZQ_TORTURE_SCALE cycles.
  void Torture(const std::string& mode, int cycles) {
    const int scale = test::EnvInt("WIZQ_TORTURE_SCALE", 1);
    const int seed_env = test::EnvInt("WIZQ_TORTURE_SEED", 0);
    const uint32_t seed = seed_env != 0 ? static_cast<uint32_t>(seed_env)
                                        : std::random_device{}();
    const std::string n = std::to_string(cycles * (scale > 0 ? scale : 1));
    RecordProperty("seed", static_cast<int>(seed));
    const WizqResult r = test::RunWizq(
        {test::BuildDir() + "/wizq_torture", "--wizq", test::WizqPath(),
         "--mode", mode, "--cycles", n, "--seed", std::to_string(seed)},
        {}, test::seconds(900));
    SCOPED_TRACE("seed " + std::to_string(seed) + " (WIZQ_TORTURE_SEED)");
    ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
    const std::string want = "TORTURE mode=" + mode + " cycles=" + n + " runs=";
    EXPECT_TRUE(test::Contains(r.out, want)) << r.out;
    EXPECT_TRUE(test::Contains(r.out, " lost=0 duplicated=0 overlapped=0 "))
        << r.out;
    EXPECT_TRUE(test::Contains(
        r.out, " extra_runs_unmatched=0 queue_json_parsed_every_kill=true\n"))
        << r.out;
    std::cout << r.out;
  }
};

// --- the checker ------------------------------------------------------------

constexpr int kFanout = 18;

std::vector<std::string> FanoutRun(const std::string& dir) {
  return {"wizq",
          "run",
          test::DataFile("fanout.jsonc"),
          "--dir",
          dir,
          "--input",
          "{\"n\":" + std::to_string(kFanout) + "}",
          "--quiet"};
}

// A copy of the run in `from`, as a scratch directory.
std::unique_ptr<ScratchDir> CopyRun(const std::string& from) {
  auto to = std::make_unique<ScratchDir>();
  fs::copy(from, to->path(), fs::copy_options::recursive);
  return to;
}

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

std::string Errors(const torture::RunCheck& c) {
  std::string all;
  for (const std::string& e : c.errors) all += e + "\n";
  return all;
}

TEST(TortureCheckerTest, CatchesFaultsInjectedIntoACleanRun) {
  ScratchDir clean;
  const WizqResult r = test::RunWizq(FanoutRun(clean.path()));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const torture::RunCheck ok =
      torture::CheckFanoutRun(clean.path(), kFanout, {}, true);
  EXPECT_TRUE(ok.ok()) << Errors(ok);
  EXPECT_EQ(ok.extra_runs, 0);
  const Json work5 =
      test::FindTasks(test::ReadQueue(clean.path()), "Work", Json{{"i", 5}})
          .at(0);
  const std::string id = std::to_string(work5["id"].get<int64_t>());

  {  // Work 5 runs again after its completion: an unclaimed attempt.
    auto d = CopyRun(clean.path());
    Append(d->Join("ledger"),
           "start " + id + " 2 1 work-5\nend " + id + " 2 1 work-5\n");
    const torture::RunCheck c =
        torture::CheckFanoutRun(d->path(), kFanout, {}, true);
    EXPECT_EQ(c.extra_runs, 1) << Errors(c);
    EXPECT_EQ(c.extra_runs_unmatched, 1) << Errors(c);
    EXPECT_EQ(c.duplicated, 1) << Errors(c);  // its completed claim ran again
  }
  {  // An attempt found the task's lock held.
    auto d = CopyRun(clean.path());
    Append(d->Join("ledger"), "OVERLAP " + id + " 1 1 work-5\n");
    const torture::RunCheck c =
        torture::CheckFanoutRun(d->path(), kFanout, {}, true);
    EXPECT_EQ(c.overlapped, 1) << Errors(c);
  }
  {  // Work 5's completed attempt never reached its end.
    auto d = CopyRun(clean.path());
    std::string ledger = test::ReadAll(d->Join("ledger"));
    const size_t at = ledger.find("end " + id + " 1 ");
    ASSERT_NE(at, std::string::npos);
    ledger.erase(at, ledger.find('\n', at) + 1 - at);
    test::WriteAll(d->Join("ledger"), ledger);
    const torture::RunCheck c =
        torture::CheckFanoutRun(d->path(), kFanout, {}, true);
    EXPECT_EQ(c.lost, 1) << Errors(c);
  }
  {  // Two tasks with one <type, inputs>; Work 5's own never submitted.
    auto d = CopyRun(clean.path());
    std::string q = test::ReadAll(d->Join(".wizard/queue.json"));
    const std::string from = "\"inputs\":{\"i\":5}";
    const size_t at = q.find(from);
    ASSERT_NE(at, std::string::npos);
    q.replace(at, from.size(), "\"inputs\":{\"i\":4}");
    test::WriteAll(d->Join(".wizard/queue.json"), q);
    const torture::RunCheck c =
        torture::CheckFanoutRun(d->path(), kFanout, {}, true);
    EXPECT_EQ(c.duplicated, 1) << Errors(c);
    EXPECT_EQ(c.lost, 1) << Errors(c);
  }
  {  // A torn tail left at rest; queue.json still parses at a kill.
    auto d = CopyRun(clean.path());
    Append(d->Join(".wizard/audit.jsonl"), "{\"seq\":9");
    EXPECT_FALSE(torture::CheckFanoutRun(d->path(), kFanout, {}, true).ok());
    EXPECT_EQ(torture::CheckStateAtKill(d->path()), "");
    Append(
        d->Join(".wizard/audit.jsonl"),
        "9}\n" +
            test::SplitLines(test::ReadAll(clean.Join(".wizard/audit.jsonl")))
                .back() +
            "\n");
    EXPECT_TRUE(
        test::Contains(torture::CheckStateAtKill(d->path()), "corrupt line"));
  }
}

// SIGKILLs the process group of every task attempt of the run in `dir`
// (their shells lead them; the attempt journal names them): a power cut
// for the task trees.
void KillTaskGroups(const std::string& dir) {
  for (long pid : test::AttemptGroups(dir)) {
    kill(-static_cast<pid_t>(pid), SIGKILL);
  }
}

// A run killed once while tasks ran, their trees too: its re-runs are
// matched to the kill, and unmatched when the checker is not told about
// it or is told that only wizq was killed.
TEST(TortureCheckerTest, MatchesReRunsToTheKillOfTheirWorker) {
  test::BecomeSubreaper();
  for (int attempt = 0; attempt < 10; attempt++) {
    ScratchDir dir;
    test::WizqProcess p(FanoutRun(dir.path()));
    // Once the fan-out's tasks run (however slowly wizq came up: a
    // sanitizer build takes a while), a little later each time.
    test::WaitFor(
        [&] {
          return test::CountOf(test::ReadAll(dir.path() + "/ledger"),
                               "start ") >= 2;
        },
        test::seconds(30));
    std::this_thread::sleep_for(test::milliseconds(50 * attempt));
    p.Kill(SIGKILL);
    const WizqResult& killed = p.Wait();
    if (killed.exited) continue;  // finished first
    KillTaskGroups(dir.path());
    const std::vector<torture::Kill> kills = {
        {p.pid(), torture::WallMs(), /*trees=*/true}};
    const WizqResult r = test::RunWizq(FanoutRun(dir.path()));
    ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
    const torture::RunCheck c =
        torture::CheckFanoutRun(dir.path(), kFanout, kills, true);
    EXPECT_TRUE(c.ok()) << Errors(c);
    if (c.extra_runs == 0) continue;  // nothing was in flight
    EXPECT_EQ(c.extra_runs_matched, c.extra_runs);
    const torture::RunCheck blind =
        torture::CheckFanoutRun(dir.path(), kFanout, {}, true);
    EXPECT_EQ(blind.extra_runs_unmatched, c.extra_runs) << Errors(blind);
    EXPECT_FALSE(blind.ok());
    const torture::RunCheck wizq_only = torture::CheckFanoutRun(
        dir.path(), kFanout, {{p.pid(), kills[0].ms, false}}, true);
    EXPECT_EQ(wizq_only.extra_runs_unmatched, c.extra_runs)
        << Errors(wizq_only);
    return;
  }
  FAIL() << "no kill ever caught a task in flight";
}

// --- the harness ------------------------------------------------------------

TEST_F(TortureTest, SingleProcessKilled) { Torture("single", 40); }

TEST_F(TortureTest, ProcessGroupKilledWithOrWithoutItsTasks) {
  Torture("group", 20);
}

TEST_F(TortureTest, OneOfThreeProcessesKilled) { Torture("multi", 20); }

}  // namespace
}  // namespace wizq
