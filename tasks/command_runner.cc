#include "tasks/command_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>

extern char** environ;

namespace wizq {
namespace {

constexpr char kShell[] = "/bin/sh";
constexpr char kLockName[] = "/running.lock";
constexpr char kLeaderName[] = "/pgid";
constexpr int64_t kNever = INT64_MAX;
constexpr int kFallbackPollMs = 5;  // waitpid polling without pidfds
constexpr int kOrphanPollMs = 10;   // ReapOrphans: lock re-check period
constexpr int64_t kOrphanResignalNs = 250'000'000;
constexpr double kStartReapSlackSeconds = 5;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t SecondsToNs(double seconds) {
  if (seconds <= 0) return 0;
  if (seconds > 1e9) return kNever / 2;
  return static_cast<int64_t>(seconds * 1e9);
}

double NsToSeconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

void SleepMs(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Owns a file descriptor.
class ScopedFd {
 public:
  ScopedFd() = default;
  ~ScopedFd() { reset(-1); }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// open(2) with O_CLOEXEC and O_NOFOLLOW (mode 0600 when created): a symlink
// planted in a task's directory is refused, never followed. The descriptor
// is moved above 2 so that it cannot collide with the child's stdin/stdout/
// stderr when wizq was started with some of its own closed.
Status OpenFile(const std::string& path, int flags, ScopedFd* fd) {
  int raw;
  do {
    raw = open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, 0600);
  } while (raw < 0 && errno == EINTR);
  if (raw < 0) return Status::IOErrorFromErrno("cannot open", path, errno);
  if (raw <= STDERR_FILENO) {
    const int moved = fcntl(raw, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    const int err = errno;
    close(raw);
    if (moved < 0) return Status::IOErrorFromErrno("cannot dup", path, err);
    raw = moved;
  }
  fd->reset(raw);
  return Status::OK();
}

Status WriteFd(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOErrorFromErrno("cannot write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}

// Creates or truncates `path` (0600) and writes `data`; no fsync.
Status WriteSmallFile(const std::string& path, std::string_view data) {
  ScopedFd fd;
  WIZQ_RETURN_IF_ERROR(OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, &fd));
  return WriteFd(fd.get(), data, path);
}

// Reads at most `limit` bytes. Does not trust st_size (0 for /proc files).
Status ReadUpTo(const std::string& path, size_t limit, std::string* data) {
  ScopedFd fd;
  WIZQ_RETURN_IF_ERROR(OpenFile(path, O_RDONLY, &fd));
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    return Status::IOErrorFromErrno("cannot stat", path, errno);
  }
  const size_t hint = static_cast<size_t>(st.st_size) + 1;
  data->resize(std::min(limit, std::max<size_t>(hint, 4096)));
  size_t got = 0;
  while (got < limit) {
    if (got == data->size()) data->resize(std::min(limit, got * 2));
    const ssize_t n = read(fd.get(), data->data() + got, data->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IOErrorFromErrno("cannot read", path, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  data->resize(got);
  return Status::OK();
}

// The task's own directory must be a real directory, not a symlink planted
// to make wizq write elsewhere.
Status CheckRealDir(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    return Status::IOErrorFromErrno("cannot stat", path, errno);
  }
  if (S_ISLNK(st.st_mode)) {
    return Status::IOError(path +
                           " is a symlink, not a directory; refusing "
                           "to write a task's files through it");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::IOErrorFromErrno("cannot use", path, ENOTDIR);
  }
  return Status::OK();
}

// mkdir -p; missing components are created 0700.
Status MakeDirs(const std::string& path) {
  if (mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return Status::OK();
  const size_t slash = path.find_last_of('/');
  if (errno != ENOENT || slash == std::string::npos || slash == 0) {
    return Status::IOErrorFromErrno("cannot create directory", path, errno);
  }
  WIZQ_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash)));
  if (mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return Status::OK();
  return Status::IOErrorFromErrno("cannot create directory", path, errno);
}

// Takes the exclusive flock if it is free; an error only for failures other
// than "held by someone else".
Status TryLock(int fd, const std::string& path, bool* locked) {
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      return Status::IOErrorFromErrno("cannot lock", path, errno);
    }
    *locked = false;
    return Status::OK();
  }
  *locked = true;
  return Status::OK();
}

// --- Identifying processes across a wizq crash ------------------------------

struct ProcStat {
  char state = '?';
  pid_t pgrp = 0;
  unsigned long long start_time = 0;  // clock ticks after boot
};

bool ReadProcStat(pid_t pid, ProcStat* st) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  std::string text;
  if (!ReadUpTo(path, 4096, &text).ok()) return false;
  // "pid (comm) state ppid pgrp ... starttime(22nd) ..."; comm may hold
  // spaces and parentheses, so fields are counted after the last ')'.
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return false;
  std::vector<std::string_view> fields;
  std::string_view rest(text);
  rest.remove_prefix(paren + 1);
  while (!rest.empty() && fields.size() < 20) {
    const size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const size_t end = std::min(rest.find(' '), rest.size());
    fields.push_back(rest.substr(0, end));
    rest.remove_prefix(end);
  }
  if (fields.size() < 20 || fields[0].empty()) return false;
  st->state = fields[0][0];
  st->pgrp = static_cast<pid_t>(atol(std::string(fields[2]).c_str()));
  st->start_time = strtoull(std::string(fields[19]).c_str(), nullptr, 10);
  return true;
}

const std::string& BootId() {
  static const std::string* const boot_id = [] {
    auto* id = new std::string;
    if (ReadUpTo("/proc/sys/kernel/random/boot_id", 64, id).ok()) {
      while (!id->empty() && id->back() == '\n') id->pop_back();
    }
    return id;
  }();
  return *boot_id;
}

// Records the leader as "<pid> <start time> <boot id>", so that a later
// ReapOrphans never signals a process that merely reuses the pid.
void WriteLeaderRecord(const std::string& output_dir, pid_t pid) {
  ProcStat st;
  if (!ReadProcStat(pid, &st)) return;
  const std::string record = std::to_string(pid) + " " +
                             std::to_string(st.start_time) + " " + BootId() +
                             "\n";
  // Best effort: without it the lock holders are still found.
  WriteSmallFile(output_dir + kLeaderName, record);
}

// The recorded leader, if that very process is still alive (not a zombie).
std::optional<pid_t> LiveLeader(const std::string& output_dir) {
  std::string text;
  if (!ReadUpTo(output_dir + kLeaderName, 256, &text).ok()) return {};
  long pid = 0;
  unsigned long long start_time = 0;
  char boot[64] = {0};
  if (sscanf(text.c_str(), "%ld %llu %63s", &pid, &start_time, boot) != 3 ||
      pid <= 1 || boot != BootId()) {
    return {};
  }
  ProcStat st;
  if (!ReadProcStat(static_cast<pid_t>(pid), &st) ||
      st.start_time != start_time || st.state == 'Z' || st.state == 'X') {
    return {};
  }
  return static_cast<pid_t>(pid);
}

bool HoldsFile(pid_t pid, const struct stat& file) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return false;
  DIR* d = fdopendir(dfd);
  if (d == nullptr) {
    close(dfd);
    return false;
  }
  bool found = false;
  while (dirent* e = readdir(d)) {
    struct stat st;
    if (e->d_name[0] != '.' && fstatat(dfd, e->d_name, &st, 0) == 0 &&
        st.st_dev == file.st_dev && st.st_ino == file.st_ino) {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

// Other processes with a descriptor open on `file` (scans /proc).
std::vector<pid_t> FileHolders(const struct stat& file) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  const pid_t self = getpid();
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 1 || pid == self) continue;
    if (HoldsFile(static_cast<pid_t>(pid), file)) pids.push_back(pid);
  }
  closedir(proc);
  return pids;
}

// Signals each process and its process group (never wizq's own group: a
// task could only be in it by moving there itself).
void SignalOrphans(const std::vector<pid_t>& pids, int sig) {
  const pid_t own_group = getpgrp();
  std::set<pid_t> groups;
  for (pid_t pid : pids) {
    kill(pid, sig);
    const pid_t group = getpgid(pid);
    if (group > 1 && group != own_group) groups.insert(group);
  }
  for (pid_t group : groups) kill(-group, sig);
}

std::string PidList(const std::vector<pid_t>& pids) {
  std::string list;
  for (pid_t pid : pids)
    list += (list.empty() ? "" : " ") + std::to_string(pid);
  return list.empty() ? "unknown" : list;
}

// --- Spawning ----------------------------------------------------------------

// The inherited environment with `overrides` replacing or adding entries.
class EnvBlock {
 public:
  explicit EnvBlock(
      const std::vector<std::pair<std::string, std::string>>& overrides) {
    std::set<std::string_view> names;
    for (const auto& [name, value] : overrides) names.insert(name);
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string_view entry(*e);
      if (names.count(entry.substr(0, entry.find('='))) == 0) {
        pointers_.push_back(*e);
      }
    }
    // Later overrides of the same name win.
    for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
      if (names.erase(it->first) == 1) {
        strings_.push_back(it->first + "=" + it->second);
      }
    }
    for (std::string& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// The descriptors a child starts with. All are O_CLOEXEC and above 2 here.
struct ChildFds {
  ScopedFd in, out, err, lock;
};

Status OpenChildFds(const CommandSpec& spec, ChildFds* fds) {
  const std::string base = spec.output_dir + "/" + std::to_string(spec.attempt);
  const std::string in_path = base + ".stdin";
  WIZQ_RETURN_IF_ERROR(WriteSmallFile(in_path, spec.stdin_data));
  WIZQ_RETURN_IF_ERROR(OpenFile(in_path, O_RDONLY, &fds->in));
  constexpr int kOut = O_WRONLY | O_CREAT | O_TRUNC;
  WIZQ_RETURN_IF_ERROR(OpenFile(base + ".stdout", kOut, &fds->out));
  return OpenFile(base + ".stderr", kOut, &fds->err);
}

// Opens and takes <output_dir>/running.lock. When an earlier process tree of
// this directory still holds it, ends that tree first.
Status LockOutputDir(const CommandSpec& spec, ScopedFd* lock) {
  const std::string path = spec.output_dir + kLockName;
  for (int round = 0;; ++round) {
    WIZQ_RETURN_IF_ERROR(OpenFile(path, O_RDWR | O_CREAT, lock));
    bool locked = false;
    WIZQ_RETURN_IF_ERROR(TryLock(lock->get(), path, &locked));
    if (locked) return Status::OK();
    lock->reset(-1);
    if (round > 0) {
      return Status::Busy("an earlier attempt of this task still holds " +
                          path);
    }
    WIZQ_RETURN_IF_ERROR(
        ReapOrphans(spec.output_dir, spec.kill_grace_seconds,
                    spec.kill_grace_seconds + kStartReapSlackSeconds));
  }
}

// posix_spawn of /bin/sh -c script: its own process group, clean signal
// state, stdio from `fds`, and the lock descriptor inherited (glibc >= 2.29
// clears FD_CLOEXEC for an adddup2 onto the same number). Returns an errno.
int SpawnShell(const CommandSpec& spec, const ChildFds& fds, pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds.in.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds.out.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds.err.get(), STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds.lock.get(), fds.lock.get());
  if (!spec.cwd.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, spec.cwd.c_str());
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
                                      POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t signals;
  sigemptyset(&signals);
  posix_spawnattr_setsigmask(&attr, &signals);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD}) sigaddset(&signals, sig);
  posix_spawnattr_setsigdefault(&attr, &signals);

  const EnvBlock env(spec.env);
  std::string script = spec.script;
  char sh[] = "sh";
  char dash_c[] = "-c";
  char* const argv[] = {sh, dash_c, script.data(), nullptr};
  const int err = posix_spawn(pid, kShell, &actions, &attr, argv, env.get());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  return err;
}

