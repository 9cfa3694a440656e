// Env: every file operation wizq performs goes through this interface.
//
// The POSIX implementation (Env::Posix()) does the real thing with the
// durability discipline wizq relies on: files opened O_CLOEXEC (and
// O_NOFOLLOW where a path could be swapped for a symlink), fsync of a temp
// file before it is renamed, fsync of the directory after a rename or after
// a file is created in it. Tests substitute FaultInjectionEnv
// (fs/fault_env.h), which can simulate a crash at the k-th operation, a
// power loss (every byte and directory entry not yet synced is dropped) and
// I/O errors (ENOSPC, EIO) on writes, syncs and renames.
//
// The rule: every file system operation on a path goes through an Env —
// opening, reading, writing, stat-ing, creating directories, renaming,
// removing, locking — so that a test Env can fail it, crash at it or drop it
// in a power loss. Outside fs/ no code calls open, fopen, stat, lstat,
// mkdir, rename, unlink, opendir, realpath or the iostreams on a path
// (path resolution is fs/path.h). Two things may stay raw:
//  - system calls on a descriptor an Env handed out (OpenDescriptor,
//    FileLock::fd()): dup2 into a child, flock, fstat, write of a last
//    message to a child's stderr;
//  - inspection of processes through /proc (tasks/proc/orphans.cc,
//    tasks/proc/spawner_state.h, tools/crashtest/*.cc; queue/host.cc and
//    queue/dir/workers.cc stat /proc/self/ns/pid), which reads the kernel's
//    view of processes, not wizq's files.
// Test Envs that change a few operations derive from EnvWrapper, which
// forwards everything else.
//
// Thread-safety: Env methods may be called from several threads at once.
// A single WritableFile or FileLock object must not be.
#ifndef WIZQ_FS_ENV_H_
#define WIZQ_FS_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace wizq {

// A file open for writing. Append writes at the end of the file; nothing is
// durable until Sync() returns OK.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view data) = 0;
  // fdatasync: the data appended so far (and the file size) is durable.
  virtual Status Sync() = 0;
  // Cuts the file to `size` bytes (used to undo a failed append).
  virtual Status Truncate(uint64_t size) = 0;
  virtual Status Close() = 0;
  virtual const std::string& path() const = 0;
};

// A file read and written at explicit offsets (pread/pwrite), for the audit
// log, which is preallocated and then overwritten in place (audit/log.h).
// Nothing written is durable until Sync() returns OK.
class RandomRWFile {
 public:
  virtual ~RandomRWFile() = default;
  // Reads up to `n` bytes at `offset` into `data` (fewer at the end of the
  // file, none past it).
  virtual Status Read(uint64_t offset, size_t n, std::string* data) = 0;
  // Writes `data` at `offset`, growing the file if it reaches past the end.
  virtual Status Write(uint64_t offset, std::string_view data) = 0;
  // fdatasync: the data written so far (and the file size) is durable.
  virtual Status Sync() = 0;
  // The file's current size (fstat).
  virtual Status Size(uint64_t* size) = 0;
  // Cuts the file to `size` bytes. Not durable until Sync().
  virtual Status Truncate(uint64_t size) = 0;
  virtual Status Close() = 0;
  virtual const std::string& path() const = 0;
};

// A held file lock (flock, exclusive), released when the object is
// destroyed. flock locks belong to the open file description:
// closing another descriptor of the same file does not drop them, and two
// opens in one process exclude each other like two processes do.
class FileLock {
 public:
  virtual ~FileLock() = default;
  virtual const std::string& path() const = 0;
  // The descriptor holding the lock, for handing to a child process that
  // should keep the lock held for as long as it lives (-1 if none).
  virtual int fd() const = 0;
};

// What GetFileInfo reports of a path (lstat: a symlink is not followed).
struct FileInfo {
  enum Type { kFile, kDir, kSymlink, kOther };
  Type type = kOther;
  uint64_t size = 0;
  uint32_t uid = 0;  // the owner
  // Identify the file (st_dev, st_ino): two paths or descriptors with the
  // same pair are the same file.
  uint64_t device = 0;
  uint64_t inode = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX Env. Never deleted.
  static Env* Posix();

