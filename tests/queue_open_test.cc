// Tests of the queue store's start/resume/archive decisions (SPEC §5):
// fresh runs, resume, join, archive, refusal, corrupt and foreign files.
#include <gtest/gtest.h>

#include "queue/dir/queue.h"
#include "tests/queue_fixture.h"

namespace wizq {
namespace queue_fixture {
namespace {

// --- start, resume, join ----------------------------------------------------

TEST_F(QueueTest, FreshRunIsStartedAndLogged) {
  OpenReport report;
  auto q = OpenOk(Options(), &report);
  ASSERT_TRUE(q);
  EXPECT_EQ(report.action, OpenAction::kStartedFresh);
  EXPECT_EQ(report.archived_to, "");
  EXPECT_EQ(report.tasks_pending, 1);
  EXPECT_EQ(q->wizard_dir(), Wizard());
  EXPECT_EQ(q->state().run().run_id, "run-A");
  EXPECT_EQ(q->state().run().install_dir, install_);
  EXPECT_EQ(q->state().run().workflow, Options().workflow_json);
  EXPECT_EQ(q->state().run().entry_input, "{\"in\":1}");
  std::vector<std::string> lines = LogLines(LogPath());
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(EventOf(lines[0]), "run_started");
  EXPECT_EQ(StrField(lines[0], "run_id"), "run-A");
  EXPECT_EQ(LinesOf(LogPath(), "task_submitted").size(), 1u);
  EXPECT_EQ(LinesOf(LogPath(), "worker_joined").size(), 1u);
  // A fresh run's snapshot is exact.
  EXPECT_EQ(DescribeFromDisk(Wizard(), true), Describe(q->state()));
  ASSERT_TRUE(q->Close().ok());
  EXPECT_EQ(LinesOf(LogPath(), "worker_left").size(), 1u);
}

TEST_F(QueueTest, MatchingRunIsResumedAndStaleClaimsReset) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  EXPECT_EQ(q->state().Find(1)->attempts, 1);
  q.reset();  // a crash: no Close
  OpenReport report;
  q = OpenOk(Options(), &report);
  ASSERT_TRUE(q);
  EXPECT_EQ(report.action, OpenAction::kResumed);
  EXPECT_EQ(report.tasks_reset, 1);
  EXPECT_EQ(report.tasks_lost, 0);
  EXPECT_EQ(report.tasks_pending, 1);
  const Task* t = q->state().Find(1);
  EXPECT_EQ(t->state, TaskState::kPending);
  EXPECT_EQ(t->attempts, 1);
  EXPECT_EQ(t->error_reason, kReasonWorkerLost);
  std::vector<std::string> resumed = LinesOf(LogPath(), "run_resumed");
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(IntField(resumed[0], "tasks_reset"), 1);
  EXPECT_EQ(IntField(resumed[0], "tasks_pending"), 1);
  EXPECT_EQ(IntField(resumed[0], "tasks_done"), 0);
  EXPECT_EQ(LinesOf(LogPath(), "task_reset").size(), 1u);
  EXPECT_EQ(q->state().run().resumes, 1);
  ASSERT_TRUE(q->Close().ok());
  q = OpenOk(Options(), &report);
  EXPECT_EQ(report.action, OpenAction::kResumed);
  EXPECT_EQ(report.tasks_reset, 0);
  EXPECT_EQ(LinesOf(LogPath(), "run_resumed").size(), 2u);
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, SecondOpenWhileAliveJoins) {
  auto q1 = OpenOk(Options());
  const size_t resumed_before = LinesOf(LogPath(), "run_resumed").size();
  OpenReport report;
  auto q2 = OpenOk(Options(), &report);
  ASSERT_TRUE(q2);
  EXPECT_EQ(report.action, OpenAction::kJoined);
  EXPECT_EQ(report.archived_to, "");
  EXPECT_NE(q1->worker_id(), q2->worker_id());
  // Joining is not resuming.
  EXPECT_EQ(LinesOf(LogPath(), "run_resumed").size(), resumed_before);
  EXPECT_EQ(LinesOf(LogPath(), "worker_joined").size(), 2u);
}

TEST_F(QueueTest, TwoQueuesNeverClaimOneTaskAndSeeEachOthersTransitions) {
  auto q1 = OpenOk(Options());
  auto q2 = OpenOk(Options());
  ASSERT_EQ(Claim(q1.get()), 1);
  EXPECT_EQ(Claim(q2.get()), 0);  // the only task is held by q1
  std::vector<int64_t> kids =
      Complete(q1.get(), 1,
               {MakeTask("C", "{\"i\":1}", 1), MakeTask("C", "{\"i\":2}", 1),
                MakeTask("C", "{\"i\":3}", 1)});
  ASSERT_EQ(kids, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(Claim(q2.get()), 2);  // q2 caught up with q1's completion
  EXPECT_EQ(Claim(q1.get()), 3);
  EXPECT_EQ(Claim(q2.get()), 4);
  EXPECT_EQ(Claim(q1.get()), 0);
  Complete(q2.get(), 2);
  Complete(q1.get(), 3);
  Complete(q2.get(), 4);
  ASSERT_TRUE(q1->Refresh().ok());
  ASSERT_TRUE(q2->Refresh().ok());
  EXPECT_EQ(Describe(q1->state()), Describe(q2->state()));
  EXPECT_TRUE(q1->state().AllSettled());
  EXPECT_EQ(LinesOf(LogPath(), "task_claimed").size(), 4u);
  ExpectDiskMatches(q1.get());
}

// --- archive, refuse --------------------------------------------------------

TEST_F(QueueTest, DifferentRunIdIsArchivedByteForByte) {
  auto q = OpenOk(Options("run-A"));
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1, {MakeTask("C", "{}", 1)});
  ASSERT_TRUE(q->Close().ok());
  q.reset();
  const std::string old_snapshot = ReadAll(SnapshotPath());
  const std::string old_log = ReadAll(LogPath());

  OpenReport report;
  q = OpenOk(Options("run-B"), &report);
  ASSERT_TRUE(q);
  EXPECT_EQ(report.action, OpenAction::kStartedFresh);
  ASSERT_NE(report.archived_to, "");
  EXPECT_EQ(report.archived_to.rfind(Wizard() + "/archive/", 0), 0u)
      << report.archived_to;
  EXPECT_TRUE(Contains(report.archive_reason, "run-A"))
      << report.archive_reason;
  EXPECT_EQ(ReadAll(report.archived_to + "/queue.json"), old_snapshot);
  EXPECT_EQ(ReadAll(report.archived_to + "/audit.jsonl"), old_log);
  EXPECT_EQ(Mode(Wizard() + "/archive"), 0700);
  // The new run starts from scratch, and its log says what happened.
  EXPECT_EQ(q->state().run().run_id, "run-B");
  EXPECT_EQ(q->state().total(), 1);
  EXPECT_EQ(q->state().Find(1)->state, TaskState::kPending);
  std::vector<std::string> lines = LogLines(LogPath());
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(EventOf(lines[0]), "run_started");
  EXPECT_EQ(StrField(lines[0], "run_id"), "run-B");
  std::vector<std::string> archived = LinesOf(LogPath(), "queue_archived");
  ASSERT_EQ(archived.size(), 1u);
  EXPECT_EQ(StrField(archived[0], "path"), report.archived_to);
  EXPECT_EQ(StrField(archived[0], "reason"), report.archive_reason);
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, DifferentInstallDirIsArchived) {
  const std::string a = install_ + "/a";
  const std::string b = install_ + "/b";
  fs::create_directory(a);
  QueueOptions o = Options();
  o.install_dir = a;
  {
    std::unique_ptr<Queue> q;
    ASSERT_TRUE(Queue::Open(o, &q, nullptr).ok());
    ASSERT_TRUE(q->Close().ok());
  }
  const std::string old_log = ReadAll(a + "/.wizard/audit.jsonl");
  fs::rename(a, b);  // the install directory was moved
  o.install_dir = b;
  std::unique_ptr<Queue> q;
  OpenReport report;
  Status s = Queue::Open(o, &q, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(report.action, OpenAction::kStartedFresh);
  ASSERT_NE(report.archived_to, "");
  EXPECT_TRUE(Contains(report.archive_reason, "install_dir"))
      << report.archive_reason;
  EXPECT_EQ(ReadAll(report.archived_to + "/audit.jsonl"), old_log);
  EXPECT_EQ(q->state().run().install_dir, b);
}

TEST_F(QueueTest, OlderFormatIsArchived) {
  {
    auto q = OpenOk(Options());
    ASSERT_TRUE(q->Close().ok());
  }
  std::string snapshot = ReadAll(SnapshotPath());
  const size_t at = snapshot.find("\"version\":1,");
  ASSERT_NE(at, std::string::npos);
  snapshot.replace(at, 12, "\"version\":0,");
  WriteAll(SnapshotPath(), snapshot);
  const std::string old_log = ReadAll(LogPath());
  OpenReport report;
  auto q = OpenOk(Options(), &report);
  ASSERT_TRUE(q);
  EXPECT_EQ(report.action, OpenAction::kStartedFresh);
  ASSERT_NE(report.archived_to, "");
  EXPECT_TRUE(Contains(report.archive_reason, "version"))
      << report.archive_reason;
  EXPECT_EQ(ReadAll(report.archived_to + "/queue.json"), snapshot);
  EXPECT_EQ(ReadAll(report.archived_to + "/audit.jsonl"), old_log);
  EXPECT_EQ(LinesOf(LogPath(), "queue_archived").size(), 1u);
}

// Leaves a crashed run: a task in progress by a dead worker, events after
// the snapshot, and the dead worker's entry in workers/.
void LeaveCrashedRun(const QueueOptions& o) {
  std::unique_ptr<Queue> q;
  ASSERT_TRUE(Queue::Open(o, &q, nullptr).ok());
  int64_t id = 0;
  ASSERT_TRUE(q->Transact([&](Txn& txn) {
                 return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
               }).ok());
  ASSERT_TRUE(q->Transact([&](Txn& txn) {
                 return txn.Complete(id, {MakeTask("C", "{}", id, 3)}, nullptr);
               }).ok());
  ASSERT_TRUE(q->Transact([&](Txn& txn) {
                 return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
               }).ok());
}

TEST_F(QueueTest, NewerFormatIsRefusedAndNothingIsTouched) {
  LeaveCrashedRun(Options());
  std::string snapshot = ReadAll(SnapshotPath());
  const size_t at = snapshot.find("\"version\":1,");
  ASSERT_NE(at, std::string::npos);
  snapshot.replace(at, 12, "\"version\":2,");
  WriteAll(SnapshotPath(), snapshot);
  const auto before = Tree(Wizard());
  ASSERT_FALSE(fs::is_empty(Wizard() + "/workers"));  // the dead worker
  for (const char* run : {"run-A", "run-B"}) {
    for (OpenMode mode :
         {OpenMode::kRun, OpenMode::kFresh, OpenMode::kAttach}) {
      SCOPED_TRACE(std::string(run) + " mode " +
                   std::to_string(static_cast<int>(mode)));
      QueueOptions o = Options(run);
      o.mode = mode;
      std::unique_ptr<Queue> q;
      Status s = Queue::Open(o, &q, nullptr);
      EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
      EXPECT_TRUE(Contains(s.message(), "version 2")) << s.message();
      EXPECT_FALSE(q);
      EXPECT_EQ(Tree(Wizard()), before);
    }
  }
}

// A newer wizq that crashed before its first snapshot: only its log is
// there (with a torn tail). Refused too, and nothing is touched, not even
// the torn tail.
TEST_F(QueueTest, NewerFormatLogWithoutSnapshotIsRefusedUntouched) {
  fs::create_directories(Wizard() + "/workers");
  fs::create_directories(Wizard() + "/tasks");
  WriteAll(Wizard() + "/lock", "");
  std::unique_ptr<LogWriter> writer;
  ASSERT_TRUE(LogWriter::Open(Env::Posix(), LogPath(), 0, 1, &writer).ok());
  JsonWriter& w = writer->BeginEvent("run_started", 1);
  w.Key("format").Int(kSnapshotVersion + 1);
  w.Field("run_id", "run-A").Field("install_dir", install_);
  w.Key("workflow").RawValue("{}");
  writer->EndEvent();
  writer->BeginEvent("some_future_event", 2).Key("x").Int(1);
  writer->EndEvent();
  ASSERT_TRUE(writer->Commit().ok());
  writer.reset();
  WriteAll(LogPath(), ReadAll(LogPath()) + "{\"seq\":3,\"torn");
  const auto before = Tree(Wizard());
  std::unique_ptr<Queue> q;
  Status s = Queue::Open(Options(), &q, nullptr);
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_EQ(Tree(Wizard()), before);
}

TEST_F(QueueTest, ForeignRunWithLiveWorkerIsBusyAndNothingChanges) {
  auto a = OpenOk(Options("run-A"));
  ASSERT_EQ(Claim(a.get()), 1);
  const auto before = Tree(Wizard());
  for (bool fresh : {false, true}) {
    QueueOptions o = Options("run-B");
    o.mode = fresh ? OpenMode::kFresh : OpenMode::kRun;
    std::unique_ptr<Queue> b;
    Status s = Queue::Open(o, &b, nullptr);
    ASSERT_TRUE(s.IsBusy()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), "run-A")) << s.message();
    EXPECT_TRUE(Contains(s.message(), "pid " + std::to_string(getpid())))
        << s.message();
    EXPECT_EQ(Tree(Wizard()), before);
  }
  // --fresh on the same run while a worker of it is alive: refused too.
  QueueOptions o = Options("run-A");
  o.mode = OpenMode::kFresh;
  std::unique_ptr<Queue> b;
  Status s = Queue::Open(o, &b, nullptr);
  ASSERT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(Tree(Wizard()), before);
  // The live run is unharmed.
  Complete(a.get(), 1);
  ASSERT_TRUE(a->Close().ok());
  // Once it is gone, the foreign run is archived as usual.
  OpenReport report;
  auto c = OpenOk(Options("run-B"), &report);
  EXPECT_NE(report.archived_to, "");
}

TEST_F(QueueTest, CompletedRunIsFinishedAndNothingIsWritten) {
  for (RunStatus status : {RunStatus::kCompleted, RunStatus::kFailed}) {
    SCOPED_TRACE(RunStatusName(status));
    QueueOptions o = Options(std::string("run-") + RunStatusName(status));
    auto q = OpenOk(o);
    ASSERT_EQ(Claim(q.get()), 1);
    Complete(q.get(), 1);
    ASSERT_TRUE(q->Transact([&](Txn& txn) {
                   return txn.FinishRun(status, 1234);
                 }).ok());
    EXPECT_EQ(q->state().run().status, status);
    std::vector<std::string> finished = LinesOf(LogPath(), "run_finished");
    ASSERT_EQ(finished.size(), 1u);
    EXPECT_EQ(StrField(finished[0], "status"), RunStatusName(status));
    EXPECT_EQ(IntField(finished[0], "duration_ms"), 1234);
    ASSERT_TRUE(q->Close().ok());
    q.reset();
    const auto before = Tree(Wizard());
    const std::string log = ReadAll(LogPath());
    OpenReport report;
    q = OpenOk(o, &report);
    ASSERT_TRUE(q);
    EXPECT_EQ(report.action, OpenAction::kFinished);
    EXPECT_EQ(report.tasks_done, 1);
    EXPECT_EQ(ReadAll(LogPath()), log);
    EXPECT_EQ(Tree(Wizard()), before);
    // Nothing can run in a finished run.
    Status s = q->Transact([](Txn&) { return Status::OK(); });
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(q->Close().ok());
    q.reset();
    EXPECT_EQ(Tree(Wizard()), before);
    // --fresh starts it over, archiving it.
    o.mode = OpenMode::kFresh;
    q = OpenOk(o, &report);
    EXPECT_EQ(report.action, OpenAction::kStartedFresh);
    ASSERT_NE(report.archived_to, "");
    EXPECT_EQ(ReadAll(report.archived_to + "/audit.jsonl"), log);
    EXPECT_EQ(q->state().Find(1)->state, TaskState::kPending);
    ASSERT_TRUE(q->Close().ok());
  }
}

TEST_F(QueueTest, FreshArchivesAMatchingRun) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1, {MakeTask("C", "{}", 1)});
  ASSERT_TRUE(q->Close().ok());
  const std::string old_log = ReadAll(LogPath());
  QueueOptions o = Options();
  o.mode = OpenMode::kFresh;
  OpenReport report;
  q = OpenOk(o, &report);
  ASSERT_TRUE(q);
  EXPECT_EQ(report.action, OpenAction::kStartedFresh);
  ASSERT_NE(report.archived_to, "");
  EXPECT_TRUE(Contains(report.archive_reason, "fresh"))
      << report.archive_reason;
  EXPECT_EQ(ReadAll(report.archived_to + "/audit.jsonl"), old_log);
  EXPECT_EQ(q->state().total(), 1);
  EXPECT_EQ(q->state().Find(1)->state, TaskState::kPending);
}

