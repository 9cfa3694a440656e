// Contract cases: WaitForChange wakes on another process's commit, and
// only then; it waits its whole timeout when nothing is committed.
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>

#include "tests/store/store_contract.h"
#include "tests/test_util.h"

extern char** environ;

namespace wizq::store_test {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t)
      .count();
}

// Starts store_tool to submit one task after `delay_ms`; returns its pid.
pid_t SubmitLater(const StoreOptions& o, int delay_ms) {
  const std::string tool = test::BuildDir() + "/store_tool";
  std::vector<std::string> args = {tool,
                                   "--location",
                                   o.location,
                                   "--dir",
                                   o.install_dir,
                                   "--run-id",
                                   o.run_id,
                                   "--schema",
                                   o.schema,
                                   "--delay-ms",
                                   std::to_string(delay_ms),
                                   "--type",
                                   "S",
                                   "--inputs",
                                   "{\"late\":1}"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  EXPECT_EQ(
      posix_spawn(&pid, tool.c_str(), nullptr, nullptr, argv.data(), environ),
      0);
  return pid;
}

int Reap(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_P(StoreContractTest, WaitForChangeWakesOnAnotherProcesssCommit) {
  StoreOptions o = Options();
  auto s = OpenOk(o);
  std::vector<EventRecord> events;
  ASSERT_TRUE(s->ReadEvents(0, SIZE_MAX, &events).ok());
  const int64_t seen = events.back().seq;
  const pid_t pid = SubmitLater(o, 200);
  const Clock::time_point start = Clock::now();
  int64_t seq = 0;
  ASSERT_TRUE(s->WaitForChange(seen, 10000, &seq).ok());
  const int64_t took = MsSince(start);
  EXPECT_EQ(Reap(pid), 0);
  EXPECT_GT(seq, seen);
  EXPECT_GE(took, 150) << "woke before the commit";
  EXPECT_LT(took, 1200) << "woke late";
  ASSERT_TRUE(s->ReadEvents(seen, SIZE_MAX, &events).ok());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().seq, seen + 1);
  TaskFilter f;
  f.steps = {"S"};
  std::vector<Task> tasks;
  ASSERT_TRUE(s->ListTasks(f, &tasks).ok());
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].inputs, "{\"late\":1}");
}

TEST_P(StoreContractTest, WaitForChangeWaitsItsTimeoutWhenNothingIsCommitted) {
  auto s = OpenOk(Options());
  std::vector<EventRecord> events;
  ASSERT_TRUE(s->ReadEvents(0, SIZE_MAX, &events).ok());
  const int64_t seen = events.back().seq;
  const Clock::time_point start = Clock::now();
  int64_t seq = -1;
  ASSERT_TRUE(s->WaitForChange(seen, 600, &seq).ok());
  const int64_t took = MsSince(start);
  EXPECT_EQ(seq, seen);
  EXPECT_GE(took, 600);
  EXPECT_LT(took, 1500);
  // An event already above after_seq returns at once.
  const Clock::time_point again = Clock::now();
  ASSERT_TRUE(s->WaitForChange(seen - 1, 10000, &seq).ok());
  EXPECT_EQ(seq, seen);
  EXPECT_LT(MsSince(again), 500);
}

}  // namespace
}  // namespace wizq::store_test
