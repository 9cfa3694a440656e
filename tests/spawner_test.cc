// The spawner (tasks/proc/spawner.h) as CommandRunner uses it: commands that
// wait in it beyond the limit, cancelling them, its death, what it holds,
// and what it does once the wizq that started it is gone.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tasks/proc/command_runner.h"
#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using Clock = std::chrono::steady_clock;

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string Comm(pid_t pid) {
  std::string comm = test::ReadAll("/proc/" + std::to_string(pid) + "/comm");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

pid_t ParentOf(pid_t pid) {
  const std::string stat =
      test::ReadAll("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  return static_cast<pid_t>(atol(stat.c_str() + paren + 4));  // ") S ppid"
}

// The spawners whose parent is `parent` (0: any).
std::vector<pid_t> Spawners(pid_t parent) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  while (dirent* e = proc ? readdir(proc) : nullptr) {
    const pid_t pid = static_cast<pid_t>(atol(e->d_name));
    if (pid <= 1 || Comm(pid) != "wizq-spawner") continue;
    if (parent == 0 || ParentOf(pid) == parent) pids.push_back(pid);
  }
  if (proc) closedir(proc);
  return pids;
}

// Where each descriptor of `pid` leads.
std::vector<std::string> Descriptors(pid_t pid) {
  std::vector<std::string> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  while (dirent* e = d ? readdir(d) : nullptr) {
    if (e->d_name[0] == '.') continue;
    char target[4096];
    const ssize_t n =
        readlink((dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
    if (n > 0) out.emplace_back(target, static_cast<size_t>(n));
  }
  if (d) closedir(d);
  return out;
}

class SpawnerTest : public testing::Test {
 protected:
  CommandSpec Spec(const std::string& script, int task = 1) {
    CommandSpec spec;
    spec.script = script;
    spec.cwd = dir_.path();
    spec.output_dir = dir_.Join(".wizard/tasks/" + std::to_string(task));
    return spec;
  }
  // Waits for every started command; results by token.
  std::map<uint64_t, CommandResult> WaitAll(CommandRunner* runner) {
    std::map<uint64_t, CommandResult> results;
    const auto start = Clock::now();
    while (runner->running() > 0 && SecondsSince(start) < 20) {
      CommandRunner::Done done;
      EXPECT_TRUE(runner->Wait(100, &done).ok());
      for (auto& [token, r] : done) results[token] = std::move(r);
    }
    return results;
  }
  std::string Journal() {
    return test::ReadAll(dir_.Join(".wizard/tasks/attempts.journal"));
  }

  test::ScratchDir dir_;
};

TEST_F(SpawnerTest, CommandsBeyondTheLimitWaitAndStartInOrder) {
  CommandRunner runner;
  runner.set_max_running(1);
  for (int i = 1; i <= 4; i++) {
    const std::string n = std::to_string(i);
    ASSERT_TRUE(runner
                    .Start(Spec("echo start " + n +
                                    " >> log; sleep 0.05; "
                                    "echo end " +
                                    n + " >> log",
                                i),
                           static_cast<uint64_t>(i))
                    .ok());
  }
  const auto results = WaitAll(&runner);
  ASSERT_EQ(results.size(), 4u);
  for (const auto& [token, r] : results) EXPECT_EQ(r.exit_code, 0) << token;
  // One at a time, in the order they were started.
  EXPECT_EQ(test::ReadAll(dir_.Join("log")),
            "start 1\nend 1\nstart 2\nend 2\nstart 3\nend 3\nstart 4\nend 4\n");
}

TEST_F(SpawnerTest, ATimeoutRunsFromTheRealStartNotFromTheQueue) {
  CommandRunner runner;
  runner.set_max_running(1);
  ASSERT_TRUE(runner.Start(Spec("sleep 1.5", 1), 1).ok());
  CommandSpec waits = Spec("sleep 0.1; echo '[]'", 2);
  waits.timeout_seconds = 1.0;  // shorter than the wait in the queue
  ASSERT_TRUE(runner.Start(waits, 2).ok());
  const auto results = WaitAll(&runner);
  ASSERT_EQ(results.count(2), 1u);
  EXPECT_EQ(results.at(2).outcome, CommandResult::Outcome::kExited)
      << results.at(2).error;
  EXPECT_LT(results.at(2).seconds, 1.0);  // its own run, not the wait
}

TEST_F(SpawnerTest, ACancelledWaitingCommandNeverStarts) {
  CommandRunner runner;
  runner.set_max_running(1);
  ASSERT_TRUE(runner.Start(Spec("sleep 0.3", 1), 1).ok());
  ASSERT_TRUE(runner.Start(Spec("touch ran", 2), 2).ok());
  runner.CancelWaiting();
  const auto results = WaitAll(&runner);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results.at(1).exit_code, 0);
  EXPECT_TRUE(results.at(2).cancelled) << results.at(2).error;
  EXPECT_FALSE(Exists(dir_.Join("ran")));
  EXPECT_EQ(Journal().find("start 2 "), std::string::npos) << Journal();
}

TEST_F(SpawnerTest, ADeadSpawnerFailsItsAttemptsEndsTheirTreesAndIsReplaced) {
  CommandRunner runner;
  runner.set_max_running(1);
  ASSERT_TRUE(
      runner.Start(Spec("echo $$ > leader.pid; sleep 30; echo late"), 1).ok());
  ASSERT_TRUE(runner.Start(Spec("touch waited", 3), 3).ok());  // queued
  ASSERT_TRUE(test::WaitFor([&] { return Exists(dir_.Join("leader.pid")); },
                            std::chrono::seconds(5)));
  const pid_t leader = atoi(test::ReadAll(dir_.Join("leader.pid")).c_str());
  const std::vector<pid_t> spawners = Spawners(getpid());
  ASSERT_EQ(spawners.size(), 1u);
  ASSERT_EQ(kill(spawners[0], SIGKILL), 0);
  const auto results = WaitAll(&runner);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_NE(results.at(1).error.find("wizq-spawner"), std::string::npos)
      << results.at(1).error;
  EXPECT_NE(results.at(1).outcome, CommandResult::Outcome::kExited);
  // The one that waited never began: given back, not failed.
  EXPECT_TRUE(results.at(3).cancelled) << results.at(3).error;
  EXPECT_FALSE(Exists(dir_.Join("waited")));
  // Nothing of it runs on: it would overlap with the task's next attempt.
  EXPECT_TRUE(test::WaitFor([&] { return test::ProcessGone(leader); },
                            std::chrono::seconds(5)));
  // The next command gets a new spawner.
  ASSERT_TRUE(runner.Start(Spec("echo again", 2), 2).ok());
  const auto again = WaitAll(&runner);
  ASSERT_EQ(again.count(2), 1u);
  EXPECT_EQ(again.at(2).stdout_text, "again\n");
}

TEST_F(SpawnerTest, ASpawnerThatDiedWhileIdleIsReplacedByTheNextStart) {
  CommandRunner runner;
  ASSERT_TRUE(runner.Start(Spec("echo one", 1), 1).ok());
  EXPECT_EQ(WaitAll(&runner).size(), 1u);
  const std::vector<pid_t> spawners = Spawners(getpid());
  ASSERT_EQ(spawners.size(), 1u);
  ASSERT_EQ(kill(spawners[0], SIGKILL), 0);
  ASSERT_TRUE(test::WaitFor([&] { return kill(spawners[0], 0) != 0; },
                            std::chrono::seconds(5)));
  // Nothing waited for it: Start is the first to find it gone.
  ASSERT_TRUE(runner.Start(Spec("echo two", 2), 2).ok());
  const auto results = WaitAll(&runner);
  ASSERT_EQ(results.count(2), 1u);
  EXPECT_EQ(results.at(2).stdout_text, "two\n");
}

TEST_F(SpawnerTest, ACommandGetsWizqsDescriptorLimitNotTheSpawners) {
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max <= 512) {
    GTEST_SKIP() << "hard limit too low to lower the soft one";
  }
  // The spawner raises its own soft limit to the hard one; the task must
  // get wizq's (512 here).
  rlimit low = saved;
  low.rlim_cur = 512;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::map<uint64_t, CommandResult> results;
  {
    CommandRunner runner;
    EXPECT_TRUE(runner.Start(Spec("ulimit -n", 1), 1).ok());
    results = WaitAll(&runner);
  }
  setrlimit(RLIMIT_NOFILE, &saved);
  ASSERT_EQ(results.count(1), 1u);
  EXPECT_EQ(results.at(1).stdout_text, "512\n");
}

