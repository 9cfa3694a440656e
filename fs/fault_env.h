// FaultInjectionEnv: an Env for tests that wraps a real Env (normally
// Env::Posix() on a scratch directory) and simulates what the disk and the
// kernel can do to wizq:
//
//  - a crash at the k-th mutating operation: that operation is not
//    performed (an Append may leave a torn prefix) and every operation after
//    it, reads included, fails with "simulated crash";
//  - a power loss (DropUnsyncedData): bytes appended since a file's last
//    Sync are dropped, and directory entries (files and directories created,
//    renames, removals) not followed by a SyncDir of their directory are
//    undone, newest first — a rename that replaced a file brings back that
//    file's synced content;
//  - I/O errors (FailOp): the n-th write, sync or rename fails with ENOSPC
//    or EIO, once or from then on.
//
// Mutating operations, counted from 1 since construction or the last
// ResetState(): NewAppendableFile, NewWritableFile, WritableFile::Append,
// ::Sync, ::Truncate, TruncateFile, RenameFile, RemoveFile, CreateDir,
// SyncDir and LockFile. NewAppendableFile and CreateDir count one more op,
// a SyncDir of the parent, when they create the entry (the POSIX Env syncs
// the parent itself), so a crash between the two leaves it undurable.
//
// The env tracks every file written through it by path; files changed
// behind its back keep their tracked state. Use one env per scratch
// directory. Thread-safe; a WritableFile must be used by one thread at a
// time, and must not outlive its env.
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
  // What FailOp targets. kSync covers WritableFile::Sync and SyncDir;
  // kAny every mutating operation.
  enum OpKind { kWrite, kSync, kRename, kAny };

  // `base` must outlive this env.
  explicit FaultInjectionEnv(Env* base);
  ~FaultInjectionEnv() override;
  FaultInjectionEnv(const FaultInjectionEnv&) = delete;
  FaultInjectionEnv& operator=(const FaultInjectionEnv&) = delete;

  // The k-th mutating operation (k >= 1, numbered like op_count()) crashes.
  // 0 disables.
  void CrashAtOp(int64_t k);
  // When on, an Append that crashes or gets an injected error first writes
  // a strict prefix of its data (random length, at least one byte when the
  // data has two or more). Kept across ResetState().
  void SetTornWrites(bool torn);
  bool crashed() const;
  // Mutating operations attempted since construction or ResetState(),
  // including the one that crashed or failed by injection.
  int64_t op_count() const;

  // Simulates a power loss as described above, then ResetState(). Works
  // whether or not the env has crashed. Open WritableFiles stay usable.
  Status DropUnsyncedData();

  // The nth operation of `kind` counted from this call (1-based) fails with
  // IOErrorFromErrno(op, path, err) and has no effect (except a torn
  // Append prefix); with `persistent`, so does every later one until
  // ClearFaults() or ResetState(). Several faults may be armed at once.
  void FailOp(OpKind kind, int64_t nth, int err, bool persistent);
  void ClearFaults();
  // Clears the crash point and flag, the faults and op_count().
  void ResetState();

  // Env:
  Status NewAppendableFile(const std::string& path,
                           std::unique_ptr<WritableFile>* result) override;
  Status NewWritableFile(const std::string& path,
                         std::unique_ptr<WritableFile>* result) override;
  Status ReadFile(const std::string& path, std::string* data) override;
  Status ReadFileFrom(const std::string& path, uint64_t offset,
                      std::string* data) override;
  bool FileExists(const std::string& path) override;
  Status GetFileSize(const std::string& path, uint64_t* size) override;
  Status TruncateFile(const std::string& path, uint64_t size) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status CreateDir(const std::string& path, int mode) override;
  Status SyncDir(const std::string& path) override;
  Status ListDir(const std::string& path,
                 std::vector<std::string>* names) override;
  Status LockFile(const std::string& path, bool wait,
                  std::unique_ptr<FileLock>* lock) override;
  uint64_t NowMicros() override;

 private:
  friend class FaultWritableFile;

  // What a power loss leaves of a file written through this env.
  struct FileState {
    uint64_t size = 0;         // bytes written through this env
    uint64_t synced_size = 0;  // bytes durable after the last Sync
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
  Status SyncedContent(const std::string& path, std::string* content);
  Status SyncDirLocked(const std::string& path);
  Status RestoreFile(const std::string& path, const std::string& content);
  Status UndoDirOp(const DirOp& op);
  void ResetLocked();

  // Called by FaultWritableFile.
  Status FileAppend(WritableFile* base, FileState* state,
                    std::string_view data);
  Status FileSync(WritableFile* base, FileState* state);
  Status FileTruncate(WritableFile* base, FileState* state, uint64_t size);
  Status FileClose(WritableFile* base);

  Env* const base_;
  mutable std::mutex mu_;
  bool torn_writes_ = false;
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
