// Worker liveness as `wizq status` (ProbeWorkers) and the queue
// (WorkerRegistry::IsAlive) judge it: the entry's flock is the truth; the
// recorded pid only rules out a worker whose lock a child still holds for a
// moment, and only when that pid can be checked from here — a worker in
// another pid namespace (a container sharing the directory) records a pid
// that means nothing in ours.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fs/env.h"
#include "queue/dir/workers.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

// Above the largest pid_max Linux allows (2^22): no process has it here.
constexpr int64_t kNoSuchPid = 4194309;

class WorkerLivenessTest : public ::testing::Test {
 protected:
  WorkerLivenessTest() : workers_(dir_.path() + "/workers") {
    EXPECT_TRUE(Env::Posix()->CreateDir(workers_, 0700).ok());
  }

  // An entry `id` with `record` as its text, locked by this test (as its
  // worker would hold it) until the returned lock is dropped.
  std::unique_ptr<FileLock> HeldEntry(const std::string& id,
                                      const std::string& record) {
    const std::string path = workers_ + "/" + id;
    std::unique_ptr<FileLock> lock;
    EXPECT_TRUE(Env::Posix()->LockFile(path, false, &lock).ok());
    std::unique_ptr<WritableFile> f;
    EXPECT_TRUE(Env::Posix()->NewWritableFile(path, &f).ok());
    EXPECT_TRUE(f->Append(record).ok());
    EXPECT_TRUE(f->Close().ok());
    return lock;
  }

  bool Probed(const std::string& id) {
    std::vector<WorkerEntry> entries;
    Status s = ProbeWorkers(Env::Posix(), workers_, &entries);
    EXPECT_TRUE(s.ok()) << s.ToString();
    for (const WorkerEntry& e : entries) {
      if (e.id == id) return e.alive;
    }
    ADD_FAILURE() << id << " not listed";
    return false;
  }

  test::ScratchDir dir_;
  std::string workers_;
};

// A live worker in another pid namespace: its lock is held, its pid is not
// a process here. Before the fix both readers called it dead: status said
// "interrupted" and a writer put its tasks back while they ran.
TEST_F(WorkerLivenessTest, HeldLockOfAnotherPidNamespaceIsAlive) {
  const std::string id = "w7-0badf00d";
  auto lock = HeldEntry(id, "{\"worker\":\"" + id +
                                "\",\"pid\":" + std::to_string(kNoSuchPid) +
                                ",\"run_id\":\"r\",\"started_ms\":1,"
                                "\"pid_space\":\"some-other-namespace\"}\n");
  EXPECT_TRUE(Probed(id));
  WorkerRegistry registry(Env::Posix(), workers_);
  EXPECT_TRUE(registry.IsAlive(id));
  lock.reset();  // the worker dies
  EXPECT_FALSE(Probed(id));
  registry.ForgetCache();
  EXPECT_FALSE(registry.IsAlive(id));
}

// In our own namespace (or a record without pid_space, as older wizq
// wrote) a held lock whose recorded process is gone is still dead: a child
// being spawned holds the worker's descriptors for a moment.
TEST_F(WorkerLivenessTest, HeldLockOfAGonePidHereIsDead) {
  const std::string old_id = "w8-00000001";
  auto old_lock =
      HeldEntry(old_id, "{\"worker\":\"" + old_id +
                            "\",\"pid\":" + std::to_string(kNoSuchPid) +
                            ",\"run_id\":\"r\",\"started_ms\":1}\n");
  EXPECT_FALSE(Probed(old_id));
  WorkerRegistry registry(Env::Posix(), workers_);
  EXPECT_FALSE(registry.IsAlive(old_id));

  // A worker registered by this process records our own pid space.
  WorkerRegistry self(Env::Posix(), workers_);
  ASSERT_TRUE(self.Register("r", 1).ok());
  std::string text;
  ASSERT_TRUE(Env::Posix()->ReadFile(workers_ + "/" + self.self(), &text).ok());
  const size_t at = text.find("\"pid_space\":\"");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string space =
      text.substr(at + 13, text.find('"', at + 13) - at - 13);
  const std::string same_id = "w9-00000002";
  auto same_lock = HeldEntry(
      same_id, "{\"worker\":\"" + same_id +
                   "\",\"pid\":" + std::to_string(kNoSuchPid) +
                   ",\"run_id\":\"r\",\"started_ms\":1,\"pid_space\":\"" +
                   space + "\"}\n");
  EXPECT_FALSE(Probed(same_id));
  EXPECT_FALSE(registry.IsAlive(same_id));
  EXPECT_TRUE(Probed(self.self()));
  EXPECT_TRUE(self.Unregister().ok());
}

}  // namespace
}  // namespace wizq
