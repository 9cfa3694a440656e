// Tests of queue.json checkpoints: the snapshot's lag stays bounded, it is
// exact at rest, and what it stores reads back the same as the log.
#include <gtest/gtest.h>

#include "queue/dir/queue.h"
#include "tests/queue_fixture.h"

namespace wizq {
namespace queue_fixture {
namespace {

// --- checkpoints ------------------------------------------------------------

SnapshotHeader ReadHeader(const std::string& path) {
  SnapshotHeader h;
  QueueState s;
  Status st = DecodeSnapshot(path, ReadAll(path), &h, &s);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return h;
}

TEST_F(QueueTest, CheckpointsBoundTheLagAndResumeReadsOnlyTheTail) {
  QueueOptions o = Options();
  o.checkpoint_min_bytes = 4096;
  auto q = OpenOk(o);
  int64_t first_seq = ReadHeader(SnapshotPath()).seq;
  std::set<int64_t> seqs{first_seq};
  for (int i = 0; i < 60; i++) {
    const int64_t id = Claim(q.get());
    ASSERT_GT(id, 0);
    std::vector<NewTask> kids;
    if (i < 40) {
      kids.push_back(
          MakeTask("C", "{\"i\":" + std::to_string(2 * i) + "}", id));
      kids.push_back(
          MakeTask("C", "{\"i\":" + std::to_string(2 * i + 1) + "}", id));
    }
    Complete(q.get(), id, kids);
    // The snapshot lags the log by at most max(its size, the minimum).
    const SnapshotHeader h = ReadHeader(SnapshotPath());
    const uint64_t log_size = test::WithoutFreeSpace(ReadAll(LogPath())).size();
    const uint64_t snap_size = fs::file_size(SnapshotPath());
    ASSERT_LE(h.audit_offset, log_size);
    EXPECT_LE(log_size - h.audit_offset, std::max<uint64_t>(snap_size, 4096))
        << "after round " << i;
    seqs.insert(h.seq);
  }
  EXPECT_GE(seqs.size(), 4u) << "queue.json was not rewritten as the log grew";
  // Crash with events after the snapshot, nothing in progress.
  const std::string live = Describe(q->state());
  q.reset();
  const SnapshotHeader h = ReadHeader(SnapshotPath());
  ASSERT_GT(h.seq, first_seq);
  ASSERT_LT(h.audit_offset, fs::file_size(LogPath()));
  // Damage the log before what the snapshot covers: a resume that reads
  // only the tail does not notice.
  std::string log = ReadAll(LogPath());
  log[10] ^= 0x01;
  WriteAll(LogPath(), log);
  OpenReport report;
  q = OpenOk(o, &report);
  ASSERT_TRUE(q);
  EXPECT_EQ(report.action, OpenAction::kResumed);
  // The same tasks (the resume added its own events, no task changes).
  std::string resumed = Describe(q->state());
  auto tasks_of = [](const std::string& d) { return d.substr(d.find('\n')); };
  EXPECT_EQ(tasks_of(resumed), tasks_of(live));
}

TEST_F(QueueTest, SnapshotIsExactAtRest) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1, {MakeTask("C", "{}", 1, 2)});
  ASSERT_EQ(Claim(q.get()), 2);
  ASSERT_TRUE(q->Close().ok());
  // Closed: the free space after the log is cut off.
  EXPECT_EQ(ReadAll(LogPath()), test::WithoutFreeSpace(ReadAll(LogPath())));
  auto check_exact = [&]() {
    const SnapshotHeader h = ReadHeader(SnapshotPath());
    std::vector<std::string> lines = LogLines(LogPath());
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(h.seq, IntField(lines.back(), "seq"));
    EXPECT_EQ(h.audit_offset,
              test::WithoutFreeSpace(ReadAll(LogPath())).size());
    EXPECT_EQ(DescribeFromDisk(Wizard(), true),
              DescribeFromDisk(Wizard(), false));
  };
  check_exact();
  // A finished run is at rest as soon as run_finished is written.
  q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 2);
  Complete(q.get(), 2);
  ASSERT_TRUE(q->Transact([](Txn& txn) {
                 return txn.FinishRun(RunStatus::kCompleted, 5);
               }).ok());
  check_exact();
  EXPECT_EQ(DescribeFromDisk(Wizard(), true), Describe(q->state()));
  ASSERT_TRUE(q->Close().ok());
  check_exact();
  // An explicit checkpoint is exact too.
  q = OpenOk(Options("run-2"));
  ASSERT_EQ(Claim(q.get()), 1);
  ASSERT_TRUE(q->Checkpoint().ok());
  check_exact();
  EXPECT_EQ(DescribeFromDisk(Wizard(), true), Describe(q->state()));
}