TEST_F(SpawnerTest, TheSpawnerHoldsNoneOfWizqsFilesNorARunningAttemptsLock) {
  // Without O_CLOEXEC, as a careless embedding program might have it.
  const std::string mine = dir_.Join("wizq-own-file");
  const int fd = open(mine.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  CommandRunner runner;
  // It runs until told to end: the check below must see it running.
  ASSERT_TRUE(runner
                  .Start(Spec("echo go > started; "
                              "while [ ! -e end ]; do sleep 0.05; done"),
                         1)
                  .ok());
  ASSERT_TRUE(test::WaitFor([&] { return Exists(dir_.Join("started")); },
                            std::chrono::seconds(5)));
  const std::vector<pid_t> spawners = Spawners(getpid());
  ASSERT_EQ(spawners.size(), 1u);
  // The spawner holds at least its socket to wizq: an empty list means
  // /proc/<pid>/fd was unreadable and the loop below would check nothing.
  // The spawner holds the attempt's files from the vfork until the shell's
  // exec lets it run on, a moment in which the shell may already have
  // written `started`: the check is that it lets go, within a few seconds.
  std::vector<std::string> targets;
  const auto holds = [&] {
    targets = Descriptors(spawners[0]);
    for (const std::string& target : targets) {
      if (target.find("wizq-own-file") != std::string::npos ||
          target.find("1.1.stdout") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  const bool let_go =
      test::WaitFor([&] { return !holds(); }, std::chrono::seconds(3));
  ASSERT_FALSE(targets.empty()) << "/proc/" << spawners[0] << "/fd unreadable";
  EXPECT_TRUE(let_go) << "still held: " << testing::PrintToString(targets);
  test::WriteAll(dir_.Join("end"), "");
  close(fd);
  EXPECT_EQ(WaitAll(&runner).size(), 1u);
}

// A runner in a child process that starts `specs` (the first may run, the
// rest wait: limit 1) and, once the first has written `started` (by then
// the spawner has the others queued), dies without cleaning up.
void StartAndDie(const std::vector<CommandSpec>& specs,
                 const std::string& started) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto* runner = new CommandRunner;  // leaked: no destructor runs
    runner->set_max_running(1);
    bool ok = true;
    for (size_t i = 0; i < specs.size(); i++) {
      ok = ok && runner->Start(specs[i], i + 1).ok();
    }
    for (int i = 0; i < 500 && access(started.c_str(), F_OK) != 0; i++) {
      usleep(10'000);
    }
    usleep(100'000);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_F(SpawnerTest,
       WhenWizqIsGoneTheRunningAttemptIsRecordedSyncedAndTheRestNeverStarts) {
  test::BecomeSubreaper();  // the orphaned spawner comes to us
  StartAndDie(
      {Spec("touch started; sleep 0.3; echo '[]'", 1), Spec("touch ran", 2)},
      dir_.Join("started"));
  // The running one finishes on its own; its end line says it was synced.
  ASSERT_TRUE(test::WaitFor(
      [&] { return Journal().find("end 1 1 ") != std::string::npos; },
      std::chrono::seconds(5)))
      << Journal();
  const std::string journal = Journal();
  const size_t end = journal.find("end 1 1 ");
  EXPECT_NE(journal.find(" exit 0 1\n", end), std::string::npos) << journal;
  EXPECT_EQ(test::ReadAll(dir_.Join(".wizard/tasks/1.1.stdout")), "[]\n");
  // The one that waited never began, and the spawner exits.
  EXPECT_FALSE(Exists(dir_.Join("ran")));
  EXPECT_EQ(journal.find("start 2 "), std::string::npos) << journal;
  EXPECT_TRUE(test::WaitFor([] { return Spawners(getpid()).empty(); },
                            std::chrono::seconds(5)));
  test::ReapStrays();
}

}  // namespace
}  // namespace wizq
