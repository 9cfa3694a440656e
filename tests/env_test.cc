#include "fs/env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using test::ReadAll;
using test::ScratchDir;
using test::WriteAll;

class EnvTest : public ::testing::Test {
 protected:
  Env* env_ = Env::Posix();
  ScratchDir dir_;
};

int FileMode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(0, ::lstat(path.c_str(), &st)) << path;
  return st.st_mode & 0777;
}

// Forks a child that tries LockFile(path, wait=false) and returns its exit
// code: 0 got the lock, 1 Busy, 2 another error.
int LockInChild(const std::string& path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::unique_ptr<FileLock> lock;
    Status s = Env::Posix()->LockFile(path, false, &lock);
    ::_exit(s.ok() ? 0 : s.IsBusy() ? 1 : 2);
  }
  int status = 0;
  EXPECT_EQ(pid, ::waitpid(pid, &status, 0));
  EXPECT_TRUE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

TEST_F(EnvTest, AppendSyncRead) {
  const std::string path = dir_.Join("log");
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_->NewAppendableFile(path, &file).ok());
  EXPECT_EQ(path, file->path());
  ASSERT_TRUE(file->Append("hello ").ok());
  ASSERT_TRUE(file->Append("world").ok());
  ASSERT_TRUE(file->Sync().ok());
  ASSERT_TRUE(file->Close().ok());
  std::string data;
  ASSERT_TRUE(env_->ReadFile(path, &data).ok());
  EXPECT_EQ("hello world", data);
}

TEST_F(EnvTest, AppendableFileAppendsToExistingContent) {
  const std::string path = dir_.Join("log");
  WriteAll(path, "abc");
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_->NewAppendableFile(path, &file).ok());
  ASSERT_TRUE(file->Append("def").ok());
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ("abcdef", ReadAll(path));
}

TEST_F(EnvTest, WritableFileTruncatesExistingContent) {
  const std::string path = dir_.Join("f");
  WriteAll(path, "old content");
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_->NewWritableFile(path, &file).ok());
  ASSERT_TRUE(file->Append("new").ok());
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ("new", ReadAll(path));
}

TEST_F(EnvTest, TruncateThenAppendContinuesAtNewEnd) {
  const std::string path = dir_.Join("log");
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_->NewAppendableFile(path, &file).ok());
  ASSERT_TRUE(file->Append("line1\nbroken").ok());
  ASSERT_TRUE(file->Truncate(6).ok());
  ASSERT_TRUE(file->Append("line2\n").ok());
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ("line1\nline2\n", ReadAll(path));
}

TEST_F(EnvTest, RandomRWFileReadsAndWritesAtOffsets) {
  const std::string path = dir_.Join("audit");
  std::unique_ptr<RandomRWFile> file;
  ASSERT_TRUE(env_->NewRandomRWFile(path, &file).ok());
  EXPECT_EQ(path, file->path());
  uint64_t size = 1;
  ASSERT_TRUE(file->Size(&size).ok());
  EXPECT_EQ(0u, size);
  ASSERT_TRUE(file->Write(0, "hello world").ok());
  ASSERT_TRUE(file->Write(6, "WORLD").ok());
  ASSERT_TRUE(file->Write(0, "J").ok());
  ASSERT_TRUE(file->Sync().ok());
  std::string data = "stale";
  ASSERT_TRUE(file->Read(0, 100, &data).ok());  // Short at the end.
  EXPECT_EQ("Jello WORLD", data);
  ASSERT_TRUE(file->Read(6, 3, &data).ok());
  EXPECT_EQ("WOR", data);
  ASSERT_TRUE(file->Read(11, 3, &data).ok());
  EXPECT_EQ("", data);
  ASSERT_TRUE(file->Read(100, 3, &data).ok());
  EXPECT_EQ("", data);
  ASSERT_TRUE(file->Size(&size).ok());
  EXPECT_EQ(11u, size);
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ("Jello WORLD", ReadAll(path));
}

TEST_F(EnvTest, RandomRWFileKeepsExistingContent) {
  const std::string path = dir_.Join("audit");
  WriteAll(path, "abcdef");
  std::unique_ptr<RandomRWFile> file;
  ASSERT_TRUE(env_->NewRandomRWFile(path, &file).ok());
  uint64_t size = 0;
  ASSERT_TRUE(file->Size(&size).ok());
  EXPECT_EQ(6u, size);
  std::string data;
  ASSERT_TRUE(file->Read(2, 2, &data).ok());
  EXPECT_EQ("cd", data);
  ASSERT_TRUE(file->Write(2, "XY").ok());  // Overwrites, does not append.
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ("abXYef", ReadAll(path));
}