  // Opens `path` for appending, creating it (mode 0600) if missing; when it
  // was created, the parent directory is fsync'd before this returns.
  virtual Status NewAppendableFile(const std::string& path,
                                   std::unique_ptr<WritableFile>* result) = 0;
  // Opens `path` for reading and writing at offsets, creating it (mode 0600)
  // if missing; when it was created, the parent directory is fsync'd before
  // this returns.
  virtual Status NewRandomRWFile(const std::string& path,
                                 std::unique_ptr<RandomRWFile>* result) = 0;
  // Creates or truncates `path` (mode 0600) for writing from the start. The
  // caller syncs the file and renames it into place (see WriteFileAtomic).
  virtual Status NewWritableFile(const std::string& path,
                                 std::unique_ptr<WritableFile>* result) = 0;
  // Creates or truncates a file the user named for wizq to write its output
  // to (`wizq report -o FILE`): mode 0666 less the umask, as any tool's
  // output, and following a symlink, as ReadUserFile does. Never one of
  // wizq's own files. By default NewWritableFile (a test Env's files).
  virtual Status NewUserFile(const std::string& path,
                             std::unique_ptr<WritableFile>* result) {
    return NewWritableFile(path, result);
  }

  // Reads the whole file, or from `offset` to its end. The POSIX Env reads
  // it into one buffer with at least kReadSlack zero bytes allocated after
  // the data (data->capacity() >= size + kReadSlack), so that a parser
  // which reads past the end (simdjson) can parse it in place.
  static constexpr size_t kReadSlack = 64;
  virtual Status ReadFile(const std::string& path, std::string* data) = 0;
  virtual Status ReadFileFrom(const std::string& path, uint64_t offset,
                              std::string* data) = 0;
  // Reads at most `limit` bytes from the start of the file (the file may be
  // much larger: a task's stdout). No read slack is promised.
  virtual Status ReadFilePrefix(const std::string& path, size_t limit,
                                std::string* data) = 0;
  // Reads the whole file like ReadFile, but follows symlinks and reads
  // sequentially to EOF, so a pipe or FIFO works (`--input-file <(...)`):
  // only for a file the user names on the command line (--input-file),
  // never for wizq's own files. No read slack is promised.
  virtual Status ReadUserFile(const std::string& path, std::string* data) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  // lstat(2) of `path`. NotFound if it does not exist.
  virtual Status GetFileInfo(const std::string& path, FileInfo* info) = 0;
  virtual Status GetFileSize(const std::string& path, uint64_t* size) = 0;
  // Cuts a closed file to `size` bytes and syncs it.
  virtual Status TruncateFile(const std::string& path, uint64_t size) = 0;

  // rename(2). Not durable until SyncDir of the target's directory.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Removes a file (only ever used for worker entries and temp files).
  virtual Status RemoveFile(const std::string& path) = 0;
  // mkdir with `mode` if missing, then fsync of the parent (OK if it exists
  // as a real directory; an error if it is a symlink or not a directory).
  virtual Status CreateDir(const std::string& path, int mode) = 0;
  // mkdir -p with `mode` for each missing component, without any fsync: for
  // directories nothing durable depends on (a task's output directory). OK
  // if `path` already exists, whatever it is: check it with GetFileInfo.
  virtual Status CreateDirs(const std::string& path, int mode) = 0;
  // fsync of a directory: the entries created or renamed in it are durable.
  virtual Status SyncDir(const std::string& path) = 0;
  // Names in a directory, without "." and "..", sorted.
  virtual Status ListDir(const std::string& path,
                         std::vector<std::string>* names) = 0;

  // Takes an exclusive lock on `path` (created 0600 if missing, never
  // renamed). With `wait` false returns Busy at once if another holder has
  // it.
  virtual Status LockFile(const std::string& path, bool wait,
                          std::unique_ptr<FileLock>* lock) = 0;

