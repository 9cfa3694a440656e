// The POSIX Env: real files, with O_CLOEXEC on every descriptor, O_NOFOLLOW
// on every file open, EINTR retried, and every error naming its file.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "fs/env.h"

namespace wizq {

namespace {

constexpr int kFileMode = 0600;
constexpr int kOpenFlags = O_CLOEXEC | O_NOFOLLOW;

// ENOENT is NotFound (callers test for a missing file); everything else is
// an IOError. Both read "<op> <path>: <strerror>".
Status PosixError(std::string_view op, const std::string& path, int err) {
  if (err == ELOOP) {  // O_NOFOLLOW met a symlink
    return Status::IOError(
        std::string(op) + " " + path +
        ": is a symlink, and wizq never follows symlinks for its own files "
        "(one could point anywhere). Replace it with the real file or move "
        "it away");
  }
  Status s = Status::IOErrorFromErrno(op, path, err);
  return err == ENOENT ? Status::NotFound(s.message()) : s;
}

// open(2), retried on EINTR. Returns the descriptor or -1 with errno set.
int OpenRetry(const std::string& path, int flags, int mode = kFileMode) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// Runs `op` (returning -1 with errno on failure) until it is not EINTR.
template <typename Op>
int RetryEintr(Op op) {
  int r;
  do {
    r = op();
  } while (r < 0 && errno == EINTR);
  return r;
}

// close(2) is not retried: on Linux the descriptor is gone even on EINTR.
Status CloseFd(int fd, const std::string& path) {
  if (::close(fd) != 0 && errno != EINTR) {
    return PosixError("close", path, errno);
  }
  return Status::OK();
}

class PosixWritableFile final : public WritableFile {
 public:
  // Takes ownership of `fd`, opened O_APPEND.
  PosixWritableFile(std::string path, int fd)
      : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return PosixError("append", path_, errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return Status::OK();
  }

  Status Sync() override {
    if (RetryEintr([&] { return ::fdatasync(fd_); }) != 0) {
      return PosixError("fdatasync", path_, errno);
    }
    return Status::OK();
  }

  Status Truncate(uint64_t size) override {
    const off_t len = static_cast<off_t>(size);
    if (RetryEintr([&] { return ::ftruncate(fd_, len); }) != 0) {
      return PosixError("truncate", path_, errno);
    }
    return Status::OK();
  }