TEST_F(QueueTest, ArchivesNeverOverwriteEachOther) {
  std::vector<std::string> logs;
  for (int i = 0; i < 3; i++) {
    auto q = OpenOk(Options("run-" + std::to_string(i)));
    ASSERT_TRUE(q->Close().ok());
    logs.push_back(ReadAll(LogPath()));
  }
  auto q = OpenOk(Options("run-last"));
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(Wizard() + "/archive")) {
    found.push_back(ReadAll(e.path().string() + "/audit.jsonl"));
  }
  ASSERT_EQ(found.size(), 3u);
  for (const std::string& log : logs) {
    EXPECT_EQ(std::count(found.begin(), found.end(), log), 1);
  }
}

TEST_F(QueueTest, CorruptSnapshotIsAnErrorNamingItAndNothingIsTouched) {
  LeaveCrashedRun(Options());
  const std::string snapshot = ReadAll(SnapshotPath());
  ASSERT_GT(snapshot.size(), 100u);
  ASSERT_EQ(snapshot.back(), '\n');
  std::vector<std::string> bad;
  // Cut at every offset inside the JSON text (the last byte is its newline).
  for (size_t cut = 0; cut + 1 < snapshot.size(); cut++) {
    bad.push_back(snapshot.substr(0, cut));
  }
  const size_t cuts = bad.size();
  bad.push_back("\n");
  bad.push_back("   ");
  bad.push_back("garbage");
  bad.push_back(std::string(100, '\0'));
  bad.push_back("[]");
  bad.push_back("{}");
  bad.push_back("{\"format\":\"something-else\",\"version\":1}");
  bad.push_back(snapshot.substr(0, snapshot.size() / 2) + "\"}}]}");
  std::string wrong_type = snapshot;
  wrong_type.replace(wrong_type.find("\"attempts\":"), 11,
                     "\"attempts\":\"x\",\"_\":");
  bad.push_back(wrong_type);
  std::string wrong_state = snapshot;
  wrong_state.replace(wrong_state.find("\"state\":\""), 9, "\"state\":\"zz");
  bad.push_back(wrong_state);
  std::string duplicate_key = snapshot;  // inputs no submission could have
  duplicate_key.replace(duplicate_key.find("\"inputs\":{\"n\":0}"), 16,
                        "\"inputs\":{\"n\":0,\"n\":1}");
  bad.push_back(duplicate_key);
  for (size_t i = 0; i < bad.size(); i++) {
    SCOPED_TRACE("case " + std::to_string(i) + ": " + bad[i].substr(0, 60));
    WriteAll(SnapshotPath(), bad[i]);
    const auto before = Tree(Wizard());
    for (bool fresh : {false, true}) {
      QueueOptions o = Options();
      o.mode = fresh ? OpenMode::kFresh : OpenMode::kRun;
      std::unique_ptr<Queue> q;
      Status s = Queue::Open(o, &q, nullptr);
      ASSERT_TRUE(s.IsCorruption()) << s.ToString();
      EXPECT_TRUE(Contains(s.message(), ".wizard/queue.json")) << s.message();
      // A cut file: the message says where the text stops making sense.
      if (i > 0 && i < cuts) {
        EXPECT_TRUE(Contains(s.message(), "byte offset")) << s.message();
      }
      ASSERT_EQ(Tree(Wizard()), before);
    }
  }
  // Put back, it resumes.
  WriteAll(SnapshotPath(), snapshot);
  OpenReport report;
  auto q = OpenOk(Options(), &report);
  EXPECT_EQ(report.action, OpenAction::kResumed);
  EXPECT_EQ(report.tasks_reset, 1);
}

