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

  // Reads the whole file, or from `offset` to its end. The POSIX Env reads
  // it into one buffer with at least kReadSlack zero bytes allocated after
  // the data (data->capacity() >= size + kReadSlack), so that a parser
  // which reads past the end (simdjson) can parse it in place.
  static constexpr size_t kReadSlack = 64;
  virtual Status ReadFile(const std::string& path, std::string* data) = 0;
  virtual Status ReadFileFrom(const std::string& path, uint64_t offset,
                              std::string* data) = 0;
  virtual bool FileExists(const std::string& path) = 0;
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

  virtual uint64_t NowMicros() = 0;

  // Writes `data` to `path` atomically and durably: write `path`.tmp,
  // fsync it, rename over `path`, fsync the directory.
  Status WriteFileAtomic(const std::string& path, std::string_view data);
};

// The directory part of a path ("." if none).
std::string DirName(const std::string& path);

}  // namespace wizq

#endif  // WIZQ_FS_ENV_H_