  Status Close() override {
    const int fd = fd_;
    fd_ = -1;
    return fd < 0 ? Status::OK() : CloseFd(fd, path_);
  }

  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  int fd_;
};

class PosixRandomRWFile final : public RandomRWFile {
 public:
  // Takes ownership of `fd`, opened O_RDWR without O_APPEND (with O_APPEND
  // Linux's pwrite ignores the offset).
  PosixRandomRWFile(std::string path, int fd)
      : path_(std::move(path)), fd_(fd) {}
  ~PosixRandomRWFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Read(uint64_t offset, size_t n, std::string* data) override {
    data->resize(n);
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd_, data->data() + got, n - got,
                                static_cast<off_t>(offset + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        data->clear();
        return PosixError("read", path_, errno);
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    data->resize(got);
    return Status::OK();
  }

  Status Write(uint64_t offset, std::string_view data) override {
    while (!data.empty()) {
      const ssize_t n =
          ::pwrite(fd_, data.data(), data.size(), static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return PosixError("write", path_, errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
      offset += static_cast<uint64_t>(n);
    }
    return Status::OK();
  }

  Status Sync() override {
    if (RetryEintr([&] { return ::fdatasync(fd_); }) != 0) {
      return PosixError("fdatasync", path_, errno);
    }
    return Status::OK();
  }

  Status Size(uint64_t* size) override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return PosixError("fstat", path_, errno);
    *size = static_cast<uint64_t>(st.st_size);
    return Status::OK();
  }

  Status Truncate(uint64_t size) override {
    const off_t len = static_cast<off_t>(size);
    if (RetryEintr([&] { return ::ftruncate(fd_, len); }) != 0) {
      return PosixError("truncate", path_, errno);
    }
    return Status::OK();
  }

  Status Close() override {
    const int fd = fd_;
    fd_ = -1;
    return fd < 0 ? Status::OK() : CloseFd(fd, path_);
  }

  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  int fd_;
};

class PosixFileLock final : public FileLock {
 public:
  PosixFileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }  // Drops the flock.
  const std::string& path() const override { return path_; }
  int fd() const override { return fd_; }

 private:
  const std::string path_;
  const int fd_;
};

// pread() until `len` bytes are in `buf` or the file ends; *got = bytes read.
Status PreadFull(int fd, const std::string& path, uint64_t offset, char* buf,
                 size_t len, size_t* got) {
  *got = 0;
  while (*got < len) {
    const ssize_t n =
        ::pread(fd, buf + *got, len - *got, static_cast<off_t>(offset + *got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return PosixError("read", path, errno);
    }
    if (n == 0) break;
    *got += static_cast<size_t>(n);
  }
  return Status::OK();
}

// Reads from `fd` at `offset` to end of file into `data`, in one buffer
// sized by fstat with Env::kReadSlack zero bytes after the data (see
// Env::ReadFile); a file that grows meanwhile is read on to its new end.
Status ReadFd(int fd, const std::string& path, uint64_t offset,
              std::string* data) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return PosixError("fstat", path, errno);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const size_t expected = size > offset ? size - offset : 0;
  data->assign(expected + Env::kReadSlack, '\0');
  size_t got = 0;
  WIZQ_RETURN_IF_ERROR(
      PreadFull(fd, path, offset, data->data(), expected, &got));
  data->resize(got);  // keeps the capacity: the slack stays zeros
  if (got < expected) return Status::OK();
  char buf[64 * 1024];
  for (;;) {
    size_t more = 0;
    WIZQ_RETURN_IF_ERROR(
        PreadFull(fd, path, offset + data->size(), buf, sizeof(buf), &more));
    data->append(buf, more);
    if (more < sizeof(buf)) return Status::OK();
  }
}

class PosixEnv final : public Env {
 public:
  Status NewAppendableFile(const std::string& path,
                           std::unique_ptr<WritableFile>* result) override {
    bool created = false;
    int fd = OpenOrCreate(path, O_WRONLY | O_APPEND, &created);
    if (fd < 0) return PosixError("open", path, errno);
    if (created) {
      Status s = SyncDir(DirName(path));
      if (!s.ok()) {
        ::close(fd);
        return s;
      }
    }
    *result = std::make_unique<PosixWritableFile>(path, fd);
    return Status::OK();
  }

  Status NewRandomRWFile(const std::string& path,
                         std::unique_ptr<RandomRWFile>* result) override {
    bool created = false;
    int fd = OpenOrCreate(path, O_RDWR, &created);
    if (fd < 0) return PosixError("open", path, errno);
    if (created) {
      Status s = SyncDir(DirName(path));
      if (!s.ok()) {
        ::close(fd);
        return s;
      }
    }
    *result = std::make_unique<PosixRandomRWFile>(path, fd);
    return Status::OK();
  }

  Status NewWritableFile(const std::string& path,
                         std::unique_ptr<WritableFile>* result) override {
    const int fd =
        OpenRetry(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | kOpenFlags);
    if (fd < 0) return PosixError("open", path, errno);
    *result = std::make_unique<PosixWritableFile>(path, fd);
    return Status::OK();
  }

  Status NewUserFile(const std::string& path,
                     std::unique_ptr<WritableFile>* result) override {
    const int fd =
        OpenRetry(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC,
                  0666);  // less the umask; follows symlinks
    if (fd < 0) return PosixError("open", path, errno);
    *result = std::make_unique<PosixWritableFile>(path, fd);
    return Status::OK();
  }

  Status ReadFile(const std::string& path, std::string* data) override {
    return ReadFileFrom(path, 0, data);
  }

  Status ReadFileFrom(const std::string& path, uint64_t offset,
                      std::string* data) override {
    const int fd = OpenRetry(path, O_RDONLY | kOpenFlags);
    if (fd < 0) return PosixError("open", path, errno);
    Status s = ReadFd(fd, path, offset, data);
    ::close(fd);
    return s;
  }