TEST_F(QueueTest, CorruptLogLineIsAnErrorNamingFileAndOffset) {
  LeaveCrashedRun(Options());
  // Without the snapshot the whole log is read; damage its second line.
  fs::remove(SnapshotPath());
  std::string log = ReadAll(LogPath());
  const size_t second_line = log.find('\n') + 1;
  log[second_line + 5] ^= 0x01;
  WriteAll(LogPath(), log);
  const auto before = Tree(Wizard());
  std::unique_ptr<Queue> q;
  Status s = Queue::Open(Options(), &q, nullptr);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), ".wizard/audit.jsonl")) << s.message();
  EXPECT_TRUE(
      Contains(s.message(), "byte offset " + std::to_string(second_line)))
      << s.message();
  EXPECT_EQ(Tree(Wizard()), before);
}

// A whole committed line missing from the middle of the log (every line
// that is left has a good crc) is a seq gap: corruption at the offset of
// the line after the gap, never a silent replay without it.
TEST_F(QueueTest, SeqGapInTheLogIsAnErrorNamingFileAndOffset) {
  LeaveCrashedRun(Options());
  fs::remove(SnapshotPath());
  std::string log = ReadAll(LogPath());
  const size_t claim = log.find("\"event\":\"task_claimed\"");
  ASSERT_NE(claim, std::string::npos);
  const size_t line = log.rfind('\n', claim) + 1;
  log.erase(line, log.find('\n', claim) + 1 - line);
  WriteAll(LogPath(), log);
  const auto before = Tree(Wizard());
  std::unique_ptr<Queue> q;
  Status s = Queue::Open(Options(), &q, nullptr);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), ".wizard/audit.jsonl")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "byte offset " + std::to_string(line)))
      << s.message();
  EXPECT_EQ(Tree(Wizard()), before);
}

