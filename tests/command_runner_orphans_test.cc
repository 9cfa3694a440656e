// Tests of CommandRunner (tasks/proc/command_runner.h) after a runner died
// while its command ran: ReapOrphans ends the tree it left (found by its
// lock or by the leader the journal recorded), and a new Start ends an
// earlier attempt still running. The fixture is in command_runner_fixture.h.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tasks/proc/command_runner.h"
#include "tests/command_runner_fixture.h"
#include "tests/test_util.h"

namespace wizq::command_runner_test {
namespace {

// Simulates a wizq that dies while its task runs: a forked process starts
// the command and exits without waiting for it.
void StartAndDie(const CommandSpec& spec) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto* runner = new CommandRunner;  // leaked: no destructor runs
    _exit(runner->Start(spec, 1).ok() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_F(CommandRunnerTest, ReapOrphansEndsTreeOfDeadRunner) {
  CommandSpec spec =
      Spec("sleep 100 & echo $! > bg.pid; echo $$ > leader.pid; wait");
  StartAndDie(spec);
  const pid_t leader = ReadPidFile(dir_.Join("leader.pid"));
  const pid_t bg = ReadPidFile(dir_.Join("bg.pid"));
  ASSERT_GT(leader, 0);
  ASSERT_GT(bg, 0);
  EXPECT_FALSE(ProcessGone(leader));
  EXPECT_FALSE(LockIsFree(Out("1.stdout")));

  const auto start = Clock::now();
  Status s = ReapOrphans(spec.output_dir, 1, 5);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_LT(SecondsSince(start), 0.9);  // SIGTERM was enough
  EXPECT_TRUE(ProcessGone(leader));
  EXPECT_TRUE(ProcessGone(bg));
  EXPECT_TRUE(LockIsFree(Out("1.stdout")));
}

TEST_F(CommandRunnerTest, ReapOrphansFindsLockHoldersThatLeftTheGroup) {
  // The leader is gone; the survivor moved to its own session but kept the
  // lock descriptor.
  CommandSpec spec = Spec("setsid sleep 100 & echo $! > bg.pid");
  StartAndDie(spec);
  const pid_t bg = ReadPidFile(dir_.Join("bg.pid"));
  ASSERT_GT(bg, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(ProcessGone(bg));
  Status s = ReapOrphans(spec.output_dir, 1, 5);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(ProcessGone(bg));
}

TEST_F(CommandRunnerTest, LeaderIsRecorded) {
  // "start <key> <attempt> <pid> <start time> <boot id> <wall ms>", the pid
  // being the shell's (it leads its process group), then the end line.
  CommandResult r = Run(Spec("echo $$; exit 3"));
  const std::string pid = r.stdout_text.substr(0, r.stdout_text.size() - 1);
  const std::string record = test::ReadAll(Journal());
  EXPECT_EQ(record.rfind("start 1 1 " + pid + " ", 0), 0u) << record;
  std::string boot = test::ReadAll("/proc/sys/kernel/random/boot_id");
  boot.pop_back();
  EXPECT_NE(record.find(" " + boot + " "), std::string::npos) << record;
  EXPECT_NE(record.find("\nend 1 1 " + pid + " exit 3 0\n"), std::string::npos)
      << record;
  EXPECT_EQ(r.exit_code, 3);
}

TEST_F(CommandRunnerTest, ReapOrphansEndsRecordedLeaderWithoutTheLock) {
  // The shell closes its copies of the lock descriptor (its stdout), so
  // nothing holds the lock; the journal still leads to the group.
  CommandSpec spec = Spec(
      "for f in /proc/$$/fd/*; do"
      "  case $(readlink $f) in *1.1.stdout) eval \"exec ${f##*/}>&-\";; "
      "esac; done; echo $$ > leader.pid; sleep 100");
  StartAndDie(spec);
  const pid_t leader = ReadPidFile(dir_.Join("leader.pid"));
  ASSERT_GT(leader, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(LockIsFree(Out("1.stdout")));
  EXPECT_FALSE(ProcessGone(leader));
  Status s = ReapOrphans(spec.output_dir, 1, 5);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(WaitGone(leader, 1));
  EXPECT_TRUE(LockIsFree(Out("1.stdout")));
}

TEST_F(CommandRunnerTest, ReapOrphansEscalatesToSigkill) {
  CommandSpec spec = Spec("trap '' TERM; echo $$ > leader.pid; sleep 100");
  StartAndDie(spec);
  const pid_t leader = ReadPidFile(dir_.Join("leader.pid"));
  ASSERT_GT(leader, 0);
  const auto start = Clock::now();
  Status s = ReapOrphans(spec.output_dir, 0.2, 5);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(SecondsSince(start), 0.19);
  EXPECT_TRUE(ProcessGone(leader));
}

TEST_F(CommandRunnerTest, ReapOrphansGivesUpAfterMaxWait) {
  // The lock is held by something ReapOrphans never signals (this very
  // process), so it must give up with an error instead of waiting forever.
  CommandSpec spec = Spec("true");
  ASSERT_EQ(Run(spec).exit_code, 0);
  const int fd = open(Out("1.stdout").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);  // this very process holds it
  const auto start = Clock::now();
  Status s = ReapOrphans(spec.output_dir, 0.05, 0.2);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find(spec.output_dir), std::string::npos);
  EXPECT_LT(SecondsSince(start), 1.0);
  close(fd);
}

TEST_F(CommandRunnerTest, ReapOrphansWithoutEarlierRunIsQuick) {
  const auto start = Clock::now();
  EXPECT_TRUE(ReapOrphans(dir_.Join("never/ran"), 1, 5).ok());
  CommandSpec spec = Spec("true");
  ASSERT_EQ(Run(spec).exit_code, 0);
  EXPECT_TRUE(ReapOrphans(spec.output_dir, 1, 5).ok());
  EXPECT_LT(SecondsSince(start), 0.5);
}

TEST_F(CommandRunnerTest, ReapOrphansIgnoresReusedPid) {
  // A live process (in its own group) whose pid is in the pgid file but
  // whose start time does not match: the pid was reused; leave it alone.
  const pid_t other = fork();
  ASSERT_GE(other, 0);
  if (other == 0) {
    setpgid(0, 0);
    execl("/bin/sleep", "sleep", "100", static_cast<char*>(nullptr));
    _exit(127);
  }
  CommandSpec spec = Spec("true");
  ASSERT_EQ(Run(spec).exit_code, 0);
  std::string boot = test::ReadAll("/proc/sys/kernel/random/boot_id");
  boot.pop_back();
  std::ofstream(Journal(), std::ios::app)
      << "start 1 2 " << other << " 1 " << boot << " 0\n";
  EXPECT_TRUE(ReapOrphans(spec.output_dir, 0.05, 1).ok());
  EXPECT_FALSE(ProcessGone(other));
  kill(other, SIGKILL);
  waitpid(other, nullptr, 0);
}

TEST_F(CommandRunnerTest, StartEndsEarlierAttemptStillRunning) {
  CommandSpec spec = Spec("echo $$ > leader.pid; sleep 100");
  spec.kill_grace_seconds = 0.5;
  StartAndDie(spec);
  const pid_t leader = ReadPidFile(dir_.Join("leader.pid"));
  ASSERT_GT(leader, 0);
  spec.attempt = 2;
  spec.script = "echo again";
  CommandResult r = Run(spec);
  EXPECT_EQ(r.stdout_text, "again\n");
  EXPECT_TRUE(ProcessGone(leader));
}

}  // namespace
}  // namespace wizq::command_runner_test
