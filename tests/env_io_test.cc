// The Env operations that let every file access of wizq go through an Env
// (GetFileInfo, ReadFilePrefix, ReadUserFile, CreateDirs, OpenDescriptor),
// in the POSIX Env and in FaultInjectionEnv, and EnvWrapper.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "fs/env.h"
#include "fs/fault_env.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using test::ReadAll;
using test::ScratchDir;
using test::WriteAll;

int FileMode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(0, ::lstat(path.c_str(), &st)) << path;
  return st.st_mode & 0777;
}

class EnvIoTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.Join(name); }

  Env* env_ = Env::Posix();
  ScratchDir dir_;
};

// --- POSIX Env ---------------------------------------------------------------

TEST_F(EnvIoTest, GetFileInfoDoesNotFollowSymlinks) {
  WriteAll(Path("file"), "12345");
  ASSERT_EQ(0, ::symlink(Path("file").c_str(), Path("link").c_str()));
  FileInfo info;
  ASSERT_TRUE(env_->GetFileInfo(Path("file"), &info).ok());
  EXPECT_EQ(FileInfo::kFile, info.type);
  EXPECT_EQ(5u, info.size);
  EXPECT_EQ(static_cast<uint32_t>(geteuid()), info.uid);
  struct stat st;
  ASSERT_EQ(0, ::stat(Path("file").c_str(), &st));
  EXPECT_EQ(static_cast<uint64_t>(st.st_ino), info.inode);
  EXPECT_EQ(static_cast<uint64_t>(st.st_dev), info.device);
  ASSERT_TRUE(env_->GetFileInfo(Path("link"), &info).ok());
  EXPECT_EQ(FileInfo::kSymlink, info.type);
  ASSERT_TRUE(env_->GetFileInfo(dir_.path(), &info).ok());
  EXPECT_EQ(FileInfo::kDir, info.type);
  Status s = env_->GetFileInfo(Path("missing"), &info);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
}

TEST_F(EnvIoTest, ReadFilePrefixStopsAtLimit) {
  const std::string big(100000, 'x');
  WriteAll(Path("out"), big);
  std::string data;
  ASSERT_TRUE(env_->ReadFilePrefix(Path("out"), 10, &data).ok());
  EXPECT_EQ(std::string(10, 'x'), data);
  ASSERT_TRUE(env_->ReadFilePrefix(Path("out"), 1 << 20, &data).ok());
  EXPECT_EQ(big, data);
  WriteAll(Path("empty"), "");
  ASSERT_TRUE(env_->ReadFilePrefix(Path("empty"), 10, &data).ok());
  EXPECT_EQ("", data);
  EXPECT_TRUE(env_->ReadFilePrefix(Path("missing"), 10, &data).IsNotFound());
  ASSERT_EQ(0, ::symlink(Path("out").c_str(), Path("link").c_str()));
  EXPECT_FALSE(env_->ReadFilePrefix(Path("link"), 10, &data).ok());
}

TEST_F(EnvIoTest, ReadUserFileFollowsSymlinks) {
  WriteAll(Path("input.json"), "{}");
  ASSERT_EQ(0, ::symlink(Path("input.json").c_str(), Path("link").c_str()));
  std::string data;
  ASSERT_TRUE(env_->ReadUserFile(Path("link"), &data).ok());
  EXPECT_EQ("{}", data);
  Status s = env_->ReadUserFile(Path("missing"), &data);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find(Path("missing")));
  EXPECT_FALSE(env_->ReadUserFile(dir_.path(), &data).ok());  // a directory
}

// --input-file <(...) and /dev/stdin are pipes: no pread, no size.
TEST_F(EnvIoTest, ReadUserFileReadsAFifo) {
  const std::string fifo = Path("fifo");
  ASSERT_EQ(0, ::mkfifo(fifo.c_str(), 0600));
  const std::string text(200000, 'y');  // more than one pipe buffer
  std::thread writer([&] { WriteAll(fifo, text); });
  std::string data;
  Status s = env_->ReadUserFile(fifo, &data);
  writer.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(text, data);
}

TEST_F(EnvIoTest, CreateDirsMakesMissingParents) {
  const std::string deep = Path("a/b/c");
  ASSERT_TRUE(env_->CreateDirs(deep, 0700).ok());
  EXPECT_EQ(0700, FileMode(Path("a")));
  EXPECT_EQ(0700, FileMode(deep));
  EXPECT_TRUE(env_->CreateDirs(deep, 0700).ok());  // exists: fine
  // Whatever exists is left for the caller to check with GetFileInfo.
  WriteAll(Path("file"), "x");
  EXPECT_TRUE(env_->CreateDirs(Path("file"), 0700).ok());
  EXPECT_FALSE(env_->CreateDirs(Path("file/sub"), 0700).ok());
}

