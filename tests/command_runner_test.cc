// Tests of CommandRunner (tasks/proc/command_runner.h): a command's exit,
// signal, input, environment and per-attempt files, timeouts that end its
// whole tree, concurrency, and errors; then AttemptFiles and the
// CommandExecutor. The orphans of a dead runner are in
// command_runner_orphans_test.cc, the fixture in command_runner_fixture.h.
#include "tasks/proc/command_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tasks/exec/attempt_files.h"
#include "tasks/exec/command_executor.h"
#include "tests/command_runner_fixture.h"
#include "tests/test_util.h"

namespace wizq::command_runner_test {
namespace {

TEST_F(CommandRunnerTest, ExitZeroCapturesStdout) {
  CommandResult r = Run(Spec("echo '[]'"));
  EXPECT_EQ(r.outcome, Outcome::kExited);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.stdout_text, "[]\n");
  EXPECT_FALSE(r.stdout_truncated);
  EXPECT_EQ(r.error, "");
  EXPECT_GE(r.seconds, 0);
  EXPECT_EQ(runner_.running(), 0u);
}

TEST_F(CommandRunnerTest, NonZeroExitCodeIsReported) {
  CommandResult r = Run(Spec("echo partial; exit 3"));
  EXPECT_EQ(r.outcome, Outcome::kExited);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.error, "exit code 3");
  EXPECT_EQ(r.stdout_text, "partial\n");
}

TEST_F(CommandRunnerTest, SignalDeathIsReported) {
  CommandResult r = Run(Spec("kill -9 $$"));
  EXPECT_EQ(r.outcome, Outcome::kSignaled);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_NE(r.error.find("killed by signal 9"), std::string::npos) << r.error;
}

TEST_F(CommandRunnerTest, StdinContentReachesCommand) {
  CommandSpec spec = Spec("cat");
  spec.stdin_data = R"({"kind":"A","value":{"file":"x y"}})";
  CommandResult r = Run(spec);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_text, spec.stdin_data);
}

TEST_F(CommandRunnerTest, StdinLargerThanAPipeReachesCommand) {
  CommandSpec spec = Spec("cat");
  spec.stdin_data = std::string(1 << 20, 'x');
  CommandResult r = Run(spec);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_text, spec.stdin_data);
}

// The lean layout (tasks/exec/attempt_files.h): an attempt creates its stdout
// and stderr files and nothing else; the run's journal is made once.
TEST_F(CommandRunnerTest, AnAttemptCreatesTwoFiles) {
  auto names = [&] {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_.Join(".wizard/tasks"))) {
      out.insert(e.path().filename().string());
    }
    return out;
  };
  CommandSpec spec = Spec("cat >/dev/null; echo []");
  spec.stdin_data = "[1]";
  ASSERT_EQ(Run(spec).exit_code, 0);
  EXPECT_EQ(names(), (std::set<std::string>{"1.1.stdout", "1.1.stderr",
                                            "attempts.journal"}));
  spec.attempt = 2;
  ASSERT_EQ(Run(spec).exit_code, 0);
  EXPECT_EQ(names().size(), 5u);
}

TEST_F(CommandRunnerTest, EnvOverridesAndInheritedVarsAreSeen) {
  setenv("WIZQ_TEST_INHERITED", "inherited", 1);
  setenv("WIZQ_TEST_OVERRIDDEN", "old", 1);
  CommandSpec spec = Spec(
      "echo \"$WIZQ_TASK_ID $WIZQ_TEST_OVERRIDDEN $WIZQ_TEST_INHERITED\"; "
      "env | grep -c '^WIZQ_TEST_OVERRIDDEN='");
  spec.env = {{"WIZQ_TASK_ID", "42"},
              {"WIZQ_TEST_OVERRIDDEN", "first"},
              {"WIZQ_TEST_OVERRIDDEN", "new"}};
  CommandResult r = Run(spec);
  EXPECT_EQ(r.stdout_text, "42 new inherited\n1\n");
  unsetenv("WIZQ_TEST_INHERITED");
  unsetenv("WIZQ_TEST_OVERRIDDEN");
}

