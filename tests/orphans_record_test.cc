// The attempt record (tasks/orphans_record.h): how a later worker judges an
// attempt from what its supervisor wrote, without any process running.
#include "tasks/orphans_record.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace wizq::internal {
namespace {

TEST(AttemptRecordTest, ParsesBothLinesAndOlderRecords) {
  AttemptRecord r;
  ASSERT_TRUE(
      ParseAttemptRecord("123 456 boot-a 2 1700\nend 2 exit 3 1\n", &r));
  EXPECT_EQ(r.pid, 123);
  EXPECT_EQ(r.start, 456u);
  EXPECT_EQ(r.boot_id, "boot-a");
  EXPECT_EQ(r.attempt, 2);
  EXPECT_EQ(r.start_wall_ms, 1700);
  EXPECT_TRUE(r.ended);
  EXPECT_EQ(r.end, AttemptRecord::End::kExit);
  EXPECT_EQ(r.value, 3);
  EXPECT_TRUE(r.synced);

  ASSERT_TRUE(
      ParseAttemptRecord("123 456 boot-a 2 1700\nend 2 signal 9 0\n", &r));
  EXPECT_EQ(r.end, AttemptRecord::End::kSignal);
  EXPECT_FALSE(r.synced);
  // A torn or foreign end line, an end of another attempt: not ended.
  ASSERT_TRUE(ParseAttemptRecord("123 456 boot-a 2 1700\nend 2 ex", &r));
  EXPECT_FALSE(r.ended);
  ASSERT_TRUE(
      ParseAttemptRecord("123 456 boot-a 2 1700\nend 1 exit 0 0\n", &r));
  EXPECT_FALSE(r.ended);
  // What wizq wrote before adoption: three fields, attempt unknown.
  ASSERT_TRUE(ParseAttemptRecord("123 456 boot-a\n", &r));
  EXPECT_EQ(r.attempt, 0);
  EXPECT_FALSE(ParseAttemptRecord("", &r));
  EXPECT_FALSE(ParseAttemptRecord("garbage\n", &r));
  EXPECT_FALSE(ParseAttemptRecord("1 2 b 1 5", &r));  // no newline yet
}

class ProbeOrphanTest : public ::testing::Test {
 protected:
  OrphanState Probe(const std::string& record, int attempt) {
    test::WriteAll(dir_.Join("pgid"), record);
    return ProbeOrphan(Env::Posix(), dir_.path(), attempt, nullptr);
  }
  // A pid that is certainly not alive with this start time.
  std::string First(const std::string& boot, int attempt) {
    return "999999 1 " + boot + " " + std::to_string(attempt) + " 1\n";
  }
  test::ScratchDir dir_;
};

TEST_F(ProbeOrphanTest, JudgesByTheRecordAndTheBoot) {
  const std::string boot = CurrentBootId();
  ASSERT_FALSE(boot.empty());
  // Finished on its own in this boot: adoptable, synced or not.
  EXPECT_EQ(Probe(First(boot, 1) + "end 1 exit 0 0\n", 1),
            OrphanState::kFinished);
  EXPECT_EQ(Probe(First(boot, 1) + "end 1 exit 4 0\n", 1),
            OrphanState::kFinished);
  // Another boot: only a synced record is trusted.
  EXPECT_EQ(Probe(First("other", 1) + "end 1 exit 0 1\n", 1),
            OrphanState::kFinished);
  EXPECT_EQ(Probe(First("other", 1) + "end 1 exit 0 0\n", 1),
            OrphanState::kLost);
  // Killed by a signal, never started its shell: lost.
  EXPECT_EQ(Probe(First(boot, 1) + "end 1 signal 9 0\n", 1),
            OrphanState::kLost);
  EXPECT_EQ(Probe(First(boot, 1) + "end 1 spawn 2 0\n", 1), OrphanState::kLost);
  // No end, nothing alive, no lock: died without an exit record.
  EXPECT_EQ(Probe(First(boot, 1), 1), OrphanState::kLost);
  // Another attempt's record, an older wizq's record, none: lost.
  EXPECT_EQ(Probe(First(boot, 1) + "end 1 exit 0 0\n", 2), OrphanState::kLost);
  EXPECT_EQ(Probe("999999 1 " + boot + "\n", 1), OrphanState::kLost);
  EXPECT_EQ(Probe("", 1), OrphanState::kLost);
}

TEST_F(ProbeOrphanTest, AHeldLockIsATreeStillRunning) {
  const std::string boot = CurrentBootId();
  const int fd = open(dir_.Join("running.lock").c_str(),
                      O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(Probe(First(boot, 1), 1), OrphanState::kRunning);
  // Before its supervisor wrote the first line (wizq flocks, then forks).
  EXPECT_EQ(Probe("", 1), OrphanState::kRunning);
  // Ended with a background child holding the lock: finished.
  EXPECT_EQ(Probe(First(boot, 1) + "end 1 exit 0 0\n", 1),
            OrphanState::kFinished);
  close(fd);
  EXPECT_EQ(Probe(First(boot, 1), 1), OrphanState::kLost);
}

}  // namespace
}  // namespace wizq::internal
