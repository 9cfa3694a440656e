#include "tasks/proc/posix_util.h"

#include <sys/file.h>
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

Status OpenFile(Env* env, const std::string& path, int flags, ScopedFd* fd) {
  int raw = -1;
  WIZQ_RETURN_IF_ERROR(env->OpenDescriptor(path, flags, &raw));
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

Status CheckRealDir(Env* env, const std::string& path) {
  FileInfo info;
  Status s = env->GetFileInfo(path, &info);
  if (!s.ok()) return s.Annotate("cannot use " + path);
  if (info.type == FileInfo::kSymlink) {
    return Status::IOError(path +
                           " is a symlink, not a directory; refusing "
                           "to write a task's files through it");
  }
  if (info.type != FileInfo::kDir) {
    return Status::IOErrorFromErrno("cannot use", path, ENOTDIR);
  }
  return Status::OK();
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
