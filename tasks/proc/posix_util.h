// Small POSIX helpers shared by the Command runner (command_runner.cc) and
// the orphan reaper (orphans.cc): an owning file descriptor, the small files
// of a task's directory, its flock, and the monotonic clock.
//
// Every file is reached through an Env (fs/env.h), so that a test Env can
// fail it; only system calls on a descriptor the Env handed out (write,
// flock) are made here. The POSIX Env opens files O_CLOEXEC, so that no
// descriptor leaks into a command except those passed on deliberately, and
// O_NOFOLLOW, so that a symlink planted in a task's directory is refused,
// never followed. write and flock are retried on EINTR. Errors name the
// operation and the path.
#ifndef WIZQ_TASKS_POSIX_UTIL_H_
#define WIZQ_TASKS_POSIX_UTIL_H_

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fs/env.h"
#include "util/status.h"

namespace wizq::internal {

constexpr int64_t kNever = INT64_MAX;

// CLOCK_MONOTONIC in nanoseconds.
int64_t NowNs();
// 0 for seconds <= 0; kNever / 2 for more than 1e9 seconds.
int64_t SecondsToNs(double seconds);
// Sleeps `ms` milliseconds, resuming after signals.
void SleepMs(int ms);
// "5s", "0.25s" (%g).
std::string FormatSeconds(double seconds);

// Owns a file descriptor.
class ScopedFd {
 public:
  ScopedFd() = default;
  ~ScopedFd() { reset(-1); }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  // Gives up ownership.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Env::OpenDescriptor into *fd: O_CLOEXEC and O_NOFOLLOW (mode 0600 when
// created), above 2 so that it cannot collide with the child's stdin/
// stdout/stderr when wizq was started with some of its own closed.
Status OpenFile(Env* env, const std::string& path, int flags, ScopedFd* fd);

// Writes all of `data` to a descriptor from OpenFile; `path` only names the
// file in errors.
Status WriteFd(int fd, std::string_view data, const std::string& path);

// The task's own directory must be a real directory, not a symlink planted
// to make wizq write elsewhere.
Status CheckRealDir(Env* env, const std::string& path);

// Takes the exclusive flock if it is free; an error only for failures other
// than "held by someone else".
Status TryLock(int fd, const std::string& path, bool* locked);

}  // namespace wizq::internal

#endif  // WIZQ_TASKS_POSIX_UTIL_H_
