// The local deadline (SPEC §14, tasks/proc/spawner.h): past it, the spawner
// kills every attempt that runs, with its process group, even when the
// wizq that started them never comes back to it (frozen: these tests make
// no call on the runner meanwhile), and starts nothing more until a later
// deadline comes.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tasks/proc/command_runner.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using Clock = std::chrono::steady_clock;
using Outcome = CommandResult::Outcome;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int64_t MonoMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

using test::ProcessGone;

pid_t WaitForPid(const std::string& path) {
  const auto start = Clock::now();
  while (SecondsSince(start) < 10) {
    const std::string text = test::ReadAll(path);
    if (!text.empty() && text.back() == '\n') return std::stoi(text);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

class LocalDeadlineTest : public testing::Test {
 protected:
  CommandSpec Spec(const std::string& script, int task) {
    CommandSpec spec;
    spec.script = script;
    spec.cwd = dir_.path();
    spec.output_dir = dir_.Join(".wizard/tasks/" + std::to_string(task));
    return spec;
  }
  CommandRunner::Done WaitAll(size_t n) {
    CommandRunner::Done done, more;
    const auto start = Clock::now();
    while (done.size() < n && SecondsSince(start) < 10) {
      EXPECT_TRUE(runner_.Wait(200, &more).ok());
      done.insert(done.end(), more.begin(), more.end());
      more.clear();
    }
    return done;
  }

  test::ScratchDir dir_;
  CommandRunner runner_;
};

TEST_F(LocalDeadlineTest, AttemptsEndAtTheDeadlineWhileTheirWizqIsFrozen) {
  runner_.set_local_deadline(MonoMs() + 600);
  const std::string shell = dir_.Join("shell.pid");
  const std::string child = dir_.Join("child.pid");
  ASSERT_TRUE(runner_
                  .Start(Spec("sleep 60 & echo $! > " + child + "; echo $$ > " +
                                  shell + "; wait",
                              1),
                         1)
                  .ok());
  const pid_t sh = WaitForPid(shell), sleeper = WaitForPid(child);
  ASSERT_GT(sh, 0);
  ASSERT_GT(sleeper, 0);
  // No call on the runner from here: the spawner alone ends them.
  const auto start = Clock::now();
  while (!(ProcessGone(sh) && ProcessGone(sleeper)) && SecondsSince(start) < 5)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(ProcessGone(sh));
  EXPECT_TRUE(ProcessGone(sleeper));  // the whole group
  EXPECT_LT(SecondsSince(start), 2.0);
  const CommandRunner::Done done = WaitAll(1);
  ASSERT_EQ(done.size(), 1u);
  const CommandResult& r = done[0].second;
  EXPECT_EQ(r.outcome, Outcome::kSignaled);
  EXPECT_NE(r.error.find("local deadline"), std::string::npos) << r.error;
}

// A deadline moved on in time ends nothing; past one, what waits for a
// slot does not start, and starts once a later deadline comes.
TEST_F(LocalDeadlineTest, AMovedDeadlineEndsNothingAndNothingStartsPastOne) {
  runner_.set_max_running(1);
  runner_.set_local_deadline(MonoMs() + 400);
  ASSERT_TRUE(runner_.Start(Spec("sleep 0.9; echo ok", 1), 1).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  runner_.set_local_deadline(MonoMs() + 5000);
  CommandRunner::Done done = WaitAll(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].second.outcome, Outcome::kExited);
  EXPECT_EQ(done[0].second.stdout_text, "ok\n");

  // The first holds the one slot past the deadline; the second waits.
  runner_.set_local_deadline(MonoMs() + 300);
  const std::string second = dir_.Join("second.ran");
  ASSERT_TRUE(runner_.Start(Spec("sleep 60", 2), 2).ok());
  ASSERT_TRUE(runner_.Start(Spec("touch " + second, 3), 3).ok());
  done = WaitAll(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].first, 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CommandRunner::Done none;
  ASSERT_TRUE(runner_.Wait(0, &none).ok());
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE((access(second.c_str(), F_OK) == 0));
  runner_.set_local_deadline(MonoMs() + 5000);
  done = WaitAll(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].first, 3u);
  EXPECT_TRUE((access(second.c_str(), F_OK) == 0));

  // The slots of the attempts ended at the deadline are used again: a new
  // attempt in one is ended at the next deadline too.
  for (int task = 4; task <= 5; task++) {
    runner_.set_local_deadline(MonoMs() + 300);
    ASSERT_TRUE(runner_.Start(Spec("sleep 60", task), task).ok());
    done = WaitAll(1);
    ASSERT_EQ(done.size(), 1u) << "task " << task << " was not ended";
    EXPECT_EQ(done[0].second.outcome, Outcome::kSignaled);
    EXPECT_NE(done[0].second.error.find("local deadline"), std::string::npos)
        << done[0].second.error;
  }
}

}  // namespace
}  // namespace wizq