TEST_F(EnvTest, RandomRWFileWritePastEndLeavesZeros) {
  const std::string path = dir_.Join("audit");
  std::unique_ptr<RandomRWFile> file;
  ASSERT_TRUE(env_->NewRandomRWFile(path, &file).ok());
  ASSERT_TRUE(file->Write(0, "ab").ok());
  ASSERT_TRUE(file->Write(5, "z").ok());
  uint64_t size = 0;
  ASSERT_TRUE(file->Size(&size).ok());
  EXPECT_EQ(6u, size);
  std::string data;
  ASSERT_TRUE(file->Read(0, 6, &data).ok());
  EXPECT_EQ(std::string("ab\0\0\0z", 6), data);
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(std::string("ab\0\0\0z", 6), ReadAll(path));
}

TEST_F(EnvTest, RandomRWFileTruncate) {
  const std::string path = dir_.Join("audit");
  std::unique_ptr<RandomRWFile> file;
  ASSERT_TRUE(env_->NewRandomRWFile(path, &file).ok());
  ASSERT_TRUE(file->Write(0, "0123456789").ok());
  ASSERT_TRUE(file->Truncate(4).ok());
  uint64_t size = 0;
  ASSERT_TRUE(file->Size(&size).ok());
  EXPECT_EQ(4u, size);
  std::string data;
  ASSERT_TRUE(file->Read(0, 10, &data).ok());
  EXPECT_EQ("0123", data);
  ASSERT_TRUE(file->Write(6, "x").ok());  // The cut bytes read as zeros.
  ASSERT_TRUE(file->Sync().ok());
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(std::string("0123\0\0x", 7), ReadAll(path));
}

TEST_F(EnvTest, ReadFileFromOffset) {
  const std::string path = dir_.Join("f");
  WriteAll(path, "0123456789");
  std::string data;
  ASSERT_TRUE(env_->ReadFileFrom(path, 4, &data).ok());
  EXPECT_EQ("456789", data);
  ASSERT_TRUE(env_->ReadFileFrom(path, 10, &data).ok());
  EXPECT_EQ("", data);
  ASSERT_TRUE(env_->ReadFileFrom(path, 100, &data).ok());
  EXPECT_EQ("", data);
}

TEST_F(EnvTest, ReadMissingFileIsNotFoundNamingPath) {
  const std::string path = dir_.Join("missing");
  std::string data;
  Status s = env_->ReadFile(path, &data);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find(path)) << s.ToString();
}

TEST_F(EnvTest, ReadsLargeFile) {
  const std::string path = dir_.Join("big");
  std::string big(300 * 1024 + 7, 'x');
  for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>(i * 7);
  WriteAll(path, big);
  std::string data;
  ASSERT_TRUE(env_->ReadFile(path, &data).ok());
  EXPECT_EQ(big, data);
}

// ReadFile leaves kReadSlack zero bytes allocated after the data, so that
// simdjson can parse queue.json in place (queue/dir/snapshot_decode.cc).
TEST_F(EnvTest, ReadFileLeavesZeroedSlackAfterTheData) {
  const std::string path = dir_.Join("f");
  for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, size_t{200001}}) {
    WriteAll(path, std::string(size, 'x'));
    for (uint64_t offset : {uint64_t{0}, uint64_t{1}}) {
      std::string data = "previous content";
      ASSERT_TRUE(env_->ReadFileFrom(path, offset, &data).ok());
      ASSERT_EQ(data, std::string(size > offset ? size - offset : 0, 'x'));
      ASSERT_GE(data.capacity(), data.size() + Env::kReadSlack);
      for (size_t i = data.size(); i < data.size() + Env::kReadSlack; i++) {
        ASSERT_EQ(data.data()[i], '\0') << "size " << size << " at " << i;
      }
    }
  }
}

TEST_F(EnvTest, WriteFileAtomicReplacesContent) {
  const std::string path = dir_.Join("queue.json");
  ASSERT_TRUE(env_->WriteFileAtomic(path, "v1").ok());
  EXPECT_EQ("v1", ReadAll(path));
  ASSERT_TRUE(env_->WriteFileAtomic(path, "version two").ok());
  EXPECT_EQ("version two", ReadAll(path));
  EXPECT_FALSE(env_->FileExists(path + ".tmp"));
  EXPECT_EQ(0600, FileMode(path));
}

TEST_F(EnvTest, WriteFileAtomicFailureKeepsOldTargetAndNamesFile) {
  const std::string path = dir_.Join("queue.json");
  ASSERT_TRUE(env_->WriteFileAtomic(path, "old").ok());
  ASSERT_EQ(0, ::mkdir((path + ".tmp").c_str(), 0700));  // Blocks the temp.
  Status s = env_->WriteFileAtomic(path, "new");
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find(path + ".tmp"));
  EXPECT_EQ("old", ReadAll(path));
}

