// The attempt record (tasks/proc/orphans_record.h): how a later worker judges
// an attempt from what its journal lines say, without any process running.
#include "tasks/proc/orphans_record.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tasks/exec/attempt_journal.h"
#include "tasks/proc/orphans.h"
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

// The previous layout: the record in the task directory's `pgid` file,
// the tree's lock its `running.lock` (a run started by an older wizq).
class ProbeOrphanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(mkdir(dir_.Join("tasks").c_str(), 0700), 0);
    ASSERT_EQ(mkdir(Task().c_str(), 0700), 0);
  }
  std::string Task() { return dir_.Join("tasks/3"); }
  OrphanState Probe(const std::string& record, int attempt) {
    test::WriteAll(Task() + "/pgid", record);
    return ProbeOrphan(Env::Posix(), Task(), attempt, nullptr);
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
  const int fd = open((Task() + "/running.lock").c_str(),
                      O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(Probe(First(boot, 1), 1), OrphanState::kRunning);
  // Before its shell wrote the first line (wizq flocks, then hands the
  // attempt to the spawner).
  EXPECT_EQ(Probe("", 1), OrphanState::kRunning);
  // Ended with a background child holding the lock: finished.
  EXPECT_EQ(Probe(First(boot, 1) + "end 1 exit 0 0\n", 1),
            OrphanState::kFinished);
  close(fd);
  EXPECT_EQ(Probe(First(boot, 1), 1), OrphanState::kLost);
}

TEST(JournalLineTest, ParsesStartAndEndLines) {
  JournalLine l;
  ASSERT_TRUE(ParseJournalLine("start 12 2 345 678 boot-a 1700", &l));
  EXPECT_FALSE(l.is_end);
  EXPECT_EQ(l.key, "12");
  EXPECT_EQ(l.record.attempt, 2);
  EXPECT_EQ(l.record.pid, 345);
  EXPECT_EQ(l.record.start, 678u);
  EXPECT_EQ(l.record.boot_id, "boot-a");
  EXPECT_EQ(l.record.start_wall_ms, 1700);
  ASSERT_TRUE(ParseJournalLine("end 12 2 345 signal 9 1", &l));
  EXPECT_TRUE(l.is_end);
  EXPECT_EQ(l.record.end, AttemptRecord::End::kSignal);
  EXPECT_EQ(l.record.value, 9);
  EXPECT_TRUE(l.record.synced);
  // Torn, foreign or nonsense lines are skipped.
  EXPECT_FALSE(ParseJournalLine("end 12 2 345 exi", &l));
  EXPECT_FALSE(ParseJournalLine("end 12 2 345 quit 0 0", &l));
  EXPECT_FALSE(ParseJournalLine("start 12 0 345 678 b 1", &l));
  EXPECT_FALSE(ParseJournalLine("", &l));
  EXPECT_FALSE(ParseJournalLine("\0\0\0", &l));
}

// The current layout: records in the run's journal, the lock on the
// attempt's stdout file.
class JournalProbeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(mkdir(Tasks().c_str(), 0700), 0); }
  std::string Tasks() { return dir_.Join("tasks"); }
  std::string Task() { return Tasks() + "/3"; }
  // Appends `lines` to the journal and probes attempt `attempt` of task 3.
  OrphanState Probe(const std::string& lines, int attempt) {
    std::string all = test::ReadAll(Tasks() + "/attempts.journal");
    test::WriteAll(Tasks() + "/attempts.journal", all + lines);
    return ProbeOrphan(Env::Posix(), Task(), attempt, nullptr);
  }
  static std::string Start(const std::string& boot, int attempt) {
    return "start 3 " + std::to_string(attempt) + " 999999 1 " + boot + " 1\n";
  }
  static std::string End(int attempt, const std::string& how) {
    return "end 3 " + std::to_string(attempt) + " 999999 " + how + "\n";
  }
  test::ScratchDir dir_;
};

