#include "fs/fault_env.h"

#include <errno.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using test::ReadAll;
using test::ScratchDir;
using test::WriteAll;

bool Contains(const Status& s, const std::string& part) {
  return s.message().find(part) != std::string::npos;
}

class FaultEnvTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.Join(name); }

  // Creates `name` holding `data`, synced and with its entry durable.
  void WriteDurable(const std::string& name, const std::string& data) {
    std::unique_ptr<WritableFile> file;
    ASSERT_TRUE(env_.NewWritableFile(Path(name), &file).ok());
    ASSERT_TRUE(file->Append(data).ok());
    ASSERT_TRUE(file->Sync().ok());
    ASSERT_TRUE(file->Close().ok());
    ASSERT_TRUE(env_.SyncDir(dir_.path()).ok());
  }

  // Opens `name` for appending (the file stays open in file_).
  void OpenLog(const std::string& name) {
    ASSERT_TRUE(env_.NewAppendableFile(Path(name), &file_).ok());
  }

  // Opens `name` for reading and writing at offsets (stays open in rw_).
  void OpenRW(const std::string& name) {
    ASSERT_TRUE(env_.NewRandomRWFile(Path(name), &rw_).ok());
  }

  // Opens `name` with rw_ holding `data`, synced and with its entry durable.
  void SyncedRW(const std::string& name, const std::string& data) {
    OpenRW(name);
    ASSERT_TRUE(rw_->Write(0, data).ok());
    ASSERT_TRUE(rw_->Sync().ok());
  }

  ScratchDir dir_;
  FaultInjectionEnv env_{Env::Posix()};
  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<RandomRWFile> rw_;
};

TEST_F(FaultEnvTest, CountsMutatingOperations) {
  OpenLog("log");                        // open + SyncDir: 2
  ASSERT_TRUE(file_->Append("a").ok());  // 3
  ASSERT_TRUE(file_->Sync().ok());       // 4
  ASSERT_TRUE(file_->Close().ok());      // not counted
  std::string data;
  ASSERT_TRUE(env_.ReadFile(Path("log"), &data).ok());           // not counted
  OpenLog("log");                                                // exists: 5
  ASSERT_TRUE(env_.RenameFile(Path("log"), Path("log2")).ok());  // 6
  EXPECT_EQ(6, env_.op_count());
  env_.ResetState();
  EXPECT_EQ(0, env_.op_count());
}

TEST_F(FaultEnvTest, CrashAtOpSkipsItAndFailsEverythingAfter) {
  OpenLog("log");
  env_.CrashAtOp(4);
  ASSERT_TRUE(file_->Append("one").ok());  // 3
  Status s = file_->Append("two");         // 4: crashes
  EXPECT_TRUE(s.IsIOError());
  EXPECT_TRUE(Contains(s, "simulated crash")) << s.ToString();
  EXPECT_TRUE(env_.crashed());
  EXPECT_EQ(4, env_.op_count());
  EXPECT_EQ("one", ReadAll(Path("log")));  // Op 4 was not performed.

  EXPECT_TRUE(Contains(file_->Append("three"), "simulated crash"));
  EXPECT_FALSE(file_->Sync().ok());
  EXPECT_FALSE(file_->Close().ok());
  std::string data;
  EXPECT_TRUE(Contains(env_.ReadFile(Path("log"), &data), "simulated crash"));
  std::vector<std::string> names;
  EXPECT_FALSE(env_.ListDir(dir_.path(), &names).ok());
  EXPECT_FALSE(env_.FileExists(Path("log")));
  EXPECT_FALSE(env_.WriteFileAtomic(Path("q"), "x").ok());
  std::unique_ptr<FileLock> lock;
  EXPECT_FALSE(env_.LockFile(Path("lock"), false, &lock).ok());
  EXPECT_EQ("one", ReadAll(Path("log")));
  EXPECT_EQ("", ReadAll(Path("q")));
  EXPECT_EQ(4, env_.op_count());  // Nothing after the crash is counted.

  env_.ResetState();
  EXPECT_FALSE(env_.crashed());
  EXPECT_TRUE(env_.ReadFile(Path("log"), &data).ok());
}

TEST_F(FaultEnvTest, CrashBetweenCreateAndDirSyncLosesNewFile) {
  env_.CrashAtOp(2);  // The SyncDir inside NewAppendableFile.
  EXPECT_FALSE(env_.NewAppendableFile(Path("log"), &file_).ok());
  EXPECT_TRUE(env_.crashed());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_FALSE(env_.FileExists(Path("log")));
}

