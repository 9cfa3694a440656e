#include "tasks/proc/orphans.h"

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
#include <list>
#include <optional>
#include <set>
#include <string_view>

#include "tasks/exec/attempt_files.h"
#include "tasks/exec/attempt_journal.h"
#include "tasks/proc/command_runner.h"  // ReapOrphans
#include "tasks/proc/orphans_record.h"
#include "tasks/proc/posix_util.h"

namespace wizq {

using internal::AttemptRecord;
using internal::FileHolders;
using internal::FormatSeconds;
using internal::NowNs;
using internal::OpenFile;
using internal::ScopedFd;
using internal::SecondsToNs;
using internal::SignalOrphans;
using internal::SleepMs;
using internal::TryLock;

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

// The latest attempt record of the task named `task_dir`: the journal's
// (tasks/exec/attempt_journal.h), else the previous layout's `pgid` file. False
// if neither has one.
bool ReadRecord(Env* env, const std::string& task_dir, AttemptRecord* r) {
  if (internal::LatestJournalAttempt(env, AttemptFiles::JournalPath(task_dir),
                                     AttemptFiles::TaskKey(task_dir), r)) {
    return true;
  }
  std::string text;
  return env->ReadFilePrefix(AttemptFiles::PgidPath(task_dir), 512, &text)
             .ok() &&
         internal::ParseAttemptRecord(text, r);
}

// The state of the record's leader ('R', 'S', 'Z', ...; 0 when that very
// process is gone).
char LeaderState(const AttemptRecord& r) {
  ProcStat st;
  if (r.pid > 1 && r.boot_id == BootId() && ReadProcStat(r.pid, &st) &&
      st.start_time == r.start) {
    return st.state;
  }
  return 0;
}

// Whether the record's leader is that very process and alive (not a
// zombie).
bool LeaderAlive(const AttemptRecord& r) {
  const char state = LeaderState(r);
  return state != 0 && state != 'Z' && state != 'X';
}

// The recorded leader, if that very process is still alive.
std::optional<pid_t> LiveLeader(Env* env, const std::string& output_dir) {
  AttemptRecord r;
  if (!ReadRecord(env, output_dir, &r) || !LeaderAlive(r)) return {};
  return r.pid;
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
    // The link's own mode is the descriptor's access (proc(5)): a tree's
    // processes inherit the stdout file open for writing; a wizq that
    // reads it or probes its lock has it read-only and is no holder.
    struct stat st, link;
    if (e->d_name[0] != '.' && fstatat(dfd, e->d_name, &st, 0) == 0 &&
        static_cast<uint64_t>(st.st_dev) == file.device &&
        static_cast<uint64_t>(st.st_ino) == file.inode &&
        fstatat(dfd, e->d_name, &link, AT_SYMLINK_NOFOLLOW) == 0 &&
        (link.st_mode & S_IWUSR) != 0) {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

// A spawner (tasks/proc/spawner.h) holds an attempt's lock only while the
// attempt waits to start; it runs no task code and records every attempt
// of its wizq: never one of the processes to end.
bool IsSpawner(pid_t pid) {
  std::string comm;
  return ReadProcFile("/proc/" + std::to_string(pid) + "/comm", 64, &comm) &&
         comm.rfind("wizq-spawner", 0) == 0;
}

// Whether the lock file at `path` is held by someone (false if absent).
bool FileLockHeld(Env* env, const std::string& path) {
  ScopedFd lock;
  if (!OpenFile(env, path, O_RDONLY, &lock).ok()) return false;
  bool free = false;
  if (!TryLock(lock.get(), path, &free).ok()) return true;  // be careful
  return !free;  // ours is released when `lock` closes
}

// Whether a tree of attempt `attempt` holds its lock: its stdout file, or
// the previous layout's running.lock.
bool LockHeld(Env* env, const std::string& task_dir, int attempt) {
  return FileLockHeld(
             env, AttemptFiles::InTaskDir(task_dir, attempt).stdout_path()) ||
         FileLockHeld(env, AttemptFiles::LockPath(task_dir));
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
  if (ReadRecord(env, task_dir, &r) && r.attempt == attempt) return true;
  return LockHeld(env, task_dir, attempt);
}

OrphanState ProbeOrphan(Env* env, const std::string& task_dir, int attempt,
                        AttemptRecord* out) {
  AttemptRecord r;
  const bool have = ReadRecord(env, task_dir, &r);
  if (out != nullptr) *out = r;
  if (have && r.attempt == 0) {
    // A tree of a wizq older than adoption (nothing records its end): it
    // will never leave an exit record, so it is ended and the task runs
    // again.
    return OrphanState::kLost;
  }
  if (!have || r.attempt != attempt) {
    // The shell may not have written its start line yet (wizq flocks the
    // lock before it hands the attempt to the spawner, which holds it while
    // the attempt waits in its queue): a held lock is a tree starting.
    return LockHeld(env, task_dir, attempt) ? OrphanState::kRunning
                                            : OrphanState::kLost;
  }
  const bool this_boot = !r.boot_id.empty() && r.boot_id == BootId();
  if (r.ended) {
    const bool trusted = this_boot || r.synced;
    return trusted && r.end == AttemptRecord::End::kExit
               ? OrphanState::kFinished
               : OrphanState::kLost;
  }
  if (!this_boot) return OrphanState::kLost;
  // A zombie leader: its spawner has not reaped it yet, which it does only
  // after the end line (tasks/proc/spawner.h): the line is coming.
  const bool running = LeaderState(r) != 0 || LockHeld(env, task_dir, attempt);
  // The spawner may have written the end line since the first read.
  AttemptRecord again;
  if (ReadRecord(env, task_dir, &again) && again.ended &&
      again.attempt == attempt && again.pid == r.pid) {
    if (out != nullptr) *out = again;
    return again.end == AttemptRecord::End::kExit ? OrphanState::kFinished
                                                  : OrphanState::kLost;
  }
  return running ? OrphanState::kRunning : OrphanState::kLost;
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
    if (HoldsFile(static_cast<pid_t>(pid), file) && !IsSpawner(pid)) {
      pids.push_back(pid);
    }
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

namespace {

// An open lock file of a task's earlier attempt and its identity.
struct TreeLock {
  std::string path;
  ScopedFd fd;
  FileInfo file;
};

// Opens one lock file if it exists. False only on an error other than
// NotFound (in *s).
bool OpenTreeLock(Env* env, const std::string& path, std::list<TreeLock>* locks,
                  Status* s) {
  ScopedFd fd;
  Status open = OpenFile(env, path, O_RDONLY, &fd);
  if (open.IsNotFound()) return true;
  if (!open.ok()) {
    *s = open;
    return false;
  }
  TreeLock& lock = locks->emplace_back();
  lock.path = path;
  lock.fd.reset(fd.release());
  // fstat of the descriptor the Env gave (fs/env.h allows it): the very
  // file whose flock is tested, even if the path were replaced.
  struct stat st;
  if (fstat(lock.fd.get(), &st) != 0) {
    *s = Status::IOErrorFromErrno("cannot stat", path, errno);
    return false;
  }
  lock.file.device = static_cast<uint64_t>(st.st_dev);
  lock.file.inode = static_cast<uint64_t>(st.st_ino);
  return true;
}

// Every lock an earlier tree of the task may hold: the stdout file of each
// attempt up to the latest the journal records (and any after it that
// exists), and the previous layout's running.lock.
Status OpenTreeLocks(Env* env, const std::string& task_dir,
                     std::list<TreeLock>* locks) {
  Status s;
  if (!OpenTreeLock(env, AttemptFiles::LockPath(task_dir), locks, &s)) {
    return s;
  }
  AttemptRecord latest;
  const int recorded =
      internal::LatestJournalAttempt(env, AttemptFiles::JournalPath(task_dir),
                                     AttemptFiles::TaskKey(task_dir), &latest)
          ? latest.attempt
          : 0;
  for (int k = 1;; ++k) {
    const size_t before = locks->size();
    if (!OpenTreeLock(env, AttemptFiles::InTaskDir(task_dir, k).stdout_path(),
                      locks, &s)) {
      return s;
    }
    if (k > recorded && locks->size() == before) return Status::OK();
  }
}

}  // namespace

Status ReapOrphans(const std::string& output_dir, double grace_seconds,
                   double max_wait_seconds, Env* env) {
  std::list<TreeLock> locks;
  WIZQ_RETURN_IF_ERROR(OpenTreeLocks(env, output_dir, &locks));
  const int64_t start = NowNs();
  const int64_t kill_at = start + SecondsToNs(grace_seconds);
  const int64_t give_up = start + SecondsToNs(max_wait_seconds);
  int64_t next_signal = start;
  int sig = SIGTERM;
  for (;;) {
    std::vector<const TreeLock*> held;
    for (const TreeLock& lock : locks) {
      bool free = false;
      WIZQ_RETURN_IF_ERROR(TryLock(lock.fd.get(), lock.path, &free));
      if (!free) held.push_back(&lock);
    }
    const std::optional<pid_t> leader = LiveLeader(env, output_dir);
    if (held.empty() && !leader) return Status::OK();
    const int64_t now = NowNs();
    if (now >= next_signal || now >= give_up) {
      std::vector<pid_t> orphans;
      for (const TreeLock* lock : held) {
        const std::vector<pid_t> holders = FileHolders(lock->file);
        orphans.insert(orphans.end(), holders.begin(), holders.end());
      }
      if (leader) orphans.push_back(*leader);
      if (now >= give_up) {
        return Status::IOError("an earlier attempt of " + output_dir +
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
