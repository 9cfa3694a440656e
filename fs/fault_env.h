// FaultInjectionEnv: an Env for tests that wraps a real Env (normally
// Env::Posix() on a scratch directory) and simulates what the disk and the
// kernel can do to wizq:
//
//  - a crash at the k-th mutating operation: that operation is not
//    performed (an Append or a RandomRWFile::Write may leave a torn prefix)
//    and every operation after it, reads included, fails with "simulated
//    crash";
//  - a power loss (DropUnsyncedData): bytes written since a file's last
//    Sync are dropped — bytes appended (or written past the synced size) are
//    cut off, and synced bytes overwritten in place by RandomRWFile::Write
//    get their synced content back — and directory entries (files and
//    directories created, renames, removals) not followed by a SyncDir of
//    their directory are undone, newest first — a rename that replaced a
//    file brings back that file's synced content;
//  - a partial power loss (SetPartialPowerLoss): as above, except that the
//    disk is taken to have persisted an arbitrary subset of the unsynced
//    512-byte sectors, as a disk that reorders its writes can. Each
//    512-byte-aligned sector of the synced part of a file that was
//    overwritten since the last Sync ends up with one of the contents it
//    had since then, the newest with probability 1/2, each older one with
//    half the probability of the one after it, the synced content with what
//    is left. Past the synced size the file keeps a random length L
//    between the synced size and its size, and each 512-byte-aligned
//    sector (or piece of one) of [synced size, L) holds either the bytes
//    written or zeros (probability 1/2 each), as ext4 without a journal can
//    leave a grown file whose new blocks were never written. The two parts
//    of a sector that straddles the synced size are decided separately. A
//    file replaced by an unsynced rename or removal still comes back with
//    exactly its synced content;
//  - I/O errors (FailOp): the n-th write, sync or rename fails with ENOSPC
//    or EIO, once or from then on.
//
// Mutating operations, counted from 1 since construction or the last
// ResetState(): NewAppendableFile, NewWritableFile, NewRandomRWFile,
// WritableFile::Append, ::Sync, ::Truncate, RandomRWFile::Write, ::Sync,
// ::Truncate, TruncateFile, RenameFile, RemoveFile, CreateDir, CreateDirs,
// SyncDir, LockFile and OpenDescriptor (every one, read-only too: what is
// done through the raw descriptor is out of the env's sight).
// NewAppendableFile, NewRandomRWFile and CreateDir count one more op, a
// SyncDir of the parent, when they create the entry (the POSIX Env syncs
// the parent itself), so a crash between the two leaves it undurable.
// CreateDirs records each directory it creates as unsynced (a power loss
// removes it unless its parent is synced). Reads (ReadFile, ReadFilePrefix,
// GetFileInfo, RandomRWFile::Read, ::Size, ...) and Close are not counted,
// but fail after a crash.
//
// Files opened by OpenDescriptor are not tracked: a power loss leaves them
// as they are (wizq never syncs them: a task's stdio and running.lock).
//
// The env tracks every file written through it by path; files changed
// behind its back keep their tracked state. Use one env per scratch
// directory. Thread-safe; a WritableFile or RandomRWFile must be used by
// one thread at a time, and must not outlive its env.
#ifndef WIZQ_FS_FAULT_ENV_H_
#define WIZQ_FS_FAULT_ENV_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fs/env.h"

namespace wizq {

class FaultInjectionEnv : public Env {
 public:
  // What FailOp targets. kWrite covers WritableFile::Append and
  // RandomRWFile::Write; kSync the two Syncs and SyncDir; kOpenDescriptor
  // OpenDescriptor; kAny every mutating operation.
  enum OpKind { kWrite, kSync, kRename, kOpenDescriptor, kAny };

  // `base` must outlive this env.
  explicit FaultInjectionEnv(Env* base);
  ~FaultInjectionEnv() override;
  FaultInjectionEnv(const FaultInjectionEnv&) = delete;
  FaultInjectionEnv& operator=(const FaultInjectionEnv&) = delete;

  // The k-th mutating operation (k >= 1, numbered like op_count()) crashes.
  // 0 disables.
  void CrashAtOp(int64_t k);
  // When on, an Append or RandomRWFile::Write that crashes or gets an
  // injected error first writes a strict prefix of its data (random length,
  // at least one byte when the data has two or more). Kept across
  // ResetState().
  void SetTornWrites(bool torn);
  // When on, DropUnsyncedData simulates a partial power loss (see above):
  // unsynced 512-byte sectors survive or not at random. Kept across
  // ResetState().
  void SetPartialPowerLoss(bool on);
  // Seeds the random choices (torn lengths, surviving sectors).
  void SetSeed(uint32_t seed);
  bool crashed() const;
  // Mutating operations attempted since construction or ResetState(),
  // including the one that crashed or failed by injection.
  int64_t op_count() const;

  // Simulates a power loss as described above, then ResetState(). Works
  // whether or not the env has crashed. Open WritableFiles and
  // RandomRWFiles stay usable.
  Status DropUnsyncedData();