TEST_F(CommandRunnerTest, CwdIsHonoured) {
  const std::string sub = dir_.Join("work dir");
  ASSERT_EQ(mkdir(sub.c_str(), 0700), 0);
  CommandSpec spec = Spec("pwd -P");
  spec.cwd = sub;
  char* real = realpath(sub.c_str(), nullptr);
  ASSERT_NE(real, nullptr);
  EXPECT_EQ(Run(spec).stdout_text, std::string(real) + "\n");
  free(real);
}

TEST_F(CommandRunnerTest, OutputFilesArePerAttempt) {
  CommandSpec spec = Spec("echo out$WIZQ_ATTEMPT; echo err$WIZQ_ATTEMPT >&2");
  for (int attempt : {1, 2}) {
    spec.attempt = attempt;
    spec.env = {{"WIZQ_ATTEMPT", std::to_string(attempt)}};
    spec.stdin_data = "in" + std::to_string(attempt);
    EXPECT_EQ(Run(spec).exit_code, 0);
  }
  for (int attempt : {1, 2}) {
    const std::string n = std::to_string(attempt);
    EXPECT_EQ(test::ReadAll(Out(n + ".stdout")), "out" + n + "\n");
    EXPECT_EQ(test::ReadAll(Out(n + ".stderr")), "err" + n + "\n");
    struct stat st;
    ASSERT_EQ(stat(Out(n + ".stdout").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  struct stat st;  // the tasks directory, created for the first attempt
  ASSERT_EQ(stat(dir_.Join(".wizard/tasks").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(CommandRunnerTest, TimeoutKillsWholeTree) {
  CommandSpec spec = Spec("sleep 100 & echo $! > bg.pid; sleep 100");
  spec.timeout_seconds = 0.3;
  spec.kill_grace_seconds = 1;
  const auto start = Clock::now();
  CommandResult r = Run(spec);
  EXPECT_LT(SecondsSince(start), 1.0);  // SIGTERM was enough
  EXPECT_EQ(r.outcome, Outcome::kTimedOut);
  EXPECT_EQ(r.error, "timed out after 0.3s");
  EXPECT_GE(r.seconds, 0.3);
  const pid_t bg = ReadPidFile(dir_.Join("bg.pid"));
  ASSERT_GT(bg, 0);
  EXPECT_TRUE(WaitGone(bg, 2));
}

TEST_F(CommandRunnerTest, TimeoutEscalatesToSigkill) {
  CommandSpec spec = Spec("trap '' TERM; sleep 100 & echo $! > bg.pid; wait");
  spec.timeout_seconds = 0.2;
  spec.kill_grace_seconds = 0.3;
  const auto start = Clock::now();
  CommandResult r = Run(spec);
  EXPECT_GE(SecondsSince(start), 0.5);
  EXPECT_LT(SecondsSince(start), 3.0);
  EXPECT_EQ(r.outcome, Outcome::kTimedOut);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_TRUE(WaitGone(ReadPidFile(dir_.Join("bg.pid")), 2));
}

TEST_F(CommandRunnerTest, LeftoverBackgroundProcessIsKilledAfterExit) {
  CommandResult r = Run(Spec("sleep 100 & echo $! > bg.pid; echo done"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_text, "done\n");
  const pid_t bg = ReadPidFile(dir_.Join("bg.pid"));
  ASSERT_GT(bg, 0);
  EXPECT_TRUE(WaitGone(bg, 2));
}

TEST_F(CommandRunnerTest, LargeStdoutIsTruncated) {
  CommandSpec spec = Spec("head -c 5000 /dev/zero | tr '\\0' x");
  spec.max_stdout_bytes = 1000;
  CommandResult r = Run(spec);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_EQ(r.stdout_text, std::string(1000, 'x'));

  spec.max_stdout_bytes = 5000;
  r = Run(spec);
  EXPECT_FALSE(r.stdout_truncated);
  EXPECT_EQ(r.stdout_text.size(), 5000u);
}

TEST_F(CommandRunnerTest, SeveralCommandsRunConcurrently) {
  const auto start = Clock::now();
  for (uint64_t token = 1; token <= 5; ++token) {
    CommandSpec spec = Spec("sleep 0.3; echo " + std::to_string(token));
    spec.output_dir = dir_.Join(".wizard/tasks/" + std::to_string(token));
    ASSERT_TRUE(runner_.Start(spec, token).ok());
  }
  EXPECT_EQ(runner_.running(), 5u);
  CommandRunner::Done done;
  ASSERT_TRUE(runner_.Wait(0, &done).ok());
  EXPECT_TRUE(done.empty());
  std::set<uint64_t> tokens;
  while (runner_.running() > 0 && SecondsSince(start) < 5) {
    const size_t before = done.size();
    ASSERT_TRUE(runner_.Wait(-1, &done).ok());
    EXPECT_GT(done.size(), before);
    EXPECT_EQ(runner_.running() + done.size(), 5u);
  }
  EXPECT_LT(SecondsSince(start), 1.2);  // not one after another
  ASSERT_EQ(done.size(), 5u);
  for (const auto& [token, result] : done) {
    EXPECT_EQ(result.stdout_text, std::to_string(token) + "\n");
    tokens.insert(token);
  }
  EXPECT_EQ(tokens.size(), 5u);
}

TEST_F(CommandRunnerTest, WaitReturnsAtItsTimeout) {
  ASSERT_TRUE(runner_.Start(Spec("sleep 100"), 1).ok());
  CommandRunner::Done done;
  const auto start = Clock::now();
  ASSERT_TRUE(runner_.Wait(100, &done).ok());
  EXPECT_TRUE(done.empty());
  EXPECT_GE(SecondsSince(start), 0.09);
  EXPECT_LT(SecondsSince(start), 1.0);
  EXPECT_EQ(runner_.running(), 1u);
  runner_.TerminateAll(1);
  EXPECT_EQ(runner_.running(), 0u);
  EXPECT_LT(SecondsSince(start), 1.0);
}

// With set_report_begun, Wait also returns when a shell began, and
// TakeBegun names it once; a queued command begins only when a place frees
// up. Without it (the default, as above), Wait waits for an end.
TEST_F(CommandRunnerTest, ReportsWhenACommandBegins) {
  runner_.set_report_begun(true);
  runner_.set_max_running(1);
  ASSERT_TRUE(runner_.Start(Spec("sleep 0.5"), 1).ok());
  CommandSpec queued = Spec("sleep 100");
  queued.output_dir = dir_.Join(".wizard/tasks/2");
  ASSERT_TRUE(runner_.Start(queued, 2).ok());
  CommandRunner::Done done;
  std::vector<uint64_t> begun;
  const auto start = Clock::now();
  while (begun.empty() && SecondsSince(start) < 5) {
    ASSERT_TRUE(runner_.Wait(10000, &done).ok());
    runner_.TakeBegun(&begun);
  }
  EXPECT_LT(SecondsSince(start), 0.4) << "Wait did not return at the start";
  EXPECT_TRUE(done.empty());
  EXPECT_EQ(begun, std::vector<uint64_t>{1});
  begun.clear();
  runner_.TakeBegun(&begun);
  EXPECT_TRUE(begun.empty()) << "told twice";
  // The first ends, then the queued one begins.
  while (begun.empty() && SecondsSince(start) < 5) {
    ASSERT_TRUE(runner_.Wait(10000, &done).ok());
    runner_.TakeBegun(&begun);
  }
  EXPECT_EQ(begun, std::vector<uint64_t>{2});
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].first, 1u);
  runner_.TerminateAll(1);
}

TEST_F(CommandRunnerTest, TerminateAllKillsWhatIgnoresSigterm) {
  ASSERT_TRUE(runner_.Start(Spec("trap '' TERM; sleep 100"), 1).ok());
  CommandSpec other = Spec("sleep 100");
  other.output_dir = dir_.Join(".wizard/tasks/2");
  ASSERT_TRUE(runner_.Start(other, 2).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = Clock::now();
  runner_.TerminateAll(0.2);
  EXPECT_GE(SecondsSince(start), 0.19);
  EXPECT_LT(SecondsSince(start), 1.0);
  EXPECT_EQ(runner_.running(), 0u);
}

TEST_F(CommandRunnerTest, MissingCwdIsSpawnFailureNamingIt) {
  CommandSpec spec = Spec("echo never");
  spec.cwd = dir_.Join("no-such-dir");
  CommandResult r = Run(spec);
  EXPECT_EQ(r.outcome, Outcome::kSpawnFailed);
  EXPECT_NE(r.error.find(spec.cwd), std::string::npos) << r.error;
  EXPECT_NE(test::ReadAll(Out("1.stderr")).find(spec.cwd), std::string::npos);
  // Nothing ran, so nothing holds the attempt's lock. (Within a second:
  // twice in full-suite runs under load the lock was still held at the
  // first look, never reproduced alone; see the issue-13 closing note.)
  const auto start = Clock::now();
  while (!LockIsFree(Out("1.stdout")) && SecondsSince(start) < 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(LockIsFree(Out("1.stdout")));
}

TEST_F(CommandRunnerTest, UnwritableOutputDirIsAnError) {
  test::WriteAll(dir_.Join("file"), "x");
  CommandSpec spec = Spec("true");
  spec.output_dir = dir_.Join("file/tasks/1");
  Status s = runner_.Start(spec, 1);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find(dir_.Join("file")), std::string::npos);
  EXPECT_EQ(runner_.running(), 0u);
}

TEST_F(CommandRunnerTest, TreeHoldsLockWhileItRuns) {
  ASSERT_TRUE(runner_.Start(Spec("sleep 100"), 1).ok());
  EXPECT_FALSE(LockIsFree(Out("1.stdout")));
  // A second command for the same task is refused, the first left alone.
  Status s = runner_.Start(Spec("true"), 2);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(runner_.running(), 1u);
  EXPECT_FALSE(LockIsFree(Out("1.stdout")));
  runner_.TerminateAll(1);
  EXPECT_TRUE(LockIsFree(Out("1.stdout")));
}

TEST_F(CommandRunnerTest, NoDescriptorOfTheRunnerLeaksIntoCommands) {
  // Another command is running, so wizq holds its files and the spawner
  // its pidfd too.
  CommandSpec other = Spec("sleep 100");
  other.output_dir = dir_.Join(".wizard/tasks/2");
  ASSERT_TRUE(runner_.Start(other, 2).ok());
  CommandResult r =
      Run(Spec("for f in /proc/$$/fd/*; do readlink \"$f\"; done"));
  EXPECT_EQ(r.stdout_text.find("pidfd"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("tasks/2"), std::string::npos);  // its files
  // Its stdout, twice: as fd 1 and as the lock the tree holds (fd 3).
  const std::string lock = Out("1.stdout") + "\n";
  const size_t at = r.stdout_text.find(lock);
  ASSERT_NE(at, std::string::npos) << r.stdout_text;
  const size_t second = r.stdout_text.find(lock, at + 1);
  EXPECT_NE(second, std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find(lock, second + 1), std::string::npos);
  EXPECT_EQ(r.stdout_text.find("journal"), std::string::npos);
  runner_.TerminateAll(1);
}

TEST(AttemptFilesTest, NamesEveryPathOfAnAttempt) {
  const AttemptFiles f("/i/.wizard", 12, 3);
  EXPECT_EQ(f.dir(), "/i/.wizard/tasks/12");
  EXPECT_FALSE(f.legacy());
  EXPECT_EQ(f.stdout_path(), "/i/.wizard/tasks/12.3.stdout");
  EXPECT_EQ(f.stderr_path(), "/i/.wizard/tasks/12.3.stderr");
  EXPECT_EQ(AttemptFiles::JournalPath(f.dir()),
            "/i/.wizard/tasks/attempts.journal");
  EXPECT_EQ(AttemptFiles::TaskKey(f.dir()), "12");
  // The previous layout's files.
  EXPECT_EQ(f.stdin_path(), "/i/.wizard/tasks/12/3.stdin");
  EXPECT_EQ(f.legacy_stdout_path(), "/i/.wizard/tasks/12/3.stdout");
  EXPECT_EQ(AttemptFiles::LockPath(f.dir()),
            "/i/.wizard/tasks/12/running.lock");
  EXPECT_EQ(AttemptFiles::PgidPath(f.dir()), "/i/.wizard/tasks/12/pgid");
  EXPECT_EQ(AttemptFiles::InTaskDir("/d", 2).stdout_path(), "/d.2.stdout");
}

TEST(AttemptFilesTest, ExistingFindsThePreviousLayout) {
  test::ScratchDir dir;
  const std::string wizard = dir.Join(".wizard");
  fs::create_directories(wizard + "/tasks/4");
  test::WriteAll(wizard + "/tasks/4/1.stdout", "old");
  const AttemptFiles old = AttemptFiles::Existing(Env::Posix(), wizard, 4, 1);
  EXPECT_TRUE(old.legacy());
  EXPECT_EQ(old.stdout_path(), wizard + "/tasks/4/1.stdout");
  EXPECT_EQ(old.stderr_path(), wizard + "/tasks/4/1.stderr");
  test::WriteAll(wizard + "/tasks/4.1.stdout", "new");
  EXPECT_FALSE(AttemptFiles::Existing(Env::Posix(), wizard, 4, 1).legacy());
  EXPECT_FALSE(AttemptFiles::Existing(Env::Posix(), wizard, 5, 1).legacy());
}

// The Command implementation of the executor seam: the task on stdin, the
// WIZQ_* variables, exit 0 as a response, a failure with its stderr's last
// line, and "did it start" from the attempt's stdout file and journal.
TEST(CommandExecutorTest, RunsAnAttemptAndReportsItsResult) {
  test::ScratchDir dir;
  CommandExecutor ex(nullptr, dir.Join(".wizard"));
  Action ok{Action::Kind::kCommand, "cat; echo \"$WIZQ_ATTEMPT $WIZQ_STEP\"",
            ""};
  Action bad{Action::Kind::kCommand, "echo one >&2; echo last >&2; exit 4", ""};
  EXPECT_TRUE(ex.CanRun(ok));
  EXPECT_FALSE(ex.CanRun(Action{Action::Kind::kPool, "", "x"}));
  Attempt a;
  a.task_id = 5;
  a.number = 2;
  a.step = "S";
  a.value_json = "{}";
  a.action = &ok;
  a.base_dir = dir.path();
  EXPECT_FALSE(ex.AttemptStarted(5, 2));
  ASSERT_TRUE(ex.Start(a).ok());
  EXPECT_TRUE(ex.AttemptStarted(5, 2));
  Attempt b = a;
  b.task_id = 6;
  b.number = 1;
  b.action = &bad;
  ASSERT_TRUE(ex.Start(b).ok());
  Executor::Done done;
  const auto start = Clock::now();
  while (done.size() < 2 && SecondsSince(start) < 10) {
    ASSERT_TRUE(ex.Wait(1000, &done).ok());
  }
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(ex.running(), 0u);
  for (const auto& [id, r] : done) {
    if (id == 5) {
      EXPECT_EQ(r.outcome, AttemptResult::Outcome::kResponded);
      EXPECT_EQ(r.response, "{\"kind\":\"S\",\"value\":{}}\n2 S\n");
    } else {
      EXPECT_EQ(r.outcome, AttemptResult::Outcome::kExited);
      EXPECT_EQ(r.exit_code, 4);
      EXPECT_EQ(r.error, "exit code 4");
      EXPECT_EQ(r.stderr_tail, "last");
    }
  }
  EXPECT_TRUE(ex.ReapOrphans(5).ok());
}

}  // namespace
}  // namespace wizq::command_runner_test
