// The fixture of FaultInjectionEnv's tests (fault_env_test.cc,
// fault_env_rw_test.cc): a scratch directory, the env, and the files a case
// keeps open.
#ifndef WIZQ_TESTS_FAULT_ENV_FIXTURE_H_
#define WIZQ_TESTS_FAULT_ENV_FIXTURE_H_

#include <memory>
#include <string>

#include "fs/fault_env.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace wizq::fault_env_test {

using test::ReadAll;
using test::ScratchDir;
using test::WriteAll;

inline bool Contains(const Status& s, const std::string& part) {
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

}  // namespace wizq::fault_env_test

#endif  // WIZQ_TESTS_FAULT_ENV_FIXTURE_H_
