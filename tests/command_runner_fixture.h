// The fixture of CommandRunner's tests (command_runner_test.cc,
// command_runner_orphans_test.cc): CommandRunnerTest, which runs commands
// in a scratch directory, and helpers that wait for processes and locks.
#ifndef WIZQ_TESTS_COMMAND_RUNNER_FIXTURE_H_
#define WIZQ_TESTS_COMMAND_RUNNER_FIXTURE_H_

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tasks/proc/command_runner.h"
#include "tests/test_util.h"

namespace wizq::command_runner_test {

using Outcome = CommandResult::Outcome;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

using test::ProcessGone;

inline bool WaitGone(pid_t pid, double seconds) {
  const auto start = Clock::now();
  while (!ProcessGone(pid)) {
    if (SecondsSince(start) > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Waits for a command to write its pid ("123\n") to `path`.
inline pid_t ReadPidFile(const std::string& path) {
  const auto start = Clock::now();
  while (SecondsSince(start) < 5) {
    const std::string text = test::ReadAll(path);
    if (!text.empty() && text.back() == '\n') return atoi(text.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return -1;
}

inline bool LockIsFree(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  const bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
  close(fd);
  return free;
}

class CommandRunnerTest : public testing::Test {
 protected:
  CommandSpec Spec(const std::string& script) {
    CommandSpec spec;
    spec.script = script;
    spec.cwd = dir_.path();
    spec.output_dir = dir_.Join(".wizard/tasks/1");
    return spec;
  }

  // A file of task 1: Out("2.stdout") is attempt 2's stdout.
  std::string Out(const std::string& name) {
    return dir_.Join(".wizard/tasks/1." + name);
  }
  std::string Journal() { return dir_.Join(".wizard/tasks/attempts.journal"); }

  // Starts one command and waits (bounded) for its result.
  CommandResult Run(const CommandSpec& spec) {
    EXPECT_TRUE(runner_.Start(spec, 7).ok());
    CommandRunner::Done done;
    const auto start = Clock::now();
    while (done.empty() && SecondsSince(start) < 10) {
      EXPECT_TRUE(runner_.Wait(1000, &done).ok());
    }
    EXPECT_EQ(done.size(), 1u);
    if (done.empty()) return CommandResult();
    EXPECT_EQ(done[0].first, 7u);
    return done[0].second;
  }

  test::ScratchDir dir_;
  CommandRunner runner_;
};
}  // namespace wizq::command_runner_test

#endif  // WIZQ_TESTS_COMMAND_RUNNER_FIXTURE_H_
