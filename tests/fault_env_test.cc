// Tests of FaultInjectionEnv (fs/fault_env.h) on files written by appending:
// counted operations, crashes at an operation, unsynced data, renames and
// removes dropped at a power loss, injected errors and torn writes. Its
// RandomRWFile and partial power loss are in fault_env_rw_test.cc, the
// fixture in fault_env_fixture.h.
#include "fs/fault_env.h"

#include <errno.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fault_env_fixture.h"
#include "tests/test_util.h"

namespace wizq::fault_env_test {
namespace {

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

}  // namespace
}  // namespace wizq::fault_env_test