// Signals the task's process group, and the leader itself if it left it.
void SignalTree(pid_t leader, int sig) {
  kill(-leader, sig);
  if (getpgid(leader) != leader) kill(leader, sig);
}

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// True once the (unreaped) child has exited; it stays a zombie.
bool LeaderExited(pid_t pid) {
  siginfo_t info;
  memset(&info, 0, sizeof(info));
  if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return errno != EINTR;  // ECHILD: reaped elsewhere; Reap reports it
  }
  return info.si_pid == pid;
}

std::string FormatSeconds(double seconds) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%gs", seconds);
  return buf;
}

}  // namespace

// --- CommandRunner -----------------------------------------------------------

struct CommandRunner::Child {
  ~Child() {
    if (pidfd >= 0) close(pidfd);
  }

  uint64_t token = 0;
  pid_t pid = -1;       // the leader; also the process group id
  int pidfd = -1;       // -1 without pidfd support
  bool exited = false;  // the leader is a zombie, ready to be reaped
  std::string output_dir;
  std::string stdout_path;
  size_t max_stdout_bytes = 0;
  int64_t start_ns = 0;
  int64_t term_ns = kNever;  // when SIGTERM is due (the timeout)
  int64_t kill_ns = kNever;  // when SIGKILL is due
  double timeout_seconds = 0;
  double grace_seconds = 0;
  bool timed_out = false;
};

