// A measured run of a process, for the tests that bound the resources of the
// real `wizq` binary (tests/resource_test.cc, tests/security_test.cc).
// Header-only, like tests/integration_util.h, whose deadline and paths it
// uses.
//
// RunMeasured forks and execs a command with stdin from /dev/null and
// stdout and stderr in files, lets the test adjust the child before exec
// (rlimits, umask), and reaps it with wait4, so that the result carries the
// child's peak resident set size and wall time as well as how it ended. A
// command still running at its deadline, or when the test's `stop` says so,
// is SIGKILLed; its peak RSS is still known.
#ifndef WIZQ_TESTS_PROCESS_UTIL_H_
#define WIZQ_TESTS_PROCESS_UTIL_H_

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq::test {

// A process run to its end with its resource usage (wait4).
struct Measured {
  bool exited = false;
  int code = -1;
  int signal = 0;
  bool timed_out = false;
  long maxrss_kb = 0;  // peak resident set size
  double seconds = 0;
  std::string out, err;
};

// Runs `args` ("wizq" = the built binary) with stdout and stderr in files.
// `in_child` runs in the child before exec (umask, rlimits). `stop`, polled
// every 2ms, may return true to SIGKILL it early (its peak RSS is still
// known).
inline Measured RunMeasured(std::vector<std::string> args,
                            const std::function<void()>& in_child = nullptr,
                            const std::function<bool()>& stop = nullptr,
                            Clock::duration timeout = kWizqDeadline) {
  Measured m;
  if (args[0] == "wizq") args[0] = WizqPath();
  ScratchDir io;
  const std::string out_path = io.Join("out"), err_path = io.Join("err");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = Clock::now();
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    for (int fd : {in, out, err}) {
      if (fd > 2) close(fd);
    }
    if (in_child) in_child();
    execv(argv[0], argv.data());
    _exit(127);
  }
  EXPECT_GT(pid, 0) << "fork: " << strerror(errno);
  if (pid <= 0) return m;
  int status = 0;
  struct rusage ru = {};
  bool killed = false;
  while (true) {
    const pid_t r = wait4(pid, &status, WNOHANG, &ru);
    if (r == pid) break;
    if (!killed && stop && stop()) {
      kill(pid, SIGKILL);
      killed = true;
    } else if (!killed && Clock::now() - start > timeout) {
      m.timed_out = true;
      kill(pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  m.exited = WIFEXITED(status);
  m.code = m.exited ? WEXITSTATUS(status) : -1;
  m.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  m.maxrss_kb = ru.ru_maxrss;
  m.out = ReadAll(out_path);
  m.err = ReadAll(err_path);
  return m;
}

// How it ended and the start of what it printed, for failure messages.
inline std::string Describe(const Measured& m) {
  return "exit " + std::to_string(m.code) + " signal " +
         std::to_string(m.signal) + (m.timed_out ? " TIMED OUT" : "") +
         "\n--- stdout:\n" + m.out.substr(0, 2000) + "\n--- stderr:\n" +
         m.err.substr(0, 2000);
}

// True in a build with AddressSanitizer or ThreadSanitizer, whose memory
// figures say nothing about wizq's.
inline bool UnderSanitizer() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

}  // namespace wizq::test

#endif  // WIZQ_TESTS_PROCESS_UTIL_H_