TEST_F(EnvIoTest, OpenDescriptorIsCloseOnExecAndRefusesSymlinks) {
  int fd = -1;
  ASSERT_TRUE(
      env_->OpenDescriptor(Path("out"), O_WRONLY | O_CREAT | O_TRUNC, &fd)
          .ok());
  EXPECT_GT(fd, STDERR_FILENO);
  EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
  EXPECT_EQ(3, ::write(fd, "abc", 3));
  ::close(fd);
  EXPECT_EQ("abc", ReadAll(Path("out")));
  EXPECT_EQ(0600, FileMode(Path("out")));
  Status s = env_->OpenDescriptor(Path("missing"), O_RDWR, &fd);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  ASSERT_EQ(0, ::symlink(Path("out").c_str(), Path("link").c_str()));
  s = env_->OpenDescriptor(Path("link"), O_RDONLY, &fd);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find("symlink")) << s.ToString();
}

TEST_F(EnvIoTest, OpenDescriptorStaysAboveStderrWhenStdioIsClosed) {
  WriteAll(Path("in"), "x");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(STDIN_FILENO);
    int fd = -1;
    Status s = Env::Posix()->OpenDescriptor(Path("in"), O_RDONLY, &fd);
    ::_exit(s.ok() && fd > STDERR_FILENO && ::fcntl(STDIN_FILENO, F_GETFD) < 0
                ? 0
                : 1);
  }
  int status = 0;
  ASSERT_EQ(pid, ::waitpid(pid, &status, 0));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// --- EnvWrapper --------------------------------------------------------------

// Overrides one call; everything else must reach the target.
class CountingRemoveEnv : public EnvWrapper {
 public:
  explicit CountingRemoveEnv(Env* target) : EnvWrapper(target) {}
  Status RemoveFile(const std::string& path) override {
    removes++;
    return target()->RemoveFile(path);
  }
  int removes = 0;
};

TEST_F(EnvIoTest, EnvWrapperForwardsWhatItDoesNotOverride) {
  FaultInjectionEnv fault(Env::Posix());
  CountingRemoveEnv env(&fault);
  EXPECT_EQ(&fault, env.target());
  ASSERT_TRUE(env.CreateDir(Path("d"), 0700).ok());
  ASSERT_TRUE(env.CreateDirs(Path("d/e/f"), 0700).ok());
  ASSERT_TRUE(env.WriteFileAtomic(Path("d/a"), "hello").ok());
  std::unique_ptr<WritableFile> log;
  ASSERT_TRUE(env.NewAppendableFile(Path("d/log"), &log).ok());
  ASSERT_TRUE(log->Append("x").ok());
  std::unique_ptr<RandomRWFile> rw;
  ASSERT_TRUE(env.NewRandomRWFile(Path("d/rw"), &rw).ok());
  std::string data;
  ASSERT_TRUE(env.ReadFile(Path("d/a"), &data).ok());
  EXPECT_EQ("hello", data);
  ASSERT_TRUE(env.ReadFileFrom(Path("d/a"), 3, &data).ok());
  EXPECT_EQ("lo", data);
  ASSERT_TRUE(env.ReadFilePrefix(Path("d/a"), 2, &data).ok());
  EXPECT_EQ("he", data);
  ASSERT_TRUE(env.ReadUserFile(Path("d/a"), &data).ok());
  EXPECT_EQ("hello", data);
  uint64_t size = 0;
  ASSERT_TRUE(env.GetFileSize(Path("d/a"), &size).ok());
  EXPECT_EQ(5u, size);
  FileInfo info;
  ASSERT_TRUE(env.GetFileInfo(Path("d/e"), &info).ok());
  EXPECT_EQ(FileInfo::kDir, info.type);
  ASSERT_TRUE(env.TruncateFile(Path("d/a"), 4).ok());
  ASSERT_TRUE(env.RenameFile(Path("d/a"), Path("d/b")).ok());
  EXPECT_TRUE(env.FileExists(Path("d/b")));
  std::vector<std::string> names;
  ASSERT_TRUE(env.ListDir(Path("d"), &names).ok());
  EXPECT_EQ((std::vector<std::string>{"b", "e", "log", "rw"}), names);
  std::unique_ptr<FileLock> lock;
  ASSERT_TRUE(env.LockFile(Path("d/lock"), false, &lock).ok());
  int fd = -1;
  ASSERT_TRUE(env.OpenDescriptor(Path("d/out"), O_WRONLY | O_CREAT, &fd).ok());
  ::close(fd);
  ASSERT_TRUE(env.SyncDir(Path("d")).ok());
  ASSERT_TRUE(env.RemoveFile(Path("d/b")).ok());
  EXPECT_EQ(1, env.removes);
  EXPECT_GT(env.NowMicros(), 0u);
  // Every mutating call above reached the fault env and was counted there.
  EXPECT_GE(fault.op_count(), 14);
}

