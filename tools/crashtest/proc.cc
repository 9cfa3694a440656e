#include "tools/crashtest/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "fs/env.h"
#include "tasks/exec/attempt_journal.h"
#include "tasks/proc/orphans_record.h"

extern char** environ;

namespace wizq::crashtest {
namespace {

bool g_interrupted = false;
// Statuses of children reaped while waiting for another one.
std::map<pid_t, int> g_reaped;

sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Reaps every child that has exited; keeps the statuses.
void ReapAll() {
  while (true) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    g_reaped[pid] = status;
  }
}

// Waits up to `ms` for one of the handled signals; notes SIGINT/SIGTERM.
void AwaitSignal(int64_t ms) {
  const sigset_t set = HandledSignals();
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(ms / 1000);
  ts.tv_nsec = static_cast<long>(ms % 1000) * 1000000L;
  const int sig = sigtimedwait(&set, nullptr, &ts);
  if (sig == SIGINT || sig == SIGTERM) g_interrupted = true;
}

struct ProcInfo {
  pid_t pid = 0, ppid = 0, pgrp = 0;
  char state = '?';
};

// Reads /proc/<pid>/stat; false if the process is gone.
bool ReadProcStat(pid_t pid, ProcInfo* out) {
  // Raw /proc read: process inspection, not a file of wizq's (fs/env.h).
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses.
  const char* paren = strrchr(buf, ')');
  if (paren == nullptr) return false;
  int ppid = 0, pgrp = 0;
  char state = '?';
  if (sscanf(paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) return false;
  out->pid = pid;
  out->ppid = ppid;
  out->pgrp = pgrp;
  out->state = state;
  return true;
}

// Every live (not zombie) descendant of this process.
std::vector<ProcInfo> LiveDescendants() {
  std::multimap<pid_t, ProcInfo> by_parent;
  DIR* d = opendir("/proc");  // process inspection, see ReadProcStat
  if (d == nullptr) return {};
  while (const struct dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    ProcInfo p;
    if (ReadProcStat(static_cast<pid_t>(pid), &p)) by_parent.emplace(p.ppid, p);
  }
  closedir(d);
  std::vector<ProcInfo> out;
  std::vector<pid_t> todo = {getpid()};
  while (!todo.empty()) {
    const pid_t parent = todo.back();
    todo.pop_back();
    auto range = by_parent.equal_range(parent);
    for (auto it = range.first; it != range.second; ++it) {
      todo.push_back(it->second.pid);
      if (it->second.state != 'Z' && it->second.state != 'X') {
        out.push_back(it->second);
      }
    }
  }
  return out;
}

std::vector<std::string> ChildEnvironment(const SpawnSpec& spec) {
  std::set<std::string> drop(spec.unset_env.begin(), spec.unset_env.end());
  for (const auto& [k, v] : spec.env) drop.insert(k);
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; e++) {
    const char* eq = strchr(*e, '=');
    if (eq == nullptr ||
        drop.count(std::string(*e, static_cast<size_t>(eq - *e)))) {
      continue;
    }
    out.emplace_back(*e);
  }
  for (const auto& [k, v] : spec.env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

void InitProcessControl() {
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  const sigset_t set = HandledSignals();
  sigprocmask(SIG_BLOCK, &set, nullptr);
}

Status Spawn(const SpawnSpec& spec, pid_t* pid) {
  Env* env = Env::Posix();
  int in = -1, out = -1, err = -1;
  Status s = env->OpenDescriptor("/dev/null", O_RDONLY, &in);
  if (s.ok()) {
    s = env->OpenDescriptor(spec.stdout_path, O_WRONLY | O_CREAT | O_TRUNC,
                            &out);
  }
  if (s.ok()) {
    s = env->OpenDescriptor(spec.stderr_path, O_WRONLY | O_CREAT | O_TRUNC,
                            &err);
  }
  if (s.ok()) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in, 0);
    posix_spawn_file_actions_adddup2(&fa, out, 1);
    posix_spawn_file_actions_adddup2(&fa, err, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults = HandledSignals();
    sigemptyset(&none);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF |
                                        POSIX_SPAWN_SETPGROUP);
    std::vector<std::string> argv_s = spec.argv;
    std::vector<std::string> env_s = ChildEnvironment(spec);
    std::vector<char*> argv = CStrings(argv_s), envp = CStrings(env_s);
    const int rc =
        posix_spawn(pid, argv[0], &fa, &attr, argv.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    if (rc == 0) g_reaped.erase(*pid);  // a status of an earlier use of the pid
    if (rc != 0) {
      s = Status::IOError("cannot start " + spec.argv[0] + ": " + strerror(rc));
    }
  }
  for (int fd : {in, out, err}) {
    if (fd >= 0) close(fd);  // a descriptor OpenDescriptor handed out
  }
  return s;
}

std::string ChildResult::Describe() const {
  if (interrupted) return "interrupted";
  std::string d = exited ? "exit " + std::to_string(code)
                         : "killed by signal " + std::to_string(signal);
  if (timed_out) d = "timed out (" + d + ")";
  return d;
}

ChildResult WaitChild(pid_t pid, int64_t deadline_ms) {
  ChildResult r;
  const int64_t deadline = deadline_ms > 0 ? NowMs() + deadline_ms : 0;
  while (true) {
    ReapAll();
    auto it = g_reaped.find(pid);
    if (it != g_reaped.end()) {
      const int status = it->second;
      g_reaped.erase(it);
      r.exited = WIFEXITED(status);
      r.code = r.exited ? WEXITSTATUS(status) : -1;
      r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      return r;
    }
    const int64_t now = NowMs();
    if (g_interrupted || (deadline > 0 && now >= deadline)) {
      r.interrupted = g_interrupted;
      r.timed_out = !g_interrupted;
      KillDescendants();
      continue;  // reaps `pid` on the next pass
    }
    AwaitSignal(deadline > 0 ? std::min<int64_t>(deadline - now, 200) : 200);
  }
}

int KillDescendants() {
  int signalled = 0;
  const pid_t own_group = getpgrp();
  for (int round = 0; round < 1000; round++) {
    const std::vector<ProcInfo> live = LiveDescendants();
    if (live.empty()) break;
    for (const ProcInfo& p : live) {
      kill(p.pid, SIGKILL);
      if (p.pgrp > 1 && p.pgrp != own_group) kill(-p.pgrp, SIGKILL);
      signalled++;
    }
    ReapAll();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ReapAll();
  return signalled;
}

bool Interrupted() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  struct timespec zero = {0, 0};
  if (sigtimedwait(&set, nullptr, &zero) > 0) g_interrupted = true;
  return g_interrupted;
}

namespace {

// The journal's end lines that were not synced (tasks/exec/attempt_journal.h):
// dropped, as a power cut may drop them. Returns how many.
int DropUnsyncedJournalEnds(const std::string& path) {
  std::string text;
  if (!Env::Posix()->ReadFile(path, &text).ok()) return 0;
  std::string kept;
  int dropped = 0;
  size_t at = 0;
  for (size_t nl; (nl = text.find('\n', at)) != std::string::npos;
       at = nl + 1) {
    const std::string_view line(text.data() + at, nl - at);
    internal::JournalLine parsed;
    if (internal::ParseJournalLine(line, &parsed) && parsed.is_end &&
        !parsed.record.synced) {
      dropped++;
      continue;
    }
    kept.append(line).push_back('\n');
  }
  if (dropped == 0) return 0;
  const int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < kept.size()) {
    const ssize_t n = write(fd, kept.data() + done, kept.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  return dropped;
}

}  // namespace

int DropUnsyncedExitRecords(const std::string& install_dir) {
  const std::string tasks = install_dir + "/.wizard/tasks";
  int dropped = DropUnsyncedJournalEnds(tasks + "/attempts.journal");
  DIR* d = opendir(tasks.c_str());
  if (d == nullptr) return dropped;
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    // A run of the previous layout: the task's `pgid` record
    // (tasks/proc/orphans_record.h), the start line, then the end line.
    const std::string path = tasks + "/" + e->d_name + "/pgid";
    std::string text;
    if (!Env::Posix()->ReadFile(path, &text).ok()) continue;
    internal::AttemptRecord r;
    if (!internal::ParseAttemptRecord(text, &r) || !r.ended || r.synced) {
      continue;
    }
    const size_t first = text.find('\n');
    if (first != std::string::npos &&
        truncate(path.c_str(), static_cast<off_t>(first + 1)) == 0) {
      dropped++;
    }
  }
  closedir(d);
  return dropped;
}

}  // namespace wizq::crashtest
