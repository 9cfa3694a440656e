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
#include "tasks/proc/command_runner.h"
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
    return dir_.Join(run_ + ".wizard/tasks/" + std::to_string(id));
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
  std::string run_;  // the run directory under dir_ ("" = dir_ itself)
  FaultInjectionEnv env_{Env::Posix()};
};

TEST_F(CommandRunnerEnvTest, RunsThroughTheEnv) {
  CommandRunner runner(&env_);
  ASSERT_TRUE(runner.Start(Spec(1), 1).ok());
  const CommandResult r = WaitOne(&runner);
  EXPECT_EQ(0, r.exit_code) << r.error;
  EXPECT_EQ("[]\n", r.stdout_text);
  // The tasks directory, the journal (created, its directory synced), the
  // previous layout's lock (missing), stdout and stderr: counted ops.
  EXPECT_GE(env_.op_count(), 6);
}

// Fails each descriptor open of Start in turn (the journal, the previous
// layout's lock, stdout, stderr): Start reports it, starts nothing, holds
// nothing, and a runner works again once the fault is gone.
TEST_F(CommandRunnerEnvTest, FailedDescriptorOpenStartsNothing) {
  for (int nth = 1; nth <= 4; ++nth) {
    SCOPED_TRACE("failing OpenDescriptor " + std::to_string(nth));
    CommandRunner runner(&env_);  // a new one: the journal is not open yet
    env_.ResetState();
    env_.FailOp(FaultInjectionEnv::kOpenDescriptor, nth, EMFILE, false);
    Status s = runner.Start(Spec(nth), static_cast<uint64_t>(nth));
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_NE(std::string::npos, s.message().find(dir_.Join(".wizard/tasks/")))
        << s.ToString();
    EXPECT_EQ(0u, runner.running());
    CommandRunner::Done done;
    EXPECT_TRUE(runner.Wait(0, &done).ok());
    EXPECT_TRUE(done.empty());
    EXPECT_TRUE(LockIsFree(TaskDir(nth) + ".1.stdout"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int nth = 1; nth <= 4; ++nth) EXPECT_FALSE(Exists(Marker(nth)));

  env_.ClearFaults();
  CommandRunner runner(&env_);
  ASSERT_TRUE(runner.Start(Spec(1), 1).ok());
  EXPECT_EQ(0, WaitOne(&runner).exit_code);
  EXPECT_TRUE(Exists(Marker(1)));
}

// Every mutating operation of Start of a run's first task, failed in turn:
// an error and nothing started (the journal is opened before the spawn;
// the shell and the spawner write to it).
TEST_F(CommandRunnerEnvTest, FailureAtEveryOpOfStartStartsNothing) {
  int64_t ops = 0;
  {
    CommandRunner runner(&env_);
    ASSERT_TRUE(runner.Start(Spec(100), 100).ok());
    ops = env_.op_count();
    WaitOne(&runner);
  }
  ASSERT_GE(ops, 6);
  std::vector<int> failed;
  for (int64_t k = 1; k <= ops; ++k) {
    SCOPED_TRACE("failing op " + std::to_string(k));
    const int id = static_cast<int>(k);
    CommandRunner runner(&env_);
    run_ = "run" + std::to_string(k) + "/";  // a new run directory
    env_.ResetState();
    env_.FailOp(FaultInjectionEnv::kAny, k, EIO, false);
    if (runner.Start(Spec(id), static_cast<uint64_t>(id)).ok()) {
      ADD_FAILURE() << "op " << k << " failed and Start still succeeded";
      WaitOne(&runner);
      continue;
    }
    failed.push_back(id);
    EXPECT_EQ(0u, runner.running());
    EXPECT_TRUE(LockIsFree(TaskDir(id) + ".1.stdout"));
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
  // The opens of the previous layout's running.lock (missing), of attempt
  // 1's stdout and of attempt 2's (missing).
  EXPECT_EQ(3, env_.op_count());
  env_.FailOp(FaultInjectionEnv::kOpenDescriptor, 1, EACCES, false);
  Status s = ReapOrphans(TaskDir(1), 0.1, 1.0, &env_);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  // Never ran there: nothing to open, nothing to do.
  EXPECT_TRUE(ReapOrphans(TaskDir(2), 0.1, 1.0, &env_).ok());
}

}  // namespace
}  // namespace wizq