  Status ReadFilePrefix(const std::string& path, size_t limit,
                        std::string* data) override;

  // Sequential read() to EOF, not pread: the user's file may be a pipe, a
  // FIFO or /dev/stdin (`--input-file <(...)`).
  Status ReadUserFile(const std::string& path, std::string* data) override {
    const int fd = OpenRetry(path, O_RDONLY | O_CLOEXEC);  // follows symlinks
    if (fd < 0) return PosixError("open", path, errno);
    data->clear();
    char buf[64 * 1024];
    Status s;
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        s = PosixError("read", path, errno);
        break;
      }
      if (n == 0) break;
      data->append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return s;
  }

  bool FileExists(const std::string& path) override {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0;
  }

  Status GetFileInfo(const std::string& path, FileInfo* info) override;

  Status GetFileSize(const std::string& path, uint64_t* size) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return PosixError("stat", path, errno);
    *size = static_cast<uint64_t>(st.st_size);
    return Status::OK();
  }

  Status TruncateFile(const std::string& path, uint64_t size) override {
    const int fd = OpenRetry(path, O_WRONLY | kOpenFlags);
    if (fd < 0) return PosixError("open", path, errno);
    PosixWritableFile file(path, fd);
    WIZQ_RETURN_IF_ERROR(file.Truncate(size));
    WIZQ_RETURN_IF_ERROR(file.Sync());
    return file.Close();
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return PosixError("rename", from + " to " + to, errno);
    }
    return Status::OK();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return PosixError("unlink", path, errno);
    return Status::OK();
  }

  Status CreateDir(const std::string& path, int mode) override;
  Status CreateDirs(const std::string& path, int mode) override;
  Status SyncDir(const std::string& path) override;
  Status ListDir(const std::string& path,
                 std::vector<std::string>* names) override;
  Status LockFile(const std::string& path, bool wait,
                  std::unique_ptr<FileLock>* lock) override;
  Status OpenDescriptor(const std::string& path, int flags, int* fd) override;

  uint64_t NowMicros() override {
    struct timespec ts;
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000 +
           static_cast<uint64_t>(ts.tv_nsec) / 1000;
  }

 private:
  // Opens `path` with `flags`, creating it if missing; sets *created if
  // this call made the file. Returns -1 with errno set on failure.
  static int OpenOrCreate(const std::string& path, int flags, bool* created);
};

int PosixEnv::OpenOrCreate(const std::string& path, int flags, bool* created) {
  for (;;) {
    int fd = OpenRetry(path, flags | kOpenFlags);
    if (fd >= 0 || errno != ENOENT) return fd;
    // Missing: create it exclusively so we know whether we made it.
    fd = OpenRetry(path, flags | O_CREAT | O_EXCL | kOpenFlags);
    if (fd >= 0) *created = true;
    if (fd >= 0 || errno != EEXIST) return fd;
    // Someone else created it in between: open theirs.
  }
}

