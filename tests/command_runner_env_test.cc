// CommandRunner and ReapOrphans reach every file of a task through their
// Env: a fault-injecting Env can fail any of them, and a failed Start leaves
// nothing started and nothing held.
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fs/fault_env.h"
#include "gtest/gtest.h"
#include "tasks/command_runner.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

bool Exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

bool LockIsFree(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return !Exists(path);
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

class CommandRunnerEnvTest : public testing::Test {
 protected:
  // A command of task `id` that leaves a marker when it runs.
  CommandSpec Spec(int id) {
    CommandSpec spec;
    spec.script = "touch " + Marker(id) + "; echo '[]'";
    spec.cwd = dir_.path();
    spec.output_dir = TaskDir(id);
    spec.kill_grace_seconds = 0.2;
    return spec;
  }
  std::string TaskDir(int id) const {
    return dir_.Join(".wizard/tasks/" + std::to_string(id));
  }
  std::string Marker(int id) const {
    return dir_.Join("ran-" + std::to_string(id));
  }

  // Waits (bounded) for the one running command.
  CommandResult WaitOne(CommandRunner* runner) {
    CommandRunner::Done done;
    const auto start = std::chrono::steady_clock::now();
    while (done.empty() && std::chrono::steady_clock::now() - start <
                               std::chrono::seconds(10)) {
      EXPECT_TRUE(runner->Wait(1000, &done).ok());
    }
    EXPECT_EQ(1u, done.size());
    return done.empty() ? CommandResult() : done[0].second;
  }

  test::ScratchDir dir_;
  FaultInjectionEnv env_{Env::Posix()};
};

TEST_F(CommandRunnerEnvTest, RunsThroughTheEnv) {
  CommandRunner runner(&env_);
  ASSERT_TRUE(runner.Start(Spec(1), 1).ok());
  const CommandResult r = WaitOne(&runner);
  EXPECT_EQ(0, r.exit_code) << r.error;
  EXPECT_EQ("[]\n", r.stdout_text);
  // The directory, running.lock, stdin, stdout and stderr: counted ops.
  EXPECT_GE(env_.op_count(), 5);
}

// Fails each child-descriptor open of Start in turn (running.lock, stdin,
// stdout, stderr, the pgid record): Start reports it, starts nothing, holds
// nothing, and the runner works again once the fault is gone.
TEST_F(CommandRunnerEnvTest, FailedDescriptorOpenStartsNothing) {
  CommandRunner runner(&env_);
  for (int nth = 1; nth <= 5; ++nth) {
    SCOPED_TRACE("failing OpenDescriptor " + std::to_string(nth));
    env_.ResetState();
    env_.FailOp(FaultInjectionEnv::kOpenDescriptor, nth, EMFILE, false);
    Status s = runner.Start(Spec(nth), static_cast<uint64_t>(nth));
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_NE(std::string::npos, s.message().find(TaskDir(nth)))
        << s.ToString();
    EXPECT_EQ(0u, runner.running());
    CommandRunner::Done done;
    EXPECT_TRUE(runner.Wait(0, &done).ok());
    EXPECT_TRUE(done.empty());
    EXPECT_TRUE(LockIsFree(TaskDir(nth) + "/running.lock"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int nth = 1; nth <= 5; ++nth) EXPECT_FALSE(Exists(Marker(nth)));

  env_.ClearFaults();
  ASSERT_TRUE(runner.Start(Spec(1), 1).ok());
  EXPECT_EQ(0, WaitOne(&runner).exit_code);
  EXPECT_TRUE(Exists(Marker(1)));
}

// Every mutating operation of Start, failed in turn: an error and nothing
// started (the pgid record is opened before the spawn; the supervisor
// writes it).
TEST_F(CommandRunnerEnvTest, FailureAtEveryOpOfStartStartsNothing) {
  int64_t ops = 0;
  {
    CommandRunner runner(&env_);
    ASSERT_TRUE(runner.Start(Spec(100), 100).ok());
    ops = env_.op_count();
    WaitOne(&runner);
  }
  ASSERT_GE(ops, 7);
  CommandRunner runner(&env_);
  std::vector<int> failed;
  for (int64_t k = 1; k <= ops; ++k) {
    SCOPED_TRACE("failing op " + std::to_string(k));
    const int id = static_cast<int>(k);
    env_.ResetState();
    env_.FailOp(FaultInjectionEnv::kAny, k, EIO, false);
    if (runner.Start(Spec(id), static_cast<uint64_t>(id)).ok()) {
      ADD_FAILURE() << "op " << k << " failed and Start still succeeded";
      WaitOne(&runner);
      continue;
    }
    failed.push_back(id);
    EXPECT_EQ(0u, runner.running());
    EXPECT_TRUE(LockIsFree(TaskDir(id) + "/running.lock"));
  }
  EXPECT_EQ(static_cast<size_t>(ops), failed.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int id : failed) EXPECT_FALSE(Exists(Marker(id))) << id;
}

TEST_F(CommandRunnerEnvTest, ReapOrphansOpensTheLockThroughTheEnv) {
  {
    CommandRunner runner(&env_);
    ASSERT_TRUE(runner.Start(Spec(1), 1).ok());
    WaitOne(&runner);
  }
  env_.ResetState();
  EXPECT_TRUE(ReapOrphans(TaskDir(1), 0.1, 1.0, &env_).ok());
  EXPECT_EQ(1, env_.op_count());  // the open of running.lock
  env_.FailOp(FaultInjectionEnv::kOpenDescriptor, 1, EACCES, false);
  Status s = ReapOrphans(TaskDir(1), 0.1, 1.0, &env_);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  // Never ran there: nothing to open, nothing to do.
  EXPECT_TRUE(ReapOrphans(TaskDir(2), 0.1, 1.0, &env_).ok());
}

}  // namespace
}  // namespace wizq