TEST_F(EnvTest, FilesAreCreatedPrivate) {
  const mode_t old_mask = ::umask(022);
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_->NewAppendableFile(dir_.Join("a"), &file).ok());
  ASSERT_TRUE(env_->NewWritableFile(dir_.Join("w"), &file).ok());
  std::unique_ptr<RandomRWFile> rw;
  ASSERT_TRUE(env_->NewRandomRWFile(dir_.Join("r"), &rw).ok());
  std::unique_ptr<FileLock> lock;
  ASSERT_TRUE(env_->LockFile(dir_.Join("lock"), false, &lock).ok());
  ASSERT_TRUE(env_->WriteFileAtomic(dir_.Join("q"), "x").ok());
  ::umask(old_mask);
  EXPECT_EQ(0600, FileMode(dir_.Join("a")));
  EXPECT_EQ(0600, FileMode(dir_.Join("w")));
  EXPECT_EQ(0600, FileMode(dir_.Join("r")));
  EXPECT_EQ(0600, FileMode(dir_.Join("lock")));
  EXPECT_EQ(0600, FileMode(dir_.Join("q")));
}

TEST_F(EnvTest, RefusesToOpenSymlinkedFile) {
  const std::string target = dir_.Join("target");
  const std::string link = dir_.Join("link");
  WriteAll(target, "secret");
  ASSERT_EQ(0, ::symlink(target.c_str(), link.c_str()));
  std::unique_ptr<WritableFile> file;
  Status s = env_->NewAppendableFile(link, &file);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find(link));
  EXPECT_FALSE(env_->NewWritableFile(link, &file).ok());
  std::unique_ptr<RandomRWFile> rw;
  s = env_->NewRandomRWFile(link, &rw);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find(link)) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find("symlink")) << s.ToString();
  EXPECT_FALSE(env_->TruncateFile(link, 0).ok());
  std::unique_ptr<FileLock> lock;
  EXPECT_FALSE(env_->LockFile(link, false, &lock).ok());
  std::string data;
  EXPECT_FALSE(env_->ReadFile(link, &data).ok());
  EXPECT_EQ("secret", ReadAll(target));
}

TEST_F(EnvTest, RandomRWFileRefusesDanglingSymlink) {
  const std::string target = dir_.Join("nowhere");
  const std::string link = dir_.Join("link");
  ASSERT_EQ(0, ::symlink(target.c_str(), link.c_str()));
  std::unique_ptr<RandomRWFile> rw;
  Status s = env_->NewRandomRWFile(link, &rw);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_FALSE(env_->FileExists(target));
}

TEST_F(EnvTest, CreateDir) {
  const std::string path = dir_.Join("sub");
  ASSERT_TRUE(env_->CreateDir(path, 0700).ok());
  EXPECT_EQ(0700, FileMode(path));
  EXPECT_TRUE(env_->CreateDir(path, 0700).ok());  // Exists: fine.
  EXPECT_FALSE(env_->CreateDir(dir_.Join("no/such/parent"), 0700).ok());
}

TEST_F(EnvTest, CreateDirRefusesSymlinkAndFile) {
  const std::string real = dir_.Join("real");
  const std::string link = dir_.Join("link");
  ASSERT_EQ(0, ::mkdir(real.c_str(), 0700));
  ASSERT_EQ(0, ::symlink(real.c_str(), link.c_str()));
  Status s = env_->CreateDir(link, 0700);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find(link)) << s.ToString();

  const std::string file = dir_.Join("file");
  WriteAll(file, "x");
  s = env_->CreateDir(file, 0700);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find(file)) << s.ToString();
}

TEST_F(EnvTest, LockExcludesSecondLockInSameProcess) {
  const std::string path = dir_.Join("lock");
  std::unique_ptr<FileLock> first, second;
  ASSERT_TRUE(env_->LockFile(path, false, &first).ok());
  EXPECT_EQ(path, first->path());
  Status s = env_->LockFile(path, false, &second);
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find(path)) << s.ToString();
  first.reset();
  EXPECT_TRUE(env_->LockFile(path, false, &second).ok());
}

TEST_F(EnvTest, LockExcludesOtherProcessUntilReleased) {
  const std::string path = dir_.Join("lock");
  std::unique_ptr<FileLock> lock;
  ASSERT_TRUE(env_->LockFile(path, false, &lock).ok());
  EXPECT_EQ(1, LockInChild(path));
  lock.reset();
  EXPECT_EQ(0, LockInChild(path));
}