// Keys and strings are read as views into the file when they hold no
// escapes, and unescaped when they do (queue/json_util.h): strings with
// escapes survive the log and the snapshot, read in place (Env::ReadFile
// leaves the parser's padding) or from a copy without it, and so do keys
// written with escapes by someone else.
TEST_F(QueueTest, StringsWithEscapesReadBackFromSnapshotAndLog) {
  auto q = OpenOk(Options());
  const std::string type = "Say \"hi\" \\ \t\n\u00e9\u2028";
  const std::string inputs = "{\"k\\\"ey\":\"v\\\\al\\u0041\\n\"}";
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1,
           {MakeTask(type, inputs, 1, 2), MakeTask("Plain", "{}", 1)});
  ASSERT_EQ(Claim(q.get()), 2);
  bool will_retry = false;
  ASSERT_TRUE(q->Transact([&](Txn& txn) {
                 return txn.Fail(2, kReasonExitCode, "exit \"1\"\n\\ \x01",
                                 true, 0, &will_retry);
               }).ok());
  ASSERT_TRUE(will_retry);
  ASSERT_TRUE(q->Checkpoint().ok());
  ExpectDiskMatches(q.get());
  const Task* t = q->state().Find(2);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, type);
  EXPECT_EQ(t->inputs, inputs);
  EXPECT_EQ(t->error_message, "exit \"1\"\n\\ \x01");

  const std::string live = Describe(q->state());
  std::string text;
  ASSERT_TRUE(Env::Posix()->ReadFile(SnapshotPath(), &text).ok());
  ASSERT_GE(text.capacity(), text.size() + Env::kReadSlack);
  std::string escaped_keys = text;
  for (size_t at = 0;
       (at = escaped_keys.find("\"type\":", at)) != std::string::npos;) {
    escaped_keys.replace(at, 7, "\"t\\u0079pe\":");
  }
  ASSERT_NE(escaped_keys, text);
  for (const std::string& variant :
       {text, std::string(text.data(), text.size()), escaped_keys}) {
    SnapshotHeader h;
    QueueState from_snapshot;
    Status s = DecodeSnapshot(SnapshotPath(), variant, &h, &from_snapshot);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(Describe(from_snapshot), live);
  }
}

// A worker killed after run_finished but before Close leaves the log's
// free space; the next `wizq run` on the finished run trims it, so a log
// at rest is plain JSON Lines.
TEST_F(QueueTest, FinishedRunLeftWithFreeSpaceIsTrimmedOnTheNextOpen) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1);
  ASSERT_TRUE(q->Transact([](Txn& txn) {
                 return txn.FinishRun(RunStatus::kCompleted, 5);
               }).ok());
  q.reset();  // no Close: killed
  const std::string left = ReadAll(LogPath());
  ASSERT_GT(left.size(), test::WithoutFreeSpace(left).size());
  OpenReport report;
  q = OpenOk(Options(), &report);
  EXPECT_EQ(report.action, OpenAction::kFinished);
  EXPECT_EQ(ReadAll(LogPath()), test::WithoutFreeSpace(left));
}

}  // namespace
}  // namespace queue_fixture
}  // namespace wizq
