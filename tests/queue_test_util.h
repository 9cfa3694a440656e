// Helpers of the tests of the durable store (tests/queue_*test.cc,
// tests/queue_crash_test.cc, tests/audit_log_test.cc). Header-only: CMake
// builds each tests/*_test.cc with tests/test_util.cc only.
//
// - NoSyncEnv: the POSIX Env without the real fdatasync/fsync calls, which
//   counts the operations FaultInjectionEnv::FailOp targets. The tests
//   repair logs and replay runs hundreds of times, and lose no power in
//   them (power loss is FaultInjectionEnv's job, which keeps its own account
//   of what is durable when it runs on top of this one).
// - MakeTask: a NewTask in one line.
// - ReplayFromDisk: the state recorded in a `.wizard` rebuilt from its files
//   without the Queue, to compare with what the Queue says.
#ifndef WIZQ_TESTS_QUEUE_TEST_UTIL_H_
#define WIZQ_TESTS_QUEUE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "audit/log.h"
#include "fs/env.h"
#include "fs/fault_env.h"
#include "queue/dir/snapshot.h"
#include "queue/dir/state.h"
#include "queue/task.h"
#include "tests/test_util.h"
#include "util/status.h"

namespace wizq::test {

// The POSIX Env without real syncs, counting writes, syncs and renames.
class NoSyncEnv : public EnvWrapper {
 public:
  NoSyncEnv() : EnvWrapper(Env::Posix()) {}

  // Operations of `kind` so far (kSync counts file and directory syncs,
  // kAny all three kinds).
  int64_t count(FaultInjectionEnv::OpKind kind) const {
    switch (kind) {
      case FaultInjectionEnv::kWrite:
        return writes_;
      case FaultInjectionEnv::kSync:
        return syncs_;
      case FaultInjectionEnv::kRename:
        return renames_;
      default:
        return writes_ + syncs_ + renames_;
    }
  }

  Status NewAppendableFile(const std::string& path,
                           std::unique_ptr<WritableFile>* result) override {
    std::unique_ptr<WritableFile> f;
    WIZQ_RETURN_IF_ERROR(target()->NewAppendableFile(path, &f));
    *result = std::make_unique<File>(this, std::move(f));
    return Status::OK();
  }
  Status NewRandomRWFile(const std::string& path,
                         std::unique_ptr<RandomRWFile>* result) override {
    std::unique_ptr<RandomRWFile> f;
    WIZQ_RETURN_IF_ERROR(target()->NewRandomRWFile(path, &f));
    *result = std::make_unique<RWFile>(this, std::move(f));
    return Status::OK();
  }
  Status NewWritableFile(const std::string& path,
                         std::unique_ptr<WritableFile>* result) override {
    std::unique_ptr<WritableFile> f;
    WIZQ_RETURN_IF_ERROR(target()->NewWritableFile(path, &f));
    *result = std::make_unique<File>(this, std::move(f));
    return Status::OK();
  }
  Status RenameFile(const std::string& f, const std::string& t) override {
    renames_++;
    return target()->RenameFile(f, t);
  }
  Status SyncDir(const std::string& p) override {
    syncs_++;
    return FileExists(p) ? Status::OK() : target()->SyncDir(p);
  }

 private:
  // Counts appends and syncs; Sync does nothing.
  class File : public WritableFile {
   public:
    File(NoSyncEnv* env, std::unique_ptr<WritableFile> base)
        : env_(env), base_(std::move(base)) {}
    Status Append(std::string_view d) override {
      env_->writes_++;
      return base_->Append(d);
    }
    Status Sync() override {
      env_->syncs_++;
      return Status::OK();
    }
    Status Truncate(uint64_t s) override { return base_->Truncate(s); }
    Status Close() override { return base_->Close(); }
    const std::string& path() const override { return base_->path(); }

   private:
    NoSyncEnv* env_;
    std::unique_ptr<WritableFile> base_;
  };

  // Counts writes and syncs; Sync does nothing.
  class RWFile : public RandomRWFile {
   public:
    RWFile(NoSyncEnv* env, std::unique_ptr<RandomRWFile> base)
        : env_(env), base_(std::move(base)) {}
    Status Read(uint64_t o, size_t n, std::string* d) override {
      return base_->Read(o, n, d);
    }
    Status Write(uint64_t o, std::string_view d) override {
      env_->writes_++;
      return base_->Write(o, d);
    }
    Status Sync() override {
      env_->syncs_++;
      return Status::OK();
    }
    Status Size(uint64_t* s) override { return base_->Size(s); }
    Status Truncate(uint64_t s) override { return base_->Truncate(s); }
    Status Close() override { return base_->Close(); }
    const std::string& path() const override { return base_->path(); }

   private:
    NoSyncEnv* env_;
    std::unique_ptr<RandomRWFile> base_;
  };

  int64_t writes_ = 0, syncs_ = 0, renames_ = 0;
};

// A NewTask; what is not given is as NewTask's defaults.
inline NewTask MakeTask(const std::string& type, const std::string& inputs,
                        int64_t parent = 0, int max_attempts = 1,
                        Origin origin = Origin::kSpawned,
                        bool has_finally = false, int64_t finally_for = 0) {
  NewTask t;
  t.type = type;
  t.inputs = inputs;
  t.parent_id = parent;
  t.origin = origin;
  t.max_attempts = max_attempts;
  t.has_finally = has_finally;
  t.finally_for = finally_for;
  return t;
}

// Rebuilds into *state (which must be fresh) the state recorded in `wizard`:
// queue.json (when `use_snapshot`), then the audit events after it, or the
// whole log. Returns "" on success, else what failed ("snapshot: ...",
// "log: ..." or "event: ...").
inline std::string ReplayFromDisk(const std::string& wizard, bool use_snapshot,
                                  QueueState* state) {
  uint64_t offset = 0;
  if (use_snapshot) {
    SnapshotHeader header;
    Status s = DecodeSnapshot(wizard + "/queue.json",
                              ReadAll(wizard + "/queue.json"), &header, state);
    if (!s.ok()) return "snapshot: " + s.ToString();
    offset = header.audit_offset;
  }
  const std::string path = wizard + "/audit.jsonl";
  const std::string data = ReadAll(path).substr(offset);
  LogParseResult parsed;
  Status s = ParseLog(path, data, offset, state->last_seq() + 1, &parsed);
  if (!s.ok()) return "log: " + s.ToString();
  for (const LogRecord& r : parsed.records) {
    s = state->ApplyEvent(r.line);
    if (!s.ok()) return "event: " + s.ToString();
  }
  return "";
}

}  // namespace wizq::test

#endif  // WIZQ_TESTS_QUEUE_TEST_UTIL_H_