  // Opens `path` with open(2) `flags` (mode 0600 when created), adding
  // O_CLOEXEC and O_NOFOLLOW, and returns the raw descriptor in *fd (above
  // 2, so that it cannot collide with a child's stdin/stdout/stderr), which
  // the caller owns and closes. Only for descriptors that cannot be a File
  // object: those dup2'd into a child process (a task's stdio files, the
  // running.lock its process tree inherits) and that lock's flock. NotFound
  // if `path` is missing and `flags` lack O_CREAT.
  virtual Status OpenDescriptor(const std::string& path, int flags,
                                int* fd) = 0;

  virtual uint64_t NowMicros() = 0;

  // Writes `data` to `path` atomically and durably: write `path`.tmp,
  // fsync it, rename over `path`, fsync the directory.
  Status WriteFileAtomic(const std::string& path, std::string_view data);
};

// An Env that forwards every call to another Env (LevelDB's EnvWrapper): a
// test Env derives from it and overrides only what it changes.
class EnvWrapper : public Env {
 public:
  // `target` must outlive this wrapper.
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  Status NewAppendableFile(const std::string& path,
                           std::unique_ptr<WritableFile>* result) override {
    return target_->NewAppendableFile(path, result);
  }
  Status NewRandomRWFile(const std::string& path,
                         std::unique_ptr<RandomRWFile>* result) override {
    return target_->NewRandomRWFile(path, result);
  }
  Status NewWritableFile(const std::string& path,
                         std::unique_ptr<WritableFile>* result) override {
    return target_->NewWritableFile(path, result);
  }
  Status NewUserFile(const std::string& path,
                     std::unique_ptr<WritableFile>* result) override {
    return target_->NewUserFile(path, result);
  }
  Status ReadFile(const std::string& path, std::string* data) override {
    return target_->ReadFile(path, data);
  }
  Status ReadFileFrom(const std::string& path, uint64_t offset,
                      std::string* data) override {
    return target_->ReadFileFrom(path, offset, data);
  }
  Status ReadFilePrefix(const std::string& path, size_t limit,
                        std::string* data) override {
    return target_->ReadFilePrefix(path, limit, data);
  }
  Status ReadUserFile(const std::string& path, std::string* data) override {
    return target_->ReadUserFile(path, data);
  }
  bool FileExists(const std::string& path) override {
    return target_->FileExists(path);
  }
  Status GetFileInfo(const std::string& path, FileInfo* info) override {
    return target_->GetFileInfo(path, info);
  }
  Status GetFileSize(const std::string& path, uint64_t* size) override {
    return target_->GetFileSize(path, size);
  }
  Status TruncateFile(const std::string& path, uint64_t size) override {
    return target_->TruncateFile(path, size);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    return target_->RenameFile(from, to);
  }
  Status RemoveFile(const std::string& path) override {
    return target_->RemoveFile(path);
  }
  Status CreateDir(const std::string& path, int mode) override {
    return target_->CreateDir(path, mode);
  }
  Status CreateDirs(const std::string& path, int mode) override {
    return target_->CreateDirs(path, mode);
  }
  Status SyncDir(const std::string& path) override {
    return target_->SyncDir(path);
  }
  Status ListDir(const std::string& path,
                 std::vector<std::string>* names) override {
    return target_->ListDir(path, names);
  }
  Status LockFile(const std::string& path, bool wait,
                  std::unique_ptr<FileLock>* lock) override {
    return target_->LockFile(path, wait, lock);
  }
  Status OpenDescriptor(const std::string& path, int flags, int* fd) override {
    return target_->OpenDescriptor(path, flags, fd);
  }
  uint64_t NowMicros() override { return target_->NowMicros(); }

 private:
  Env* const target_;
};

// The directory part of a path ("." if none).
std::string DirName(const std::string& path);

}  // namespace wizq

#endif  // WIZQ_FS_ENV_H_