TEST_F(QueueTest, LogCutBelowTheSnapshotIsCorruption) {
  LeaveCrashedRun(Options());
  auto q0 = OpenOk(Options());
  ASSERT_TRUE(q0->Close().ok());
  q0.reset();
  WriteAll(LogPath(), ReadAll(LogPath()).substr(0, 100));
  const auto before = Tree(Wizard());
  std::unique_ptr<Queue> q;
  Status s = Queue::Open(Options(), &q, nullptr);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "audit.jsonl")) << s.message();
  EXPECT_EQ(Tree(Wizard()), before);
}

TEST_F(QueueTest, WizardSymlinkIsRefused) {
  const std::string elsewhere = install_ + "/elsewhere";
  fs::create_directory(elsewhere);
  fs::create_directory_symlink(elsewhere, Wizard());
  for (bool read_only : {false, true}) {
    QueueOptions o = Options();
    o.mode = read_only ? OpenMode::kReadOnly : OpenMode::kRun;
    std::unique_ptr<Queue> q;
    Status s = Queue::Open(o, &q, nullptr);
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(Contains(s.message(), "symlink")) << s.ToString();
    EXPECT_TRUE(fs::is_empty(elsewhere));
  }
  // A dangling one too.
  fs::remove(Wizard());
  fs::create_directory_symlink(install_ + "/missing", Wizard());
  std::unique_ptr<Queue> q;
  EXPECT_FALSE(Queue::Open(Options(), &q, nullptr).ok());
  EXPECT_FALSE(fs::exists(install_ + "/missing"));
}

