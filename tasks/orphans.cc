#include "tasks/orphans.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string_view>

#include "tasks/attempt_files.h"
#include "tasks/command_runner.h"  // ReapOrphans
#include "tasks/orphans_record.h"
#include "tasks/posix_util.h"

namespace wizq {

using internal::FileHolders;
using internal::FormatSeconds;
using internal::NowNs;
using internal::OpenFile;
using internal::ScopedFd;
using internal::SecondsToNs;
using internal::SignalOrphans;
using internal::SleepMs;
using internal::TryLock;
using internal::WriteSmallFile;

namespace {

constexpr int kOrphanPollMs = 10;  // ReapOrphans: lock re-check period
constexpr int64_t kOrphanResignalNs = 250'000'000;

// /proc inspection (ReadProcFile, ReadProcStat, BootId, HoldsFile,
// FileHolders) makes raw system calls on purpose (fs/env.h allows them): /proc
// is the kernel's view of other processes, not a file wizq keeps, and a test
// Env has nothing to inject there.

// Reads at most `limit` bytes of a /proc file. Does not trust st_size (0 for
// /proc files).
bool ReadProcFile(const std::string& path, size_t limit, std::string* data) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  ScopedFd owner;
  owner.reset(fd);
  data->resize(std::min<size_t>(limit, 4096));
  size_t got = 0;
  while (got < limit) {
    if (got == data->size()) data->resize(std::min(limit, got * 2));
    const ssize_t n = read(fd, data->data() + got, data->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  data->resize(got);
  return true;
}

struct ProcStat {
  char state = '?';
  pid_t pgrp = 0;
  unsigned long long start_time = 0;  // clock ticks after boot
};

bool ReadProcStat(pid_t pid, ProcStat* st) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  std::string text;
  if (!ReadProcFile(path, 4096, &text)) return false;
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
    if (ReadProcFile("/proc/sys/kernel/random/boot_id", 64, id)) {
      while (!id->empty() && id->back() == '\n') id->pop_back();
    }
    return id;
  }();
  return *boot_id;
}

// The recorded leader, if that very process is still alive (not a zombie).
std::optional<pid_t> LiveLeader(Env* env, const std::string& output_dir) {
  std::string text;
  if (!env->ReadFilePrefix(AttemptFiles::PgidPath(output_dir), 256, &text)
           .ok()) {
    return {};
  }
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

// Whether `pid` has a descriptor open on `file` (/proc inspection: raw
// system calls on purpose, see above).
bool HoldsFile(pid_t pid, const FileInfo& file) {
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
        static_cast<uint64_t>(st.st_dev) == file.device &&
        static_cast<uint64_t>(st.st_ino) == file.inode) {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

// Whether the lock file of `task_dir` is held by someone (false if absent).
bool LockHeld(Env* env, const std::string& task_dir) {
  const std::string path = AttemptFiles::LockPath(task_dir);
  ScopedFd lock;
  if (!OpenFile(env, path, O_RDWR, &lock).ok()) return false;
  bool free = false;
  if (!TryLock(lock.get(), path, &free).ok()) return true;  // be careful
  return !free;  // ours is released when `lock` closes
}

std::string PidList(const std::vector<pid_t>& pids) {
  std::string list;
  for (pid_t pid : pids)
    list += (list.empty() ? "" : " ") + std::to_string(pid);
  return list.empty() ? "unknown" : list;
}

}  // namespace

namespace internal {

const std::string& CurrentBootId() { return BootId(); }

bool AttemptBegan(Env* env, const std::string& task_dir, int attempt) {
  AttemptRecord r;
  std::string text;
  if (env->ReadFilePrefix(AttemptFiles::PgidPath(task_dir), 512, &text).ok() &&
      ParseAttemptRecord(text, &r) && r.attempt == attempt) {
    return true;
  }
  return LockHeld(env, task_dir);
}

OrphanState ProbeOrphan(Env* env, const std::string& task_dir, int attempt,
                        AttemptRecord* out) {
  AttemptRecord r;
  std::string text;
  const bool have =
      env->ReadFilePrefix(AttemptFiles::PgidPath(task_dir), 512, &text).ok() &&
      ParseAttemptRecord(text, &r);
  if (out != nullptr) *out = r;
  if (have && r.attempt == 0) {
    // An older wizq's tree (no supervisor): it will never leave an exit
    // record, so it is ended and the task runs again.
    return OrphanState::kLost;
  }
  if (!have || r.attempt != attempt) {
    // The supervisor may not have written its first line yet (wizq flocks
    // the lock before it forks): a held lock is a tree starting.
    return LockHeld(env, task_dir) ? OrphanState::kRunning : OrphanState::kLost;
  }
  const bool this_boot = !r.boot_id.empty() && r.boot_id == BootId();
  if (r.ended) {
    const bool trusted = this_boot || r.synced;
    return trusted && r.end == AttemptRecord::End::kExit
               ? OrphanState::kFinished
               : OrphanState::kLost;
  }
  if (!this_boot) return OrphanState::kLost;
  ProcStat st;
  const bool leader_alive = ReadProcStat(r.pid, &st) &&
                            st.start_time == r.start && st.state != 'Z' &&
                            st.state != 'X';
  if (leader_alive || LockHeld(env, task_dir)) {
    // The supervisor may have written its end line since the first read.
    text.clear();
    if (env->ReadFilePrefix(AttemptFiles::PgidPath(task_dir), 512, &text)
            .ok() &&
        ParseAttemptRecord(text, &r) && r.ended && r.attempt == attempt) {
      if (out != nullptr) *out = r;
      return r.end == AttemptRecord::End::kExit ? OrphanState::kFinished
                                                : OrphanState::kLost;
    }
    return OrphanState::kRunning;
  }
  // Nothing runs: read once more, the supervisor may just have finished.
  text.clear();
  if (env->ReadFilePrefix(AttemptFiles::PgidPath(task_dir), 512, &text).ok() &&
      ParseAttemptRecord(text, &r) && r.ended && r.attempt == attempt &&
      r.end == AttemptRecord::End::kExit) {
    if (out != nullptr) *out = r;
    return OrphanState::kFinished;
  }
  return OrphanState::kLost;
}

void WriteLeaderRecord(Env* env, const std::string& output_dir, pid_t pid) {
  ProcStat st;
  if (!ReadProcStat(pid, &st)) return;
  const std::string record = std::to_string(pid) + " " +
                             std::to_string(st.start_time) + " " + BootId() +
                             "\n";
  // Best effort: without it the lock holders are still found (ReapOrphans
  // signals every process holding running.lock).
  WriteSmallFile(env, AttemptFiles::PgidPath(output_dir), record).IgnoreError();
}

// Scans /proc: process inspection, raw on purpose (see the top of this file).
std::vector<pid_t> FileHolders(const FileInfo& file) {
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

}  // namespace internal

// --- ReapOrphans -------------------------------------------------------------

Status ReapOrphans(const std::string& output_dir, double grace_seconds,
                   double max_wait_seconds, Env* env) {
  const std::string path = AttemptFiles::LockPath(output_dir);
  ScopedFd lock;
  Status s = OpenFile(env, path, O_RDWR, &lock);
  if (s.IsNotFound()) return Status::OK();  // never ran here
  WIZQ_RETURN_IF_ERROR(s);
  // fstat of the descriptor the Env gave (fs/env.h allows it): the very
  // file whose flock is tested below, even if the path were replaced.
  struct stat st;
  if (fstat(lock.get(), &st) != 0) {
    return Status::IOErrorFromErrno("cannot stat", path, errno);
  }
  FileInfo lock_file;
  lock_file.device = static_cast<uint64_t>(st.st_dev);
  lock_file.inode = static_cast<uint64_t>(st.st_ino);
  const int64_t start = NowNs();
  const int64_t kill_at = start + SecondsToNs(grace_seconds);
  const int64_t give_up = start + SecondsToNs(max_wait_seconds);
  int64_t next_signal = start;
  int sig = SIGTERM;
  for (;;) {
    bool free = false;
    WIZQ_RETURN_IF_ERROR(TryLock(lock.get(), path, &free));
    const std::optional<pid_t> leader = LiveLeader(env, output_dir);
    if (free && !leader) return Status::OK();
    const int64_t now = NowNs();
    if (now >= next_signal || now >= give_up) {
      std::vector<pid_t> orphans;
      if (!free) orphans = FileHolders(lock_file);
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