namespace {

void ReadStdout(const std::string& path, size_t max, CommandResult* result) {
  const size_t limit = max == SIZE_MAX ? max : max + 1;
  Status s = ReadUpTo(path, limit, &result->stdout_text);
  if (!s.ok()) {
    if (result->error.empty()) result->error = s.ToString();
    return;
  }
  if (result->stdout_text.size() > max) {
    result->stdout_text.resize(max);
    result->stdout_truncated = true;
  }
}

void DescribeStatus(int status, bool timed_out, double timeout,
                    CommandResult* result) {
  using Outcome = CommandResult::Outcome;
  if (WIFEXITED(status)) {
    result->outcome = Outcome::kExited;
    result->exit_code = WEXITSTATUS(status);
    if (result->exit_code != 0) {
      result->error = "exit code " + std::to_string(result->exit_code);
    }
  } else if (WIFSIGNALED(status)) {
    result->outcome = Outcome::kSignaled;
    result->signal = WTERMSIG(status);
    result->error = "killed by signal " + std::to_string(result->signal) +
                    " (" + strsignal(result->signal) + ")";
  }
  if (timed_out) {
    result->outcome = Outcome::kTimedOut;
    result->error = "timed out after " + FormatSeconds(timeout);
  }
}

}  // namespace

CommandRunner::CommandRunner() = default;

