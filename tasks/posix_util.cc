#include "tasks/posix_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace wizq::internal {

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

void SleepMs(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

std::string FormatSeconds(double seconds) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%gs", seconds);
  return buf;
}

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

Status WriteSmallFile(const std::string& path, std::string_view data) {
  ScopedFd fd;
  WIZQ_RETURN_IF_ERROR(OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, &fd));
  return WriteFd(fd.get(), data, path);
}

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

}  // namespace wizq::internal