TEST_F(QueueTest, FilesArePrivate) {
  const mode_t old = umask(0);  // modes must not rely on the umask
  {
    auto q = OpenOk(Options());
    ASSERT_EQ(Claim(q.get()), 1);
    Complete(q.get(), 1);
    ASSERT_TRUE(q->Close().ok());
    auto b = OpenOk(Options("run-B"));  // archives run-A
    ASSERT_TRUE(b->Checkpoint().ok());
  }
  umask(old);
  EXPECT_EQ(Mode(Wizard()), 0700);
  EXPECT_EQ(Mode(Wizard() + "/workers"), 0700);
  EXPECT_EQ(Mode(Wizard() + "/tasks"), 0700);
  EXPECT_EQ(Mode(Wizard() + "/archive"), 0700);
  EXPECT_EQ(Mode(SnapshotPath()), 0600);
  EXPECT_EQ(Mode(LogPath()), 0600);
  EXPECT_EQ(Mode(Wizard() + "/lock"), 0600);
  for (const auto& e : fs::recursive_directory_iterator(Wizard())) {
    const int mode = Mode(e.path().string());
    EXPECT_EQ(mode & 077, 0) << e.path() << " mode " << std::oct << mode;
  }
}

TEST_F(QueueTest, ReadOnlyOpenWritesNothing) {
  LeaveCrashedRun(Options());
  const auto before = Tree(Wizard());
  QueueOptions o = Options("some-other-run");
  o.mode = OpenMode::kReadOnly;
  OpenReport report;
  auto q = OpenOk(o, &report);
  ASSERT_TRUE(q);
  EXPECT_EQ(report.action, OpenAction::kReadOnly);
  EXPECT_EQ(q->state().run().run_id, "run-A");
  EXPECT_EQ(q->state().total(), 2);
  EXPECT_FALSE(q->Transact([](Txn&) { return Status::OK(); }).ok());
  EXPECT_TRUE(q->Refresh().ok());
  EXPECT_TRUE(q->Close().ok());
  q.reset();
  EXPECT_EQ(Tree(Wizard()), before);
  ScratchDir empty;
  o.install_dir = empty.path();
  std::unique_ptr<Queue> none;
  EXPECT_TRUE(Queue::Open(o, &none, nullptr).IsNotFound());
  EXPECT_FALSE(fs::exists(empty.path() + "/.wizard"));
}

}  // namespace
}  // namespace queue_fixture
}  // namespace wizq
