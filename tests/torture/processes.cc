// The child processes of the kill -9 torture harness: see processes.h.
#include "tests/torture/processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace wizq::torture {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Exit statuses of the wizq processes we wait for; orphaned task processes
// (we are their subreaper) are reaped and forgotten.
std::set<pid_t> g_tracked;
std::map<pid_t, int> g_reaped;

}  // namespace

void ReapAll() {
  while (true) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    if (g_tracked.count(pid)) g_reaped[pid] = status;
  }
}

bool TryWait(pid_t pid, int* status) {
  ReapAll();
  auto it = g_reaped.find(pid);
  if (it == g_reaped.end()) return false;
  *status = it->second;
  g_reaped.erase(it);
  g_tracked.erase(pid);
  return true;
}

// Waits for `pid` up to `timeout`; true (and *status) if it exited.
bool WaitFor(pid_t pid, Clock::duration timeout, int* status) {
  const Clock::time_point until = Clock::now() + timeout;
  while (!TryWait(pid, status)) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status))
    return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Starts `args` as the leader of a new process group, stdin from /dev/null,
// stdout to /dev/null unless `out` is set, stderr appended to `err`.
pid_t Spawn(const std::vector<std::string>& args, const std::string& err,
            const std::string& out) {
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int out_fd =
      open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int err_fd =
      open(err.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (pid > 0) {
    setpgid(pid, pid);  // also here: no race with a kill(-pid)
    g_tracked.insert(pid);
  }
  close(in_fd);
  close(out_fd);
  close(err_fd);
  return pid;
}

// Runs `args` to its end (SIGKILL after `timeout`); returns its status, or
// -1 on a timeout.
int RunToEnd(const std::vector<std::string>& args, const std::string& err,
             Clock::duration timeout, const std::string& out) {
  const pid_t pid = Spawn(args, err, out);
  if (pid < 0) return -1;
  int status = 0;
  if (WaitFor(pid, timeout, &status)) return status;
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  WaitFor(pid, std::chrono::seconds(10), &status);
  return -1;
}

// Processes (not us) with a descriptor open on a file under one of
// `prefixes` (canonical paths).
std::vector<pid_t> ProcessesHolding(const std::vector<std::string>& prefixes) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  const pid_t self = getpid();
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 1 || pid == self) continue;
    const std::string fd_dir = std::string("/proc/") + e->d_name + "/fd";
    DIR* fds = opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    bool holds = false;
    while (dirent* f = readdir(fds)) {
      if (f->d_name[0] == '.') continue;
      char target[PATH_MAX];
      const std::string link = fd_dir + "/" + f->d_name;
      const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      const std::string_view t(target, static_cast<size_t>(n));
      for (const std::string& p : prefixes) {
        if (t.substr(0, p.size()) == p) holds = true;
      }
      if (holds) break;
    }
    closedir(fds);
    if (holds) pids.push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
  return pids;
}
}  // namespace wizq::torture