TEST_F(JournalProbeTest, JudgesByTheLatestRecordOfTheTask) {
  const std::string boot = CurrentBootId();
  // No record: lost.
  EXPECT_EQ(Probe("", 1), OrphanState::kLost);
  // Another task's lines do not count.
  EXPECT_EQ(Probe("start 4 1 999999 1 " + boot + " 1\n", 1),
            OrphanState::kLost);
  // Started, no end, nothing alive: lost.
  EXPECT_EQ(Probe(Start(boot, 1), 1), OrphanState::kLost);
  EXPECT_EQ(Probe(End(1, "exit 0 0"), 1), OrphanState::kFinished);
  // An end line of another leader (pid) is not this attempt's.
  EXPECT_EQ(Probe(Start(boot, 2) + "end 3 2 1234 exit 0 0\n", 2),
            OrphanState::kLost);
  EXPECT_EQ(Probe(End(2, "signal 9 0"), 2), OrphanState::kLost);
  // Another boot: only a synced end is trusted.
  EXPECT_EQ(Probe(Start("other", 3) + End(3, "exit 0 0"), 3),
            OrphanState::kLost);
  EXPECT_EQ(Probe(Start("other", 4) + End(4, "exit 0 1"), 4),
            OrphanState::kFinished);
  // The latest attempt is 4: attempt 3's probe finds nothing of its own.
  EXPECT_EQ(Probe("", 3), OrphanState::kLost);
  // A torn last line is skipped, and read once it is whole.
  EXPECT_EQ(Probe(Start(boot, 5) + "end 3 5 99", 5), OrphanState::kLost);
  EXPECT_EQ(Probe("9999 exit 0 0\n", 5), OrphanState::kFinished);
}

TEST_F(JournalProbeTest, AHeldStdoutIsATreeStillRunning) {
  const std::string boot = CurrentBootId();
  const int fd =
      open((Task() + ".1.stdout").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  // Before its shell appended its start line.
  EXPECT_EQ(Probe("", 1), OrphanState::kRunning);
  EXPECT_TRUE(AttemptBegan(Env::Posix(), Task(), 1));
  EXPECT_EQ(Probe(Start(boot, 1), 1), OrphanState::kRunning);
  EXPECT_EQ(Probe(End(1, "exit 0 0"), 1), OrphanState::kFinished);
  close(fd);
  EXPECT_FALSE(AttemptBegan(Env::Posix(), Task(), 2));
  EXPECT_TRUE(AttemptBegan(Env::Posix(), Task(), 1));
}

// A timed-out attempt's tree is found by who holds its stdout file; a
// wizq that only reads it or probes its lock (read-only) is not part of
// the tree and must not be signalled with it (`wizq agent serve` once
// killed a `wizq run` that was probing the lock at that moment).
TEST(FileHoldersTest, OnlyWritersOfTheFileAreHolders) {
  test::ScratchDir dir;
  const std::string path = dir.Join("stdout");
  test::WriteAll(path, "");
  FileInfo file;
  ASSERT_TRUE(Env::Posix()->GetFileInfo(path, &file).ok());
  auto spawn = [&](const std::string& redirect) {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c",
            ("exec 3" + redirect + "'" + path + "'; exec sleep 30").c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  };
  const pid_t reader = spawn("<");
  const pid_t writer = spawn(">>");
  auto holders = [&] { return FileHolders(file); };
  auto has = [](const std::vector<pid_t>& v, pid_t p) {
    return std::find(v.begin(), v.end(), p) != v.end();
  };
  // Both shells exec sleep once their descriptor is open.
  for (int i = 0; i < 500 && !has(holders(), writer); i++) usleep(10000);
  usleep(100000);
  const std::vector<pid_t> found = holders();
  EXPECT_TRUE(has(found, writer));
  EXPECT_FALSE(has(found, reader)) << "a read-only holder is not the tree's";
  kill(reader, SIGKILL);
  kill(writer, SIGKILL);
  waitpid(reader, nullptr, 0);
  waitpid(writer, nullptr, 0);
}

}  // namespace
}  // namespace wizq::internal