CommandRunner::~CommandRunner() { TerminateAll(0); }

size_t CommandRunner::running() const {
  return children_.size() + spawn_failures_.size();
}

bool CommandRunner::FindByProcess(pid_t pid, uint64_t* token) const {
  const pid_t group = pid > 0 ? getpgid(pid) : -1;
  for (const auto& c : children_) {
    if (!c->exited && (c->pid == pid || c->pid == group)) {
      *token = c->token;
      return true;
    }
  }
  return false;
}

Status CommandRunner::Start(const CommandSpec& spec, uint64_t token) {
  const int64_t start_ns = NowNs();
  for (const auto& c : children_) {
    if (c->output_dir == spec.output_dir) {
      return Status::Busy("a command of " + spec.output_dir +
                          " is already running");
    }
  }
  WIZQ_RETURN_IF_ERROR(MakeDirs(spec.output_dir));
  WIZQ_RETURN_IF_ERROR(CheckRealDir(spec.output_dir));
  ChildFds fds;
  WIZQ_RETURN_IF_ERROR(LockOutputDir(spec, &fds.lock));
  WIZQ_RETURN_IF_ERROR(OpenChildFds(spec, &fds));
  pid_t pid = -1;
  const int err = SpawnShell(spec, fds, &pid);
  if (err != 0) {
    CommandResult result;
    result.outcome = CommandResult::Outcome::kSpawnFailed;
    result.error = std::string("cannot run ") + kShell + " -c in " +
                   (spec.cwd.empty() ? "." : spec.cwd) + ": " + strerror(err);
    result.seconds = NsToSeconds(NowNs() - start_ns);
    WriteFd(fds.err.get(), "wizq: " + result.error + "\n", "stderr");
    spawn_failures_.emplace_back(token, std::move(result));
    return Status::OK();
  }
  WriteLeaderRecord(spec.output_dir, pid);
  auto child = std::make_unique<Child>();
  child->token = token;
  child->pid = pid;
  child->output_dir = spec.output_dir;
  child->stdout_path =
      spec.output_dir + "/" + std::to_string(spec.attempt) + ".stdout";
  child->max_stdout_bytes = spec.max_stdout_bytes;
  child->start_ns = start_ns;
  if (spec.timeout_seconds) {
    child->timeout_seconds = *spec.timeout_seconds;
    child->term_ns = start_ns + SecondsToNs(*spec.timeout_seconds);
  }
  child->grace_seconds = spec.kill_grace_seconds;
  if (use_pidfd_) {
    child->pidfd = PidfdOpen(pid);
    if (child->pidfd < 0) use_pidfd_ = false;
  }
  children_.push_back(std::move(child));
  return Status::OK();
}