TEST_F(FaultEnvTest, CrashBetweenMkdirAndParentSyncLosesDir) {
  env_.CrashAtOp(2);
  EXPECT_FALSE(env_.CreateDir(Path("sub"), 0700).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_FALSE(env_.FileExists(Path("sub")));

  ASSERT_TRUE(env_.CreateDir(Path("sub"), 0700).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_TRUE(env_.FileExists(Path("sub")));
}

TEST_F(FaultEnvTest, DropUnsyncedDataTruncatesToLastSync) {
  OpenLog("log");
  ASSERT_TRUE(file_->Append("synced|").ok());
  ASSERT_TRUE(file_->Sync().ok());
  ASSERT_TRUE(file_->Append("lost").ok());
  EXPECT_EQ("synced|lost", ReadAll(Path("log")));
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("synced|", ReadAll(Path("log")));

  // Tracking survives close and reopen.
  ASSERT_TRUE(file_->Close().ok());
  OpenLog("log");
  ASSERT_TRUE(file_->Append("again").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("synced|", ReadAll(Path("log")));
}

TEST_F(FaultEnvTest, DropUnsyncedDataEmptiesNeverSyncedFile) {
  OpenLog("log");  // Created and its entry synced, data never synced.
  ASSERT_TRUE(file_->Append("abc").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_TRUE(env_.FileExists(Path("log")));
  EXPECT_EQ("", ReadAll(Path("log")));
}

TEST_F(FaultEnvTest, PreexistingContentCountsAsSynced) {
  WriteAll(Path("log"), "before|");
  OpenLog("log");
  ASSERT_TRUE(file_->Append("after").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("before|", ReadAll(Path("log")));
}

TEST_F(FaultEnvTest, DropUnsyncedDataDeletesFileCreatedWithoutDirSync) {
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_.NewWritableFile(Path("new"), &file).ok());
  ASSERT_TRUE(file->Append("data").ok());
  ASSERT_TRUE(file->Sync().ok());
  ASSERT_TRUE(file->Close().ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_FALSE(env_.FileExists(Path("new")));
}

TEST_F(FaultEnvTest, DropUnsyncedDataKeepsFileAfterDirSync) {
  WriteDurable("new", "data");
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("data", ReadAll(Path("new")));
}

TEST_F(FaultEnvTest, DropUnsyncedDataUndoesRenameRestoringReplacedFile) {
  WriteDurable("queue.json", "old");
  WriteDurable("queue.json.tmp", "new");
  ASSERT_TRUE(env_.RenameFile(Path("queue.json.tmp"), Path("queue.json")).ok());
  EXPECT_EQ("new", ReadAll(Path("queue.json")));
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("old", ReadAll(Path("queue.json")));
  EXPECT_EQ("new", ReadAll(Path("queue.json.tmp")));
}

TEST_F(FaultEnvTest, RestoredReplacedFileHasOnlyItsSyncedContent) {
  OpenLog("target");
  ASSERT_TRUE(file_->Append("synced").ok());
  ASSERT_TRUE(file_->Sync().ok());
  ASSERT_TRUE(file_->Append("+unsynced").ok());
  WriteDurable("src", "src");
  ASSERT_TRUE(env_.RenameFile(Path("src"), Path("target")).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("synced", ReadAll(Path("target")));
  EXPECT_EQ("src", ReadAll(Path("src")));
}

TEST_F(FaultEnvTest, DropUnsyncedDataKeepsRenameFollowedByDirSync) {
  WriteDurable("queue.json", "old");
  WriteDurable("queue.json.tmp", "new");
  ASSERT_TRUE(env_.RenameFile(Path("queue.json.tmp"), Path("queue.json")).ok());
  ASSERT_TRUE(env_.SyncDir(dir_.path()).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("new", ReadAll(Path("queue.json")));
  EXPECT_FALSE(env_.FileExists(Path("queue.json.tmp")));
}

TEST_F(FaultEnvTest, RenamedFileKeepsItsSyncedSize) {
  OpenLog("a");
  ASSERT_TRUE(file_->Append("keep").ok());
  ASSERT_TRUE(file_->Sync().ok());
  ASSERT_TRUE(file_->Append("drop").ok());
  ASSERT_TRUE(env_.RenameFile(Path("a"), Path("b")).ok());
  ASSERT_TRUE(env_.SyncDir(dir_.path()).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("keep", ReadAll(Path("b")));
}

TEST_F(FaultEnvTest, DropUnsyncedDataUndoesUnsyncedRemove) {
  WriteDurable("worker", "pid 7");
  ASSERT_TRUE(env_.RemoveFile(Path("worker")).ok());
  EXPECT_FALSE(env_.FileExists(Path("worker")));
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("pid 7", ReadAll(Path("worker")));

  ASSERT_TRUE(env_.RemoveFile(Path("worker")).ok());
  ASSERT_TRUE(env_.SyncDir(dir_.path()).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_FALSE(env_.FileExists(Path("worker")));
}

TEST_F(FaultEnvTest, DropUnsyncedDataMakesEnvUsableAgain) {
  OpenLog("log");
  env_.CrashAtOp(env_.op_count() + 1);
  EXPECT_FALSE(file_->Append("x").ok());
  ASSERT_TRUE(env_.crashed());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_FALSE(env_.crashed());
  EXPECT_EQ(0, env_.op_count());
  EXPECT_TRUE(file_->Append("y").ok());
  EXPECT_EQ("y", ReadAll(Path("log")));
}

// Every crash point of WriteFileAtomic leaves the old content and no temp
// file after a power loss; with no crash the new content is durable.
TEST_F(FaultEnvTest, WriteFileAtomicIsAtomicAtEveryCrashPoint) {
  const std::string path = Path("queue.json");
  ASSERT_TRUE(env_.WriteFileAtomic(path, "old").ok());
  env_.ResetState();
  ASSERT_TRUE(env_.WriteFileAtomic(path, "new").ok());
  const int64_t ops = env_.op_count();
  ASSERT_GE(ops, 5);
  ASSERT_TRUE(env_.WriteFileAtomic(path, "old").ok());
  for (int64_t k = 1; k <= ops; k++) {
    SCOPED_TRACE("crash at op " + std::to_string(k));
    env_.ResetState();
    env_.CrashAtOp(k);
    EXPECT_FALSE(env_.WriteFileAtomic(path, "new").ok());
    EXPECT_TRUE(env_.crashed());
    ASSERT_TRUE(env_.DropUnsyncedData().ok());
    EXPECT_EQ("old", ReadAll(path));
    EXPECT_FALSE(env_.FileExists(path + ".tmp"));
  }
  ASSERT_TRUE(env_.WriteFileAtomic(path, "new").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("new", ReadAll(path));
}

TEST_F(FaultEnvTest, FailWriteOnceWithEnospc) {
  OpenLog("log");
  env_.FailOp(FaultInjectionEnv::kWrite, 1, ENOSPC, false);
  Status s = file_->Append("abc");
  EXPECT_TRUE(s.IsIOError());
  EXPECT_TRUE(Contains(s, "No space left")) << s.ToString();
  EXPECT_TRUE(Contains(s, Path("log"))) << s.ToString();
  EXPECT_EQ("", ReadAll(Path("log")));
  EXPECT_TRUE(file_->Append("def").ok());
  EXPECT_TRUE(file_->Append("ghi").ok());
  EXPECT_EQ("defghi", ReadAll(Path("log")));
  EXPECT_FALSE(env_.crashed());
}

TEST_F(FaultEnvTest, FailNthWritePersistently) {
  OpenLog("log");
  env_.FailOp(FaultInjectionEnv::kWrite, 2, EIO, true);
  EXPECT_TRUE(file_->Sync().ok());  // Not a write: not counted.
  EXPECT_TRUE(file_->Append("1").ok());
  Status s = file_->Append("2");
  EXPECT_TRUE(Contains(s, "Input/output error")) << s.ToString();
  EXPECT_FALSE(file_->Append("3").ok());
  EXPECT_FALSE(file_->Append("4").ok());
  EXPECT_TRUE(file_->Sync().ok());
  env_.ClearFaults();
  EXPECT_TRUE(file_->Append("5").ok());
  EXPECT_EQ("15", ReadAll(Path("log")));
}

TEST_F(FaultEnvTest, FailedSyncLeavesDataUnsynced) {
  OpenLog("log");
  ASSERT_TRUE(file_->Append("a").ok());
  ASSERT_TRUE(file_->Sync().ok());
  env_.FailOp(FaultInjectionEnv::kSync, 1, EIO, false);
  ASSERT_TRUE(file_->Append("b").ok());
  Status s = file_->Sync();
  EXPECT_TRUE(s.IsIOError());
  EXPECT_TRUE(Contains(s, Path("log"))) << s.ToString();
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("a", ReadAll(Path("log")));
}

TEST_F(FaultEnvTest, SyncFailureOnceThenSucceeds) {
  OpenLog("log");
  ASSERT_TRUE(file_->Append("a").ok());
  env_.FailOp(FaultInjectionEnv::kSync, 1, EIO, false);
  EXPECT_FALSE(file_->Sync().ok());
  EXPECT_TRUE(file_->Sync().ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("a", ReadAll(Path("log")));
}

TEST_F(FaultEnvTest, PersistentSyncFailureCoversSyncDir) {
  env_.FailOp(FaultInjectionEnv::kSync, 1, EIO, true);
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_.NewWritableFile(Path("f"), &file).ok());
  ASSERT_TRUE(file->Append("x").ok());
  EXPECT_FALSE(file->Sync().ok());
  Status s = env_.SyncDir(dir_.path());
  EXPECT_TRUE(s.IsIOError());
  EXPECT_TRUE(Contains(s, dir_.path())) << s.ToString();
  EXPECT_FALSE(env_.NewAppendableFile(Path("g"), &file).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());  // Also clears the fault.
  EXPECT_FALSE(env_.FileExists(Path("f")));
  EXPECT_FALSE(env_.FileExists(Path("g")));
  EXPECT_TRUE(env_.SyncDir(dir_.path()).ok());
}

TEST_F(FaultEnvTest, FailRenameOnceAndPersistently) {
  WriteDurable("a", "A");
  env_.FailOp(FaultInjectionEnv::kRename, 1, ENOSPC, false);
  Status s = env_.RenameFile(Path("a"), Path("b"));
  EXPECT_TRUE(Contains(s, "No space left")) << s.ToString();
  EXPECT_TRUE(Contains(s, Path("a"))) << s.ToString();
  EXPECT_TRUE(env_.FileExists(Path("a")));
  EXPECT_FALSE(env_.FileExists(Path("b")));
  ASSERT_TRUE(env_.RenameFile(Path("a"), Path("b")).ok());

  env_.FailOp(FaultInjectionEnv::kRename, 1, EIO, true);
  EXPECT_FALSE(env_.RenameFile(Path("b"), Path("c")).ok());
  EXPECT_FALSE(env_.RenameFile(Path("b"), Path("c")).ok());
  EXPECT_FALSE(env_.WriteFileAtomic(Path("q"), "x").ok());
  EXPECT_EQ("A", ReadAll(Path("b")));
  EXPECT_FALSE(env_.FileExists(Path("q")));
  EXPECT_FALSE(env_.FileExists(Path("q.tmp")));
  env_.ClearFaults();
  EXPECT_TRUE(env_.RenameFile(Path("b"), Path("c")).ok());
}

TEST_F(FaultEnvTest, FailAnyCountsEveryMutatingOp) {
  env_.FailOp(FaultInjectionEnv::kAny, 3, EIO, false);
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_.NewWritableFile(Path("f"), &file).ok());  // 1
  ASSERT_TRUE(file->Append("x").ok());                       // 2
  EXPECT_FALSE(file->Sync().ok());                           // 3
  EXPECT_TRUE(file->Sync().ok());
}

TEST_F(FaultEnvTest, TornAppendOnCrashWritesStrictPrefix) {
  const std::string data = "0123456789abcdef";
  for (int i = 0; i < 5; i++) {
    ScratchDir dir;
    FaultInjectionEnv env(Env::Posix());
    env.SetTornWrites(true);
    std::unique_ptr<WritableFile> file;
    ASSERT_TRUE(env.NewAppendableFile(dir.Join("log"), &file).ok());
    env.CrashAtOp(env.op_count() + 1 + i);
    for (int j = 0; j < i; j++) ASSERT_TRUE(file->Append(data).ok());
    EXPECT_FALSE(file->Append(data).ok());
    const std::string got = ReadAll(dir.Join("log"));
    const std::string prefix = got.substr(data.size() * i);
    EXPECT_GT(prefix.size(), 0u);
    EXPECT_LT(prefix.size(), data.size());
    EXPECT_EQ(data.substr(0, prefix.size()), prefix);
  }
}

TEST_F(FaultEnvTest, NoTornWriteUnlessEnabled) {
  OpenLog("log");
  env_.CrashAtOp(env_.op_count() + 1);
  EXPECT_FALSE(file_->Append("0123456789").ok());
  EXPECT_EQ("", ReadAll(Path("log")));
}

TEST_F(FaultEnvTest, TornAppendOnInjectedErrorThenDropped) {
  OpenLog("log");
  ASSERT_TRUE(file_->Append("head|").ok());
  ASSERT_TRUE(file_->Sync().ok());
  env_.SetTornWrites(true);
  env_.FailOp(FaultInjectionEnv::kWrite, 1, ENOSPC, false);
  EXPECT_FALSE(file_->Append("0123456789").ok());
  const std::string got = ReadAll(Path("log"));
  ASSERT_GT(got.size(), 5u);
  ASSERT_LT(got.size(), 15u);
  EXPECT_EQ(std::string("head|0123456789").substr(0, got.size()), got);
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("head|", ReadAll(Path("log")));
}

TEST_F(FaultEnvTest, WritableTruncateIsNotDurableBeyondSync) {
  OpenLog("log");
  ASSERT_TRUE(file_->Append("0123456789").ok());
  ASSERT_TRUE(file_->Sync().ok());
  ASSERT_TRUE(file_->Truncate(4).ok());
  ASSERT_TRUE(file_->Append("xy").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("0123", ReadAll(Path("log")));
}

TEST_F(FaultEnvTest, TruncateFileIsDurable) {
  OpenLog("log");
  ASSERT_TRUE(file_->Append("0123456789").ok());
  ASSERT_TRUE(file_->Close().ok());
  ASSERT_TRUE(env_.TruncateFile(Path("log"), 6).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("012345", ReadAll(Path("log")));
}

TEST_F(FaultEnvTest, LockFilePassesThroughAndIsCounted) {
  std::unique_ptr<FileLock> a, b;
  ASSERT_TRUE(env_.LockFile(Path("lock"), false, &a).ok());
  EXPECT_TRUE(env_.LockFile(Path("lock"), false, &b).IsBusy());
  EXPECT_EQ(2, env_.op_count());
}

TEST_F(FaultEnvTest, UndoesNestedOpsInReverseOrder) {
  WriteDurable("q", "v1");
  ASSERT_TRUE(env_.WriteFileAtomic(Path("q"), "v2").ok());  // Durable.
  // Two unsynced replacements in a row: undo both, newest first.
  std::unique_ptr<WritableFile> file;
  for (const char* v : {"v3", "v4"}) {
    ASSERT_TRUE(env_.NewWritableFile(Path("q.tmp"), &file).ok());
    ASSERT_TRUE(file->Append(v).ok());
    ASSERT_TRUE(file->Sync().ok());
    ASSERT_TRUE(file->Close().ok());
    ASSERT_TRUE(env_.RenameFile(Path("q.tmp"), Path("q")).ok());
  }
  EXPECT_EQ("v4", ReadAll(Path("q")));
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("v2", ReadAll(Path("q")));
  EXPECT_FALSE(env_.FileExists(Path("q.tmp")));
}

// --- RandomRWFile
// -------------------------------------------------------------

TEST_F(FaultEnvTest, CountsRandomRWFileOperations) {
  OpenRW("audit");                        // open + SyncDir: 2
  ASSERT_TRUE(rw_->Write(0, "ab").ok());  // 3
  ASSERT_TRUE(rw_->Sync().ok());          // 4
  ASSERT_TRUE(rw_->Truncate(1).ok());     // 5
  std::string data;
  ASSERT_TRUE(rw_->Read(0, 10, &data).ok());  // not counted
  EXPECT_EQ("a", data);
  uint64_t size = 0;
  ASSERT_TRUE(rw_->Size(&size).ok());  // not counted
  EXPECT_EQ(1u, size);
  ASSERT_TRUE(rw_->Close().ok());  // not counted
  OpenRW("audit");                 // exists: 6
  EXPECT_EQ(6, env_.op_count());
}

TEST_F(FaultEnvTest, CrashBetweenRandomRWCreateAndDirSyncLosesNewFile) {
  env_.CrashAtOp(2);  // The SyncDir inside NewRandomRWFile.
  EXPECT_FALSE(env_.NewRandomRWFile(Path("audit"), &rw_).ok());
  EXPECT_TRUE(env_.crashed());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_FALSE(env_.FileExists(Path("audit")));

  OpenRW("audit");
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_TRUE(env_.FileExists(Path("audit")));
}

TEST_F(FaultEnvTest, CrashAtRandomWriteSkipsItAndFailsEverythingAfter) {
  SyncedRW("audit", "0123456789");
  env_.CrashAtOp(env_.op_count() + 1);
  Status s = rw_->Write(2, "ABCD");
  EXPECT_TRUE(s.IsIOError());
  EXPECT_TRUE(Contains(s, "simulated crash")) << s.ToString();
  EXPECT_TRUE(Contains(s, "pwrite")) << s.ToString();
  EXPECT_TRUE(env_.crashed());
  EXPECT_EQ("0123456789", ReadAll(Path("audit")));  // Not performed.
  const int64_t ops = env_.op_count();

  EXPECT_TRUE(Contains(rw_->Write(0, "x"), "simulated crash"));
  EXPECT_FALSE(rw_->Sync().ok());
  EXPECT_FALSE(rw_->Truncate(0).ok());
  std::string data;
  EXPECT_TRUE(Contains(rw_->Read(0, 4, &data), "simulated crash"));
  uint64_t size;
  EXPECT_TRUE(Contains(rw_->Size(&size), "simulated crash"));
  std::unique_ptr<RandomRWFile> other;
  EXPECT_FALSE(env_.NewRandomRWFile(Path("other"), &other).ok());
  EXPECT_FALSE(env_.FileExists(Path("other")));
  EXPECT_FALSE(rw_->Close().ok());
  EXPECT_EQ(ops, env_.op_count());
  EXPECT_EQ("0123456789", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, TornRandomWriteOnCrashWritesStrictPrefixThenReverts) {
  const std::string synced = "................";
  const std::string data = "0123456789";
  bool saw_long = false;
  for (int i = 0; i < 20; i++) {
    SCOPED_TRACE("iteration " + std::to_string(i));
    ScratchDir dir;
    FaultInjectionEnv env(Env::Posix());
    env.SetTornWrites(true);
    std::unique_ptr<RandomRWFile> rw;
    ASSERT_TRUE(env.NewRandomRWFile(dir.Join("audit"), &rw).ok());
    ASSERT_TRUE(rw->Write(0, synced).ok());
    ASSERT_TRUE(rw->Sync().ok());
    // Vary the rng's state with i torn writes that are then undone.
    for (int j = 0; j < i; j++) {
      env.FailOp(FaultInjectionEnv::kWrite, 1, EIO, false);
      EXPECT_FALSE(rw->Write(0, data).ok());
    }
    ASSERT_TRUE(env.DropUnsyncedData().ok());
    ASSERT_EQ(synced, ReadAll(dir.Join("audit")));

    env.CrashAtOp(1);
    EXPECT_FALSE(rw->Write(3, data).ok());
    const std::string got = ReadAll(dir.Join("audit"));
    ASSERT_EQ(synced.size(), got.size());
    size_t torn = 0;
    while (torn < data.size() && got[3 + torn] == data[torn]) torn++;
    EXPECT_GT(torn, 0u);
    EXPECT_LT(torn, data.size());
    if (torn > 1) saw_long = true;
    std::string want = synced;
    want.replace(3, torn, data.substr(0, torn));
    EXPECT_EQ(want, got);
    // The torn bytes overwrote synced ones: a power loss puts those back.
    ASSERT_TRUE(env.DropUnsyncedData().ok());
    EXPECT_EQ(synced, ReadAll(dir.Join("audit")));
  }
  EXPECT_TRUE(saw_long);
}

TEST_F(FaultEnvTest, NoTornRandomWriteUnlessEnabled) {
  SyncedRW("audit", "0123456789");
  env_.CrashAtOp(env_.op_count() + 1);
  EXPECT_FALSE(rw_->Write(0, "abcdefgh").ok());
  EXPECT_EQ("0123456789", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, PowerLossRevertsUnsyncedOverwritesAndGrowth) {
  SyncedRW("audit", "synced|content\n\n\n\n");
  ASSERT_TRUE(rw_->Write(7, "CONTENT").ok());
  ASSERT_TRUE(rw_->Write(14, "rec1").ok());    // Over the padding.
  ASSERT_TRUE(rw_->Write(15, "REC2").ok());    // Overlaps the one before.
  ASSERT_TRUE(rw_->Write(19, "+grown").ok());  // Past the synced size.
  EXPECT_EQ("synced|CONTENTrREC2+grown", ReadAll(Path("audit")));
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("synced|content\n\n\n\n", ReadAll(Path("audit")));

  // The file stays usable, and tracked across close and reopen.
  ASSERT_TRUE(rw_->Write(0, "S").ok());
  ASSERT_TRUE(rw_->Close().ok());
  OpenRW("audit");
  ASSERT_TRUE(rw_->Write(1, "Y").ok());
  EXPECT_EQ("SYnced|content\n\n\n\n", ReadAll(Path("audit")));
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("synced|content\n\n\n\n", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, PreexistingContentOfRandomRWFileCountsAsSynced) {
  WriteAll(Path("audit"), "before\n\n\n\n");
  OpenRW("audit");
  ASSERT_TRUE(rw_->Write(6, "AFTER").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("before\n\n\n\n", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, SyncedOverwritesSurvivePowerLoss) {
  SyncedRW("audit", "aaaaaaaaaa");
  ASSERT_TRUE(rw_->Write(2, "bbb").ok());
  ASSERT_TRUE(rw_->Write(10, "cc").ok());
  ASSERT_TRUE(rw_->Sync().ok());
  ASSERT_TRUE(rw_->Write(3, "DD").ok());  // Unsynced again.
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("aabbbaaaaacc", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, FailedSyncOfRandomRWFileLeavesWritesUnsynced) {
  SyncedRW("audit", "aaaa");
  ASSERT_TRUE(rw_->Write(1, "bb").ok());
  env_.FailOp(FaultInjectionEnv::kSync, 1, EIO, false);
  Status s = rw_->Sync();
  EXPECT_TRUE(s.IsIOError());
  EXPECT_TRUE(Contains(s, Path("audit"))) << s.ToString();
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("aaaa", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, FailedRandomWriteHasNoEffect) {
  SyncedRW("audit", "0123456789");
  env_.FailOp(FaultInjectionEnv::kWrite, 1, ENOSPC, false);
  Status s = rw_->Write(2, "abcdef");
  EXPECT_TRUE(s.IsIOError());
  EXPECT_TRUE(Contains(s, "No space left")) << s.ToString();
  EXPECT_TRUE(Contains(s, Path("audit"))) << s.ToString();
  EXPECT_FALSE(env_.crashed());
  EXPECT_EQ("0123456789", ReadAll(Path("audit")));
  uint64_t size = 0;
  ASSERT_TRUE(rw_->Size(&size).ok());
  EXPECT_EQ(10u, size);
  ASSERT_TRUE(rw_->Write(8, "xyz").ok());  // Once only.
  EXPECT_EQ("01234567xyz", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, FailedRandomWriteLeavesTornPrefixThenReverts) {
  SyncedRW("audit", "0123456789");
  env_.SetTornWrites(true);
  env_.FailOp(FaultInjectionEnv::kWrite, 1, ENOSPC, false);
  EXPECT_FALSE(rw_->Write(6, "abcdefgh").ok());  // Over the end and past.
  const std::string got = ReadAll(Path("audit"));
  ASSERT_GE(got.size(), 10u);
  ASSERT_LT(got.size(), 14u);
  const std::string full = "012345abcdefgh";
  size_t torn = 0;
  while (6 + torn < got.size() && got[6 + torn] == full[6 + torn]) torn++;
  ASSERT_GT(torn, 0u);
  ASSERT_LT(torn, 8u);
  EXPECT_EQ(full.substr(0, 6 + torn) +
                std::string("6789").substr(std::min<size_t>(torn, 4)),
            got);
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("0123456789", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, RandomTruncateThenPowerLoss) {
  SyncedRW("audit", "0123456789");
  ASSERT_TRUE(rw_->Write(2, "AB").ok());
  ASSERT_TRUE(rw_->Write(7, "CD").ok());
  ASSERT_TRUE(rw_->Truncate(5).ok());
  uint64_t size = 0;
  ASSERT_TRUE(rw_->Size(&size).ok());
  EXPECT_EQ(5u, size);
  ASSERT_TRUE(rw_->Write(5, "xyz").ok());
  EXPECT_EQ("01AB4xyz", ReadAll(Path("audit")));
  // The unsynced truncate is not durable: only what was synced below the
  // cut is kept, with its synced content.
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("01234", ReadAll(Path("audit")));

  // A synced truncate is.
  ASSERT_TRUE(rw_->Truncate(3).ok());
  ASSERT_TRUE(rw_->Sync().ok());
  ASSERT_TRUE(rw_->Write(0, "Z").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("012", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, RemovedFileComesBackWithSyncedContentNotOverwrites) {
  SyncedRW("audit", "synced");
  ASSERT_TRUE(rw_->Write(0, "XX").ok());
  ASSERT_TRUE(rw_->Write(6, "+more").ok());
  ASSERT_TRUE(rw_->Close().ok());
  ASSERT_TRUE(env_.RemoveFile(Path("audit")).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("synced", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, TruncateFileMakesOverwritesDurable) {
  SyncedRW("audit", "0123456789");
  ASSERT_TRUE(rw_->Write(1, "ab").ok());
  ASSERT_TRUE(env_.TruncateFile(Path("audit"), 6).ok());  // Syncs.
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("0ab345", ReadAll(Path("audit")));
}

// --- partial power loss ------------------------------------------------------

constexpr size_t kSector = 512;

// What a 512-byte sector of `got` at `sector` holds, among `choices` (index),
// or -1 if none.
int SectorIs(const std::string& got, size_t sector,
             const std::vector<std::string>& choices) {
  const size_t pos = sector * kSector;
  for (size_t i = 0; i < choices.size(); i++) {
    if (got.compare(pos, kSector, choices[i]) == 0) return static_cast<int>(i);
  }
  return -1;
}

// Four synced sectors are overwritten (sector 0 by two writes, one half
// each) and four sectors appended, then power is lost: every sector is one
// of the versions it had, the appended part a prefix of random length whose
// sectors hold the new bytes or zeros, and over the iterations every
// outcome occurs.
TEST_F(FaultEnvTest, PartialPowerLossKeepsEachSectorOldOrNew) {
  env_.SetPartialPowerLoss(true);
  env_.ResetState();  // Kept across it.
  const std::string old_bytes(4 * kSector, 'o');
  const std::string half_n(kSector / 2, 'n'), half_m(kSector / 2, 'm');
  const std::string half_o(kSector / 2, 'o');
  const std::string sector_o(kSector, 'o'), sector_n(kSector, 'n');
  const std::string sector_a(kSector, 'a'), zeros(kSector, '\0');
  OpenRW("audit");
  std::map<std::string, int> seen;
  for (int iter = 0; iter < 200; iter++) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    ASSERT_TRUE(rw_->Truncate(0).ok());
    ASSERT_TRUE(rw_->Write(0, old_bytes).ok());
    ASSERT_TRUE(rw_->Sync().ok());
    // Sector 0 gets two records one after the other, like the audit log.
    ASSERT_TRUE(rw_->Write(0, half_n).ok());
    ASSERT_TRUE(rw_->Write(kSector / 2, half_m).ok());
    ASSERT_TRUE(rw_->Write(kSector, std::string(3 * kSector, 'n')).ok());
    ASSERT_TRUE(rw_->Write(4 * kSector, std::string(4 * kSector, 'a')).ok());
    ASSERT_TRUE(env_.DropUnsyncedData().ok());

    const std::string got = ReadAll(Path("audit"));
    ASSERT_GE(got.size(), 4 * kSector);
    ASSERT_LE(got.size(), 8 * kSector);
    // Sector 0: synced, after the first write, or after the second; never
    // the second record without the first.
    const int s0 =
        SectorIs(got, 0, {half_o + half_o, half_n + half_o, half_n + half_m});
    ASSERT_NE(-1, s0) << got.substr(0, kSector);
    seen["sector0=" + std::to_string(s0)]++;
    for (size_t sector = 1; sector < 4; sector++) {
      const int v = SectorIs(got, sector, {sector_o, sector_n});
      ASSERT_NE(-1, v) << "sector " << sector;
      seen[v == 0 ? "old" : "new"]++;
    }
    for (size_t pos = 4 * kSector; pos < got.size(); pos += kSector) {
      const size_t n = std::min(kSector, got.size() - pos);
      const std::string piece = got.substr(pos, n);
      if (piece == sector_a.substr(0, n)) {
        seen["appended"]++;
      } else {
        ASSERT_EQ(zeros.substr(0, n), piece) << "at " << pos;
        seen["zeros"]++;
      }
    }
    seen[got.size() == 8 * kSector   ? "all kept"
         : got.size() == 4 * kSector ? "none kept"
         : got.size() % kSector != 0 ? "cut in a sector"
                                     : "cut at a sector"]++;

    // What survived is on disk now: a second power loss changes nothing.
    ASSERT_TRUE(env_.DropUnsyncedData().ok());
    ASSERT_EQ(got, ReadAll(Path("audit")));
  }
  for (const char* outcome : {"sector0=0", "sector0=1", "sector0=2", "old",
                              "new", "appended", "zeros", "cut in a sector"}) {
    EXPECT_GT(seen[outcome], 0) << outcome;
  }
}

// Synced bytes cut by an unsynced truncate count as lost (like the cut of
// a WritableFile): when the file grows again, a partial power loss leaves
// there the new bytes or zeros, never the old synced bytes.
TEST_F(FaultEnvTest, PartialPowerLossAfterTruncateNeverBringsBackCutBytes) {
  env_.SetPartialPowerLoss(true);
  OpenRW("audit");
  std::map<std::string, int> seen;
  for (int iter = 0; iter < 50; iter++) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    ASSERT_TRUE(rw_->Truncate(0).ok());
    ASSERT_TRUE(rw_->Write(0, std::string(2 * kSector, 'o')).ok());
    ASSERT_TRUE(rw_->Sync().ok());
    ASSERT_TRUE(rw_->Write(kSector, std::string(kSector, 'n')).ok());
    ASSERT_TRUE(rw_->Truncate(kSector).ok());
    ASSERT_TRUE(rw_->Write(kSector, std::string(kSector, 'a')).ok());
    ASSERT_TRUE(env_.DropUnsyncedData().ok());
    const std::string got = ReadAll(Path("audit"));
    ASSERT_GE(got.size(), kSector);
    ASSERT_EQ(std::string(kSector, 'o'), got.substr(0, kSector));
    const std::string rest = got.substr(kSector);
    if (rest == std::string(rest.size(), 'a')) {
      seen["appended"]++;
    } else {
      ASSERT_EQ(std::string(rest.size(), '\0'), rest);
      seen["zeros"]++;
    }
  }
  EXPECT_GT(seen["appended"], 0);
  EXPECT_GT(seen["zeros"], 0);
}

TEST_F(FaultEnvTest, PartialPowerLossOfAppendableFile) {
  env_.SetPartialPowerLoss(true);
  OpenLog("log");
  ASSERT_TRUE(file_->Append("synced|").ok());
  ASSERT_TRUE(file_->Sync().ok());
  const std::string tail(3 * kSector, 'a');
  std::map<std::string, int> seen;
  for (int iter = 0; iter < 100; iter++) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    ASSERT_TRUE(env_.TruncateFile(Path("log"), 7).ok());  // Durable.
    ASSERT_TRUE(file_->Append(tail).ok());
    ASSERT_TRUE(env_.DropUnsyncedData().ok());
    const std::string got = ReadAll(Path("log"));
    ASSERT_GE(got.size(), 7u);
    ASSERT_LE(got.size(), 7 + tail.size());
    ASSERT_EQ("synced|", got.substr(0, 7));
    // Sectors are aligned to the file, not to the append.
    for (size_t pos = 7; pos < got.size();) {
      const size_t end = std::min(got.size(), (pos / kSector + 1) * kSector);
      const std::string piece = got.substr(pos, end - pos);
      if (piece == std::string(end - pos, 'a')) {
        seen["appended"]++;
      } else {
        ASSERT_EQ(std::string(end - pos, '\0'), piece) << "at " << pos;
        seen["zeros"]++;
      }
      pos = end;
    }
    seen[got.size() == 7 ? "none kept" : "some kept"]++;
  }
  for (const char* outcome : {"appended", "zeros", "some kept"}) {
    EXPECT_GT(seen[outcome], 0) << outcome;
  }
}

TEST_F(FaultEnvTest, PartialPowerLossOffRevertsEverything) {
  env_.SetPartialPowerLoss(true);
  env_.SetPartialPowerLoss(false);
  for (int iter = 0; iter < 20; iter++) {
    SyncedRW("audit", std::string(2 * kSector, 'o'));
    ASSERT_TRUE(rw_->Write(0, std::string(4 * kSector, 'n')).ok());
    ASSERT_TRUE(env_.DropUnsyncedData().ok());
    ASSERT_EQ(std::string(2 * kSector, 'o'), ReadAll(Path("audit")));
  }
}

}  // namespace
}  // namespace wizq