Status PosixEnv::ReadFilePrefix(const std::string& path, size_t limit,
                                std::string* data) {
  const int fd = OpenRetry(path, O_RDONLY | kOpenFlags);
  if (fd < 0) return PosixError("open", path, errno);
  // st_size only sizes the first buffer: the file may still be growing.
  struct stat st;
  const size_t hint =
      ::fstat(fd, &st) == 0 ? static_cast<size_t>(st.st_size) + 1 : 0;
  data->resize(std::min(limit, std::max<size_t>(hint, 4096)));
  size_t got = 0;
  Status s;
  while (got < limit) {
    if (got == data->size()) data->resize(std::min(limit, got * 2));
    const ssize_t n = ::read(fd, data->data() + got, data->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      s = PosixError("read", path, errno);
      break;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  data->resize(s.ok() ? got : 0);
  return s;
}

Status PosixEnv::GetFileInfo(const std::string& path, FileInfo* info) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return PosixError("lstat", path, errno);
  info->type = S_ISREG(st.st_mode)   ? FileInfo::kFile
               : S_ISDIR(st.st_mode) ? FileInfo::kDir
               : S_ISLNK(st.st_mode) ? FileInfo::kSymlink
                                     : FileInfo::kOther;
  info->size = static_cast<uint64_t>(st.st_size);
  info->uid = static_cast<uint32_t>(st.st_uid);
  info->device = static_cast<uint64_t>(st.st_dev);
  info->inode = static_cast<uint64_t>(st.st_ino);
  return Status::OK();
}

Status PosixEnv::CreateDirs(const std::string& path, int mode) {
  const mode_t m = static_cast<mode_t>(mode);
  if (::mkdir(path.c_str(), m) == 0 || errno == EEXIST) return Status::OK();
  const size_t slash = path.find_last_of('/');
  if (errno != ENOENT || slash == std::string::npos || slash == 0) {
    return PosixError("mkdir", path, errno);
  }
  WIZQ_RETURN_IF_ERROR(CreateDirs(path.substr(0, slash), mode));
  if (::mkdir(path.c_str(), m) == 0 || errno == EEXIST) return Status::OK();
  return PosixError("mkdir", path, errno);
}

Status PosixEnv::OpenDescriptor(const std::string& path, int flags, int* fd) {
  int raw = OpenRetry(path, flags | kOpenFlags);
  if (raw < 0) return PosixError("open", path, errno);
  if (raw <= STDERR_FILENO) {  // wizq was started with some of 0-2 closed
    const int moved = ::fcntl(raw, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    const int err = errno;
    ::close(raw);
    if (moved < 0) return PosixError("dup", path, err);
    raw = moved;
  }
  *fd = raw;
  return Status::OK();
}

Status PosixEnv::CreateDir(const std::string& path, int mode) {
  if (::mkdir(path.c_str(), static_cast<mode_t>(mode)) == 0) {
    // Like a created file, a created directory is durable on return.
    return SyncDir(DirName(path));
  }
  const int err = errno;
  if (err != EEXIST) return PosixError("mkdir", path, err);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return PosixError("lstat", path, errno);
  if (S_ISLNK(st.st_mode)) {
    return Status::IOError("mkdir " + path + ": is a symlink, not a directory");
  }
  if (!S_ISDIR(st.st_mode)) return PosixError("mkdir", path, ENOTDIR);
  return Status::OK();
}

Status PosixEnv::SyncDir(const std::string& path) {
  const int fd = OpenRetry(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return PosixError("open", path, errno);
  Status s;
  if (RetryEintr([&] { return ::fsync(fd); }) != 0) {
    s = PosixError("fsync", path, errno);
  }
  ::close(fd);
  return s;
}

Status PosixEnv::ListDir(const std::string& path,
                         std::vector<std::string>* names) {
  names->clear();
  const int fd = OpenRetry(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return PosixError("open", path, errno);
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const int err = errno;
    ::close(fd);
    return PosixError("opendir", path, err);
  }
  int err;
  for (;;) {
    errno = 0;
    const struct dirent* entry = ::readdir(dir);
    err = errno;
    if (entry == nullptr) break;
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names->push_back(name);
  }
  ::closedir(dir);
  if (err != 0) return PosixError("readdir", path, err);
  std::sort(names->begin(), names->end());
  return Status::OK();
}

Status PosixEnv::LockFile(const std::string& path, bool wait,
                          std::unique_ptr<FileLock>* lock) {
  const int fd = OpenRetry(path, O_RDWR | O_CREAT | kOpenFlags);
  if (fd < 0) return PosixError("open", path, errno);
  const int op = LOCK_EX | (wait ? 0 : LOCK_NB);
  if (RetryEintr([&] { return ::flock(fd, op); }) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return Status::Busy("lock " + path + ": already held by another process");
    }
    return PosixError("flock", path, err);
  }
  *lock = std::make_unique<PosixFileLock>(path, fd);
  return Status::OK();
}

}  // namespace

Env* Env::Posix() {
  static PosixEnv* env = new PosixEnv;
  return env;
}

}  // namespace wizq