TEST_F(EnvTest, WaitingLockBlocksUntilHolderExits) {
  const std::string path = dir_.Join("lock");
  int pipefd[2];
  ASSERT_EQ(0, ::pipe(pipefd));
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::unique_ptr<FileLock> held;
    if (!Env::Posix()->LockFile(path, false, &held).ok()) ::_exit(1);
    (void)!::write(pipefd[1], "x", 1);
    ::usleep(200 * 1000);
    ::_exit(0);  // Releases the lock.
  }
  ::close(pipefd[1]);
  char c;
  ASSERT_EQ(1, ::read(pipefd[0], &c, 1));  // The child holds the lock.
  ::close(pipefd[0]);
  std::unique_ptr<FileLock> lock;
  Status s = env_->LockFile(path, true, &lock);
  EXPECT_TRUE(s.ok()) << s.ToString();
  int status = 0;
  ASSERT_EQ(pid, ::waitpid(pid, &status, 0));
  EXPECT_EQ(0, WEXITSTATUS(status));
  EXPECT_EQ(1, LockInChild(path));
}

TEST_F(EnvTest, LockFdIsCloseOnExec) {
  std::unique_ptr<FileLock> lock;
  ASSERT_TRUE(env_->LockFile(dir_.Join("lock"), false, &lock).ok());
  ASSERT_GE(lock->fd(), 0);
  EXPECT_TRUE(::fcntl(lock->fd(), F_GETFD) & FD_CLOEXEC);
}

TEST_F(EnvTest, FileExistsAndSize) {
  const std::string path = dir_.Join("f");
  EXPECT_FALSE(env_->FileExists(path));
  uint64_t size = 1;
  Status s = env_->GetFileSize(path, &size);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  WriteAll(path, "12345");
  EXPECT_TRUE(env_->FileExists(path));
  ASSERT_TRUE(env_->GetFileSize(path, &size).ok());
  EXPECT_EQ(5u, size);
  ASSERT_TRUE(env_->TruncateFile(path, 2).ok());
  EXPECT_EQ("12", ReadAll(path));
}

TEST_F(EnvTest, ListDirIsSortedWithoutDots) {
  WriteAll(dir_.Join("b"), "");
  WriteAll(dir_.Join("a"), "");
  ASSERT_EQ(0, ::mkdir(dir_.Join("c").c_str(), 0700));
  std::vector<std::string> names = {"stale"};
  ASSERT_TRUE(env_->ListDir(dir_.path(), &names).ok());
  EXPECT_EQ((std::vector<std::string>{"a", "b", "c"}), names);
  Status s = env_->ListDir(dir_.Join("missing"), &names);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.message().find(dir_.Join("missing")));
}

TEST_F(EnvTest, RenameAndRemove) {
  const std::string a = dir_.Join("a"), b = dir_.Join("b");
  WriteAll(a, "A");
  WriteAll(b, "B");
  ASSERT_TRUE(env_->RenameFile(a, b).ok());
  EXPECT_FALSE(env_->FileExists(a));
  EXPECT_EQ("A", ReadAll(b));
  ASSERT_TRUE(env_->SyncDir(dir_.path()).ok());
  Status s = env_->RenameFile(a, b);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.message().find(a)) << s.ToString();
  ASSERT_TRUE(env_->RemoveFile(b).ok());
  EXPECT_FALSE(env_->FileExists(b));
  s = env_->RemoveFile(b);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find(b)) << s.ToString();
}

TEST_F(EnvTest, SyncDirOfMissingDirNamesIt) {
  Status s = env_->SyncDir(dir_.Join("nope"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.message().find(dir_.Join("nope")));
}

TEST_F(EnvTest, NowMicrosIsWallClock) {
  const uint64_t now = static_cast<uint64_t>(std::time(nullptr)) * 1000000;
  const uint64_t micros = env_->NowMicros();
  EXPECT_GT(micros + 2000000, now);
  EXPECT_LT(micros, now + 2000000);
}

TEST(DirNameTest, Cases) {
  EXPECT_EQ("a/b", DirName("a/b/c"));
  EXPECT_EQ("a", DirName("a/b"));
  EXPECT_EQ("a", DirName("a//b"));
  EXPECT_EQ("a", DirName("a/b/"));
  EXPECT_EQ(".", DirName("b"));
  EXPECT_EQ(".", DirName(""));
  EXPECT_EQ("/", DirName("/b"));
  EXPECT_EQ("/", DirName("/"));
  EXPECT_EQ("/x", DirName("/x/y"));
}

}  // namespace
}  // namespace wizq