// --- FaultInjectionEnv -------------------------------------------------------

class FaultEnvIoTest : public EnvIoTest {
 protected:
  FaultInjectionEnv fault_{Env::Posix()};
};

TEST_F(FaultEnvIoTest, OpenDescriptorIsCountedAndCanFail) {
  int fd = -1;
  ASSERT_TRUE(fault_.OpenDescriptor(Path("a"), O_WRONLY | O_CREAT, &fd).ok());
  ::close(fd);
  ASSERT_TRUE(fault_.OpenDescriptor(Path("a"), O_RDONLY, &fd).ok());
  ::close(fd);
  EXPECT_EQ(2, fault_.op_count());

  fault_.FailOp(FaultInjectionEnv::kOpenDescriptor, 2, ENOSPC, false);
  ASSERT_TRUE(fault_.OpenDescriptor(Path("a"), O_RDONLY, &fd).ok());
  ::close(fd);
  fd = -1;
  Status s = fault_.OpenDescriptor(Path("b"), O_WRONLY | O_CREAT, &fd);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find(Path("b"))) << s.ToString();
  EXPECT_EQ(-1, fd);
  EXPECT_FALSE(fault_.FileExists(Path("b")));  // not performed
  // Other kinds of fault do not hit it.
  fault_.ClearFaults();
  fault_.FailOp(FaultInjectionEnv::kWrite, 1, EIO, true);
  ASSERT_TRUE(fault_.OpenDescriptor(Path("b"), O_WRONLY | O_CREAT, &fd).ok());
  ::close(fd);
}

TEST_F(FaultEnvIoTest, CrashAtOpenDescriptorFailsItAndEverythingAfter) {
  fault_.CrashAtOp(2);
  ASSERT_TRUE(fault_.CreateDirs(Path("t/1"), 0700).ok());  // 1
  int fd = -1;
  Status s = fault_.OpenDescriptor(Path("t/1/lock"), O_RDWR | O_CREAT, &fd);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(fault_.crashed());
  EXPECT_FALSE(::access(Path("t/1/lock").c_str(), F_OK) == 0);
  FileInfo info;
  EXPECT_FALSE(fault_.GetFileInfo(Path("t/1"), &info).ok());
  std::string data;
  EXPECT_FALSE(fault_.ReadFilePrefix(Path("t/1/x"), 1, &data).ok());
  EXPECT_FALSE(fault_.ReadUserFile(Path("t/1/x"), &data).ok());
  EXPECT_FALSE(fault_.CreateDirs(Path("t/2"), 0700).ok());
}

TEST_F(FaultEnvIoTest, ReadsAreNotCounted) {
  WriteAll(Path("f"), "data");
  FileInfo info;
  std::string data;
  ASSERT_TRUE(fault_.GetFileInfo(Path("f"), &info).ok());
  ASSERT_TRUE(fault_.ReadFilePrefix(Path("f"), 2, &data).ok());
  EXPECT_EQ("da", data);
  ASSERT_TRUE(fault_.ReadUserFile(Path("f"), &data).ok());
  EXPECT_EQ(0, fault_.op_count());
}

TEST_F(FaultEnvIoTest, CreateDirsIsOneOpAndUndoneByPowerLossUntilSynced) {
  ASSERT_TRUE(fault_.CreateDirs(Path("a/b/c"), 0700).ok());
  EXPECT_EQ(1, fault_.op_count());
  EXPECT_TRUE(fault_.FileExists(Path("a/b/c")));
  ASSERT_TRUE(fault_.DropUnsyncedData().ok());
  EXPECT_FALSE(fault_.FileExists(Path("a")));

  ASSERT_TRUE(fault_.CreateDirs(Path("a/b"), 0700).ok());
  ASSERT_TRUE(fault_.SyncDir(dir_.path()).ok());  // "a" is durable
  ASSERT_TRUE(fault_.DropUnsyncedData().ok());
  EXPECT_TRUE(fault_.FileExists(Path("a")));
  EXPECT_FALSE(fault_.FileExists(Path("a/b")));
}

TEST_F(FaultEnvIoTest, CreateDirsCanFail) {
  fault_.FailOp(FaultInjectionEnv::kAny, 1, EACCES, false);
  EXPECT_TRUE(fault_.CreateDirs(Path("a/b"), 0700).IsIOError());
  EXPECT_FALSE(fault_.FileExists(Path("a")));
}

}  // namespace
}  // namespace wizq