int CommandRunner::MillisToNextEvent(int64_t deadline_ns) const {
  int64_t next = deadline_ns;
  for (const auto& c : children_) {
    if (!c->timed_out) next = std::min(next, c->term_ns);
    next = std::min(next, c->kill_ns);
  }
  if (next == kNever) return -1;
  const int64_t ns = next - NowNs();
  if (ns <= 0) return 0;
  return static_cast<int>(
      std::min<int64_t>((ns + 999'999) / 1'000'000, INT_MAX));
}

Status CommandRunner::PollChildren(int timeout_ms) {
  if (use_pidfd_) {
    std::vector<pollfd> fds;
    for (const auto& c : children_) fds.push_back({c->pidfd, POLLIN, 0});
    const int n = poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) {
      return Status::IOErrorFromErrno("cannot poll", "task processes", errno);
    }
    for (size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if (fds[i].revents != 0) children_[i]->exited = true;
    }
    return Status::OK();
  }
  for (;;) {
    bool any = false;
    for (const auto& c : children_) {
      if (!c->exited && LeaderExited(c->pid)) c->exited = any = true;
    }
    if (any || timeout_ms == 0) return Status::OK();
    const int step = timeout_ms < 0 ? kFallbackPollMs
                                    : std::min(timeout_ms, kFallbackPollMs);
    SleepMs(step);
    if (timeout_ms > 0) timeout_ms -= step;
  }
}

// A timed-out task's whole tree: its group, and whatever else still holds
// its running.lock (a grandchild that left the group with setsid).
static void SignalTimedOut(pid_t leader, const std::string& output_dir,
                           int sig) {
  SignalTree(leader, sig);
  struct stat lock;
  if (stat((output_dir + kLockName).c_str(), &lock) == 0) {
    SignalOrphans(FileHolders(lock), sig);
  }
}

void CommandRunner::EnforceTimeouts() {
  const int64_t now = NowNs();
  for (const auto& c : children_) {
    if (c->exited) continue;
    if (!c->timed_out && now >= c->term_ns) {
      c->timed_out = true;
      SignalTimedOut(c->pid, c->output_dir, SIGTERM);
      c->kill_ns = now + SecondsToNs(c->grace_seconds);
    }
    if (now >= c->kill_ns) {
      SignalTimedOut(c->pid, c->output_dir, SIGKILL);
      c->kill_ns = kNever;
    }
  }
}

CommandResult CommandRunner::Reap(const Child& c) {
  // While the leader is an unreaped zombie its pid (= the group id) cannot
  // be reused, so this reaches only what the task left behind.
  kill(-c.pid, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = waitpid(c.pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  CommandResult result;
  result.seconds = NsToSeconds(NowNs() - c.start_ns);
  if (r < 0) {
    result.outcome = CommandResult::Outcome::kExited;
    result.error = "exit status of pid " + std::to_string(c.pid) +
                   " lost: " + strerror(errno);
    return result;
  }
  DescribeStatus(status, c.timed_out, c.timeout_seconds, &result);
  ReadStdout(c.stdout_path, c.max_stdout_bytes, &result);
  return result;
}

void CommandRunner::CollectExited(Done* done) {
  for (size_t i = 0; i < children_.size();) {
    if (!children_[i]->exited) {
      ++i;
      continue;
    }
    done->emplace_back(children_[i]->token, Reap(*children_[i]));
    children_.erase(children_.begin() + static_cast<ptrdiff_t>(i));
  }
}

Status CommandRunner::Wait(int timeout_ms, Done* done) {
  const size_t before = done->size();
  for (auto& failure : spawn_failures_) done->push_back(std::move(failure));
  spawn_failures_.clear();
  const int64_t deadline =
      timeout_ms < 0 ? kNever : NowNs() + int64_t{timeout_ms} * 1'000'000;
  while (!children_.empty()) {
    const bool have_some = done->size() > before;
    WIZQ_RETURN_IF_ERROR(
        PollChildren(have_some ? 0 : MillisToNextEvent(deadline)));
    EnforceTimeouts();
    CollectExited(done);
    if (done->size() > before || NowNs() >= deadline) break;
  }
  return Status::OK();
}

void CommandRunner::TerminateAll(double grace_seconds) {
  spawn_failures_.clear();
  std::vector<std::string> dirs;
  for (const auto& c : children_) dirs.push_back(c->output_dir);
  for (const auto& c : children_) SignalTree(c->pid, SIGTERM);
  const int64_t kill_at = NowNs() + SecondsToNs(grace_seconds);
  Done dropped;
  while (!children_.empty() && NowNs() < kill_at) {
    const int64_t ms = (kill_at - NowNs() + 999'999) / 1'000'000;
    PollChildren(static_cast<int>(std::min<int64_t>(ms, INT_MAX)));
    CollectExited(&dropped);
  }
  for (const auto& c : children_) {
    SignalTree(c->pid, SIGKILL);
    c->exited = true;
  }
  CollectExited(&dropped);
  // The leaders are reaped; wait until the rest of each tree (a child of
  // the shell still exiting, a process that left the group) lets go of its
  // lock, so that nothing of these tasks outlives this call.
  for (const std::string& dir : dirs) ReapOrphans(dir, 0.2, 5.0);
}

// --- ReapOrphans -------------------------------------------------------------

Status ReapOrphans(const std::string& output_dir, double grace_seconds,
                   double max_wait_seconds) {
  const std::string path = output_dir + kLockName;
  const int raw = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (raw < 0) {
    if (errno == ENOENT) return Status::OK();  // never ran here
    return Status::IOErrorFromErrno("cannot open", path, errno);
  }
  ScopedFd lock;
  lock.reset(raw);
  struct stat lock_stat;
  if (fstat(lock.get(), &lock_stat) != 0) {
    return Status::IOErrorFromErrno("cannot stat", path, errno);
  }
  const int64_t start = NowNs();
  const int64_t kill_at = start + SecondsToNs(grace_seconds);
  const int64_t give_up = start + SecondsToNs(max_wait_seconds);
  int64_t next_signal = start;
  int sig = SIGTERM;
  for (;;) {
    bool free = false;
    WIZQ_RETURN_IF_ERROR(TryLock(lock.get(), path, &free));
    const std::optional<pid_t> leader = LiveLeader(output_dir);
    if (free && !leader) return Status::OK();
    const int64_t now = NowNs();
    if (now >= next_signal || now >= give_up) {
      std::vector<pid_t> orphans;
      if (!free) orphans = FileHolders(lock_stat);
      if (leader) orphans.push_back(*leader);
      if (now >= give_up) {
        return Status::IOError("an earlier attempt in " + output_dir +
                               " is still running after " +
                               FormatSeconds(max_wait_seconds) + " (pids " +
                               PidList(orphans) + ")");
      }
      SignalOrphans(orphans, sig);
      next_signal = sig == SIGTERM ? kill_at : now + kOrphanResignalNs;
      sig = SIGKILL;
    }
    SleepMs(kOrphanPollMs);
  }
}

}  // namespace wizq