  // The nth operation of `kind` counted from this call (1-based) fails with
  // IOErrorFromErrno(op, path, err) and has no effect (except a torn
  // Append or Write prefix); with `persistent`, so does every later one until
  // ClearFaults() or ResetState(). Several faults may be armed at once.
  void FailOp(OpKind kind, int64_t nth, int err, bool persistent);
  void ClearFaults();
  // Clears the crash point and flag, the faults and op_count().
  void ResetState();

  // Env:
  Status NewAppendableFile(const std::string& path,
                           std::unique_ptr<WritableFile>* result) override;
  Status NewRandomRWFile(const std::string& path,
                         std::unique_ptr<RandomRWFile>* result) override;
  Status NewWritableFile(const std::string& path,
                         std::unique_ptr<WritableFile>* result) override;
  Status ReadFile(const std::string& path, std::string* data) override;
  Status ReadFileFrom(const std::string& path, uint64_t offset,
                      std::string* data) override;
  Status ReadFilePrefix(const std::string& path, size_t limit,
                        std::string* data) override;
  Status ReadUserFile(const std::string& path, std::string* data) override;
  bool FileExists(const std::string& path) override;
  Status GetFileInfo(const std::string& path, FileInfo* info) override;
  Status GetFileSize(const std::string& path, uint64_t* size) override;
  Status TruncateFile(const std::string& path, uint64_t size) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status CreateDir(const std::string& path, int mode) override;
  Status CreateDirs(const std::string& path, int mode) override;
  Status SyncDir(const std::string& path) override;
  Status ListDir(const std::string& path,
                 std::vector<std::string>* names) override;
  Status LockFile(const std::string& path, bool wait,
                  std::unique_ptr<FileLock>* lock) override;
  Status OpenDescriptor(const std::string& path, int flags, int* fd) override;
  uint64_t NowMicros() override;

 private:
  friend class FaultWritableFile;
  friend class FaultRandomRWFile;

  // The sector size of the partial power loss.
  static constexpr uint64_t kSectorSize = 512;

  // Synced bytes overwritten in place since the last Sync: what they were
  // before that write.
  struct Undo {
    uint64_t offset;
    std::string old;
  };

  // What a power loss leaves of a file written through this env.
  struct FileState {
    uint64_t size = 0;         // bytes written through this env
    uint64_t synced_size = 0;  // bytes durable after the last Sync
    // Below synced_size, oldest first: applied newest first, they bring
    // back the synced content.
    std::vector<Undo> undo;
  };
  using FilePtr = std::shared_ptr<FileState>;

  // A directory entry change not yet made durable by SyncDir(dir).
  struct DirOp {
    enum Type { kCreateFile, kCreateDir, kRename, kRemove };
    DirOp(Type t, std::string p, std::string f = "")
        : type(t), dir(DirName(p)), path(std::move(p)), from(std::move(f)) {}
    Type type;
    std::string dir;
    std::string path;      // the entry created or removed, or the rename target
    std::string from;      // the rename source
    bool had_old = false;  // a file was replaced or removed: old_content
    std::string old_content;  // its synced bytes
  };

  struct Fault {
    OpKind kind;
    int64_t nth;
    int err;
    bool persistent;
    int64_t seen;
  };

  // All REQUIRE mu_ held.
  Status BeginOp(OpKind kind, std::string_view op, const std::string& path,
                 bool* may_tear = nullptr);
  Status CrashedError(std::string_view op, const std::string& path) const;
  Status CheckNotCrashed(std::string_view op, const std::string& path) const;
  size_t TornLength(size_t len);
  FilePtr Track(const std::string& path, bool existed);
  // Drops what `state`'s undo list holds at or past `size`.
  static void TrimUndo(FileState* state, uint64_t size);
  Status SyncedContent(const std::string& path, std::string* content);
  Status SyncDirLocked(const std::string& path);
  Status RestoreFile(const std::string& path, const std::string& content);
  // The power loss of one tracked file (DropUnsyncedData).
  Status DropFileUnsynced(const std::string& path, FileState* state);
  Status UndoDirOp(const DirOp& op);
  void ResetLocked();

  // Called by FaultWritableFile.
  Status FileAppend(WritableFile* base, FileState* state,
                    std::string_view data);
  Status FileSync(WritableFile* base, FileState* state);
  Status FileTruncate(WritableFile* base, FileState* state, uint64_t size);
  Status FileClose(WritableFile* base);

  // Called by FaultRandomRWFile.
  Status RandomRead(RandomRWFile* base, uint64_t offset, size_t n,
                    std::string* data);
  Status RandomWrite(RandomRWFile* base, FileState* state, uint64_t offset,
                     std::string_view data);
  Status RandomSync(RandomRWFile* base, FileState* state);
  Status RandomSize(RandomRWFile* base, uint64_t* size);
  Status RandomTruncate(RandomRWFile* base, FileState* state, uint64_t size);
  Status RandomClose(RandomRWFile* base);

  Env* const base_;
  mutable std::mutex mu_;
  bool torn_writes_ = false;
  bool partial_power_loss_ = false;
  std::mt19937 rng_;
  int64_t crash_at_ = 0;
  int64_t op_count_ = 0;
  bool crashed_ = false;
  std::vector<Fault> faults_;
  std::map<std::string, FilePtr> files_;  // by normalized path
  std::vector<DirOp> pending_;            // oldest first
};

}  // namespace wizq

#endif  // WIZQ_FS_FAULT_ENV_H_
