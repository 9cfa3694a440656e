// Tests of the queue store (queue/queue.h): the start/resume/archive
// decisions of SPEC §5, dedup (§6.4), the task transitions, finally
// bookkeeping, and checkpoints of queue.json.
#include "queue/queue.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "audit/log.h"
#include "queue/snapshot.h"
#include "queue/state.h"
#include "tests/queue_test_util.h"
#include "tests/test_util.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::MakeTask;
using test::ReadAll;
using test::ReplayFromDisk;
using test::ScratchDir;
using test::WriteAll;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The hook task of `owner` (SPEC §2): it attaches to the owner's parent.
NewTask Hook(const Task& owner) {
  return MakeTask(owner.type, owner.inputs, owner.parent_id, 1,
                  Origin::kFinally, false, owner.id);
}

// Everything durable about a state, one task a line, for EXPECT_EQ diffs.
std::string Describe(const QueueState& s) {
  std::string out = "run " + s.run().run_id + " " +
                    RunStatusName(s.run().status) +
                    " resumes=" + std::to_string(s.run().resumes) +
                    " seq=" + std::to_string(s.last_seq()) + " counts=";
  for (TaskState st : {TaskState::kPending, TaskState::kInProgress,
                       TaskState::kDone, TaskState::kFailed}) {
    out += std::to_string(s.count(st)) + ",";
  }
  out += " settled=" + std::to_string(s.AllSettled()) + " due=";
  for (int64_t id : s.hooks_due()) out += std::to_string(id) + ",";
  out += " pending=";
  for (int64_t id : s.pending()) out += std::to_string(id) + ",";
  out += "\n";
  for (const Task& t : s.tasks()) {
    out +=
        std::to_string(t.id) + " " + t.type + " " + t.inputs + " " +
        TaskStateName(t.state) + " a=" + std::to_string(t.attempts) + "/" +
        std::to_string(t.max_attempts) + " p=" + std::to_string(t.parent_id) +
        " " + OriginName(t.origin) + " key=" + t.dedup_key +
        " by=" + t.claimed_by + " err=" + t.error_reason + ":" +
        t.error_message + " retry_at=" + std::to_string(t.retry_at_ms) +
        " fin=" + std::to_string(t.has_finally) + "/" +
        std::to_string(t.finally_for) + "/" + std::to_string(t.finally_task) +
        " open=" + std::to_string(t.open_children) + " children=";
    for (int64_t c : t.children) out += std::to_string(c) + ",";
    out += "\n";
  }
  return out;
}

// The state recorded in `wizard` rebuilt without the Queue: queue.json
// (when `use_snapshot`), then the audit events after it.
std::string DescribeFromDisk(const std::string& wizard, bool use_snapshot) {
  QueueState state;
  const std::string error = ReplayFromDisk(wizard, use_snapshot, &state);
  return error.empty() ? Describe(state) : error;
}

// The committed lines of a log.
std::vector<std::string> LogLines(const std::string& path) {
  const std::string data = ReadAll(path);
  LogParseResult parsed;
  Status s = ParseLog(path, data, 0, 1, &parsed);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<std::string> lines;
  for (const LogRecord& r : parsed.records) lines.emplace_back(r.line);
  return lines;
}

std::string EventOf(const std::string& line) {
  const std::string key = "\"event\":\"";
  size_t b = line.find(key);
  if (b == std::string::npos) return "";
  b += key.size();
  return line.substr(b, line.find('"', b) - b);
}

std::vector<std::string> LinesOf(const std::string& path,
                                 const std::string& event) {
  std::vector<std::string> out;
  for (const std::string& l : LogLines(path)) {
    if (EventOf(l) == event) out.push_back(l);
  }
  return out;
}

int64_t IntField(const std::string& line, const char* key) {
  simdjson::dom::parser parser;
  int64_t v = -1;
  simdjson::dom::element doc;
  if (parser.parse(line).get(doc) || doc[key].get(v)) return -1;
  return v;
}

std::string StrField(const std::string& line, const char* key) {
  simdjson::dom::parser parser;
  std::string_view v;
  simdjson::dom::element doc;
  if (parser.parse(line).get(doc) || doc[key].get(v)) return "<none>";
  return std::string(v);
}

// Every entry under `root`: relative path -> mode and content (a
// directory's content is empty; a symlink's is its target).
std::map<std::string, std::string> Tree(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    struct stat st;
    EXPECT_EQ(lstat(e.path().c_str(), &st), 0);
    std::string v = std::to_string(st.st_mode) + ":";
    if (S_ISREG(st.st_mode)) v += ReadAll(e.path().string());
    if (S_ISLNK(st.st_mode)) v += fs::read_symlink(e.path()).string();
    out[fs::relative(e.path(), root).string()] = v;
  }
  return out;
}

int Mode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class QueueTest : public ::testing::Test {
 protected:
  QueueTest() : install_(fs::canonical(dir_.path()).string()) {}

  QueueOptions Options(const std::string& run_id = "run-A") const {
    QueueOptions o;
    o.install_dir = install_;
    o.run_id = run_id;
    o.workflow_json = "{\"steps\":[{\"name\":\"Root\"}]}";
    o.entry_input = "{\"in\":1}";
    o.wizq_version = "0.1.0-test";
    o.initial_tasks.push_back(
        MakeTask("Root", "{\"n\":0}", 0, 2, Origin::kInitial));
    return o;
  }

  std::unique_ptr<Queue> OpenOk(const QueueOptions& o,
                                OpenReport* report = nullptr) {
    std::unique_ptr<Queue> q;
    OpenReport local;
    Status s = Queue::Open(o, &q, report ? report : &local);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return q;
  }

  std::string Wizard() const { return install_ + "/.wizard"; }
  std::string LogPath() const { return Wizard() + "/audit.jsonl"; }
  std::string SnapshotPath() const { return Wizard() + "/queue.json"; }

  static int64_t Claim(
      Queue* q, const std::function<bool(const Task&)>& accept = nullptr) {
    int64_t id = -1;
    Status s =
        q->Transact([&](Txn& txn) { return txn.ClaimNext(accept, &id); });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return id;
  }

  static std::vector<int64_t> Complete(
      Queue* q, int64_t id, const std::vector<NewTask>& children = {}) {
    std::vector<int64_t> ids;
    Status s =
        q->Transact([&](Txn& txn) { return txn.Complete(id, children, &ids); });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return ids;
  }

  static bool Fail(Queue* q, int64_t id, bool retryable, int64_t delay_ms = 0) {
    bool will_retry = false;
    Status s = q->Transact([&](Txn& txn) {
      return txn.Fail(id, kReasonExitCode, "exit 1", retryable, delay_ms,
                      &will_retry);
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return will_retry;
  }

  static int64_t Submit(Queue* q, const NewTask& t, bool* dup = nullptr) {
    int64_t id = -1;
    bool d = false;
    Status s = q->Transact([&](Txn& txn) { return txn.Submit(t, &id, &d); });
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (dup) *dup = d;
    return id;
  }

  // The live state must be what the files say, read both ways.
  void ExpectDiskMatches(Queue* q) {
    ASSERT_TRUE(q->Refresh().ok());
    const std::string live = Describe(q->state());
    EXPECT_EQ(DescribeFromDisk(Wizard(), /*use_snapshot=*/true), live);
    EXPECT_EQ(DescribeFromDisk(Wizard(), /*use_snapshot=*/false), live);
  }

  ScratchDir dir_;
  const std::string install_;
};

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
  ASSERT_TRUE(
      q->Transact([&](Txn& txn) { return txn.ClaimNext(nullptr, &id); }).ok());
  ASSERT_TRUE(q->Transact([&](Txn& txn) {
                 return txn.Complete(id, {MakeTask("C", "{}", id, 3)}, nullptr);
               }).ok());
  ASSERT_TRUE(
      q->Transact([&](Txn& txn) { return txn.ClaimNext(nullptr, &id); }).ok());
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
    for (bool fresh : {false, true}) {
      SCOPED_TRACE(std::string(run) + (fresh ? " fresh" : ""));
      QueueOptions o = Options(run);
      o.fresh = fresh;
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
    o.fresh = fresh;
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
  o.fresh = true;
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
    o.fresh = true;
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
  o.fresh = true;
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
  for (size_t i = 0; i < bad.size(); i++) {
    SCOPED_TRACE("case " + std::to_string(i) + ": " + bad[i].substr(0, 60));
    WriteAll(SnapshotPath(), bad[i]);
    const auto before = Tree(Wizard());
    for (bool fresh : {false, true}) {
      QueueOptions o = Options();
      o.fresh = fresh;
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
    o.read_only = read_only;
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
  o.read_only = true;
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

// --- dedup -------------------------------------------------------------------

TEST_F(QueueTest, DedupUsesCanonicalInputs) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  struct Case {
    std::string type, inputs;
    int64_t expect_same_as;  // index into ids, or -1: new
  };
  const std::vector<Case> kCases = {
      {"S", R"({"a":1,"b":2})", -1},                            // 0
      {"S", R"({"b":2,"a":1})", 0},                             // 1
      {"S", " {\n\t\"b\" : 2.0, \"a\" : 1e0 } ", 0},            // 2
      {"T", R"({"a":1,"b":2})", -1},                            // 3 other type
      {"S", "1", -1},                                           // 4
      {"S", "1.0", 4},                                          // 5
      {"S", "1e0", 4},                                          // 6
      {"S", "\"\\u0041\"", -1},                                 // 7
      {"S", "\"A\"", 7},                                        // 8
      {"S", R"({"o":{"x":[1,{"p":1,"q":2}],"y":null}})", -1},   // 9
      {"S", R"({"o":{"y":null,"x":[1.0,{"q":2,"p":1}]}})", 9},  // 10
      {"S", "[1,2]", -1},                                       // 11
      {"S", "[2,1]", -1},                   // 12 order matters
      {"S", "\"1\"", -1},                   // 13 not the number
      {"S", R"({"a":1,"b":2,"c":3})", -1},  // 14
  };
  std::vector<int64_t> ids;
  std::vector<bool> dups;
  Status s = q->Transact([&](Txn& txn) {
    for (const Case& c : kCases) {
      int64_t id = 0;
      bool dup = false;
      WIZQ_RETURN_IF_ERROR(
          txn.Submit(MakeTask(c.type, c.inputs, 1), &id, &dup));
      ids.push_back(id);
      dups.push_back(dup);
    }
    return Status::OK();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<std::string> dedup_lines =
      LinesOf(LogPath(), "task_deduplicated");
  size_t dedup_seen = 0;
  for (size_t i = 0; i < kCases.size(); i++) {
    SCOPED_TRACE(kCases[i].inputs);
    if (kCases[i].expect_same_as < 0) {
      EXPECT_FALSE(dups[i]);
      EXPECT_EQ(q->state().Find(ids[i])->inputs, kCases[i].inputs);
      for (size_t j = 0; j < i; j++) EXPECT_NE(ids[i], ids[j]);
    } else {
      EXPECT_TRUE(dups[i]);
      EXPECT_EQ(ids[i], ids[kCases[i].expect_same_as]);
      ASSERT_LT(dedup_seen, dedup_lines.size());
      EXPECT_EQ(IntField(dedup_lines[dedup_seen], "existing_id"), ids[i]);
      EXPECT_EQ(StrField(dedup_lines[dedup_seen], "type"), kCases[i].type);
      dedup_seen++;
    }
  }
  EXPECT_EQ(dedup_seen, dedup_lines.size());
  // 1 root + the new ones.
  EXPECT_EQ(q->state().total(), 1 + 9);

  // The keys survive a resume from the snapshot and from the log alone.
  ASSERT_TRUE(q->Checkpoint().ok());
  q.reset();
  for (bool drop_snapshot : {false, true}) {
    if (drop_snapshot) fs::remove(SnapshotPath());
    q = OpenOk(Options());
    bool dup = false;
    EXPECT_EQ(Submit(q.get(), MakeTask("S", R"({"b":2.00,"a":1})", 1), &dup),
              ids[0]);
    EXPECT_TRUE(dup);
    EXPECT_EQ(Submit(q.get(), MakeTask("T", R"({"b":2,"a":1})", 1), &dup),
              ids[3]);
    EXPECT_TRUE(dup);
    q.reset();
  }
}

TEST_F(QueueTest, CompleteWithDuplicateChildrenSpawnsEachOnce) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  std::vector<int64_t> ids = Complete(
      q.get(), 1,
      {MakeTask("C", R"({"x":1,"y":[1]})", 1), MakeTask("C", R"({"x":2})", 1),
       MakeTask("C", R"({"y":[1.0],"x":1})", 1),
       MakeTask("C", R"({"x":1, "y":[1]})", 1)});
  EXPECT_EQ(ids, (std::vector<int64_t>{2, 3, 2, 2}));
  EXPECT_EQ(q->state().Find(1)->children, (std::vector<int64_t>{2, 3}));
  std::vector<std::string> completed = LinesOf(LogPath(), "task_completed");
  ASSERT_EQ(completed.size(), 1u);
  EXPECT_TRUE(Contains(completed[0], "\"spawned\":[2,3]")) << completed[0];
  EXPECT_TRUE(Contains(completed[0], "\"deduplicated\":[2,2]")) << completed[0];
  EXPECT_EQ(LinesOf(LogPath(), "task_deduplicated").size(), 2u);
  // A spawned task equal to an existing root is deduplicated as well.
  bool dup = false;
  EXPECT_EQ(Submit(q.get(), MakeTask("Root", "{\"n\":0.0}", 2), &dup), 1);
  EXPECT_TRUE(dup);
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, FinallyTasksDedupOnlyPerOwner) {
  QueueOptions o = Options();
  o.initial_tasks = {
      MakeTask("Step", "{\"v\":1}", 0, 1, Origin::kInitial, true),
      MakeTask("Step", "{\"v\":2}", 0, 1, Origin::kInitial, true)};
  auto q = OpenOk(o);
  for (int i = 0; i < 2; i++) {
    const int64_t id = Claim(q.get());
    Complete(q.get(), id);
  }
  EXPECT_EQ(q->state().hooks_due(), (std::set<int64_t>{1, 2}));
  // Same step, same value for two owners: two hooks.
  NewTask h1 =
      MakeTask("Hook", "{\"same\":true}", 0, 1, Origin::kFinally, false, 1);
  NewTask h2 = h1;
  h2.finally_for = 2;
  bool dup = true;
  const int64_t id1 = Submit(q.get(), h1, &dup);
  EXPECT_FALSE(dup);
  const int64_t id2 = Submit(q.get(), h2, &dup);
  EXPECT_FALSE(dup);
  EXPECT_NE(id1, id2);
  // A second hook for the same owner (whatever its value) is a duplicate.
  NewTask again = h1;
  again.inputs = "{\"other\":1}";
  EXPECT_EQ(Submit(q.get(), again, &dup), id1);
  EXPECT_TRUE(dup);
  // A hook never collides with a spawned task of the same step and value,
  // nor with its owner (which shares them by design).
  EXPECT_NE(Submit(q.get(), MakeTask("Hook", "{\"same\":true}", 0), &dup), id1);
  EXPECT_FALSE(dup);
  EXPECT_EQ(q->state().Find(id1)->finally_for, 1);
  EXPECT_EQ(q->state().Find(1)->finally_task, id1);
  EXPECT_EQ(q->state().Find(2)->finally_task, id2);
  EXPECT_TRUE(q->state().hooks_due().empty());
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, InvalidInputsAreRejectedAndNothingIsStaged) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  const std::string state_before = Describe(q->state());
  const std::string log_before = ReadAll(LogPath());
  for (const char* bad : {"{bad", "", "[1,]", "{\"a\":1} x"}) {
    Status s = q->Transact([&](Txn& txn) {
      int64_t id;
      bool dup;
      WIZQ_RETURN_IF_ERROR(
          txn.Submit(MakeTask("C", "{\"ok\":1}", 1), &id, &dup));
      return txn.Submit(MakeTask("C", bad, 1), &id, &dup);
    });
    EXPECT_TRUE(s.IsInvalidArgument()) << bad << ": " << s.ToString();
    // Neither the valid submit before it nor anything else was kept.
    EXPECT_EQ(Describe(q->state()), state_before);
    EXPECT_EQ(ReadAll(LogPath()), log_before);
    // The same through Complete: the task stays in progress.
    s = q->Transact([&](Txn& txn) {
      return txn.Complete(
          1, {MakeTask("C", "{\"ok\":2}", 1), MakeTask("C", bad, 1)}, nullptr);
    });
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_EQ(Describe(q->state()), state_before);
    EXPECT_EQ(ReadAll(LogPath()), log_before);
  }
  // A failing callback discards what it staged; the queue goes on.
  Status s = q->Transact([&](Txn& txn) {
    int64_t id;
    bool dup;
    WIZQ_RETURN_IF_ERROR(txn.Submit(MakeTask("C", "{\"ok\":3}", 1), &id, &dup));
    return Status::Conflict("changed my mind");
  });
  EXPECT_TRUE(s.IsConflict());
  EXPECT_EQ(Describe(q->state()), state_before);
  EXPECT_EQ(Complete(q.get(), 1, {MakeTask("C", "{\"ok\":1}", 1)}),
            (std::vector<int64_t>{2}));
  ExpectDiskMatches(q.get());
}

// A callback that ignores a failed transition must not get that transition
// committed: the log would hold an event that cannot be applied.
TEST_F(QueueTest, TransitionThatFailedToStageIsNeverCommitted) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1);
  const std::string log_before = ReadAll(LogPath());
  const std::string state_before = Describe(q->state());
  Status s = q->Transact([&](Txn& txn) {
    int64_t id;
    bool dup;
    // No task 99: the submit fails; the callback carries on regardless.
    Status ignored = txn.Submit(MakeTask("C", "{}", 99), &id, &dup);
    EXPECT_FALSE(ignored.ok());
    return Status::OK();
  });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(ReadAll(LogPath()), log_before);
  EXPECT_EQ(Describe(q->state()), state_before);
  // Nor when the parent has settled already.
  s = q->Transact([&](Txn& txn) {
    int64_t id;
    bool dup;
    Status ignored = txn.Submit(MakeTask("C", "{}", 1), &id, &dup);
    EXPECT_FALSE(ignored.ok());
    return Status::OK();
  });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(ReadAll(LogPath()), log_before);
  EXPECT_EQ(Describe(q->state()), state_before);
  // And the run is still readable and usable.
  EXPECT_EQ(Submit(q.get(), MakeTask("C", "{}", 0)), 2);
  q.reset();
  q = OpenOk(Options());
  ASSERT_TRUE(q);
  EXPECT_EQ(q->state().total(), 2);
}

// --- transitions
// ---------------------------------------------------------------

TEST_F(QueueTest, ClaimsInIdOrderAndHonoursAccept) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("X", "1", 0, 1, Origin::kInitial),
                     MakeTask("Y", "2", 0, 1, Origin::kInitial),
                     MakeTask("X", "3", 0, 1, Origin::kInitial),
                     MakeTask("Y", "4", 0, 1, Origin::kInitial)};
  auto q = OpenOk(o);
  auto only_y = [](const Task& t) { return t.type == "Y"; };
  EXPECT_EQ(Claim(q.get(), only_y), 2);
  EXPECT_EQ(Claim(q.get()), 1);
  EXPECT_EQ(Claim(q.get(), only_y), 4);
  EXPECT_EQ(Claim(q.get(), only_y), 0);
  EXPECT_EQ(Claim(q.get()), 3);
  EXPECT_EQ(Claim(q.get()), 0);
  for (int64_t id = 1; id <= 4; id++) {
    EXPECT_EQ(q->state().Find(id)->state, TaskState::kInProgress);
    EXPECT_EQ(q->state().Find(id)->claimed_by, q->worker_id());
  }
  EXPECT_EQ(q->state().count(TaskState::kInProgress), 4);
  std::vector<std::string> claims = LinesOf(LogPath(), "task_claimed");
  ASSERT_EQ(claims.size(), 4u);
  EXPECT_EQ(IntField(claims[0], "id"), 2);
  EXPECT_EQ(StrField(claims[0], "worker"), q->worker_id());
  EXPECT_EQ(IntField(claims[0], "attempt"), 1);
}

TEST_F(QueueTest, AttemptsAreCountedAtClaimSoACrashingTaskEndsFailed) {
  // A task that kills its worker every time: max_attempts 2.
  for (int crash = 1; crash <= 2; crash++) {
    OpenReport report;
    auto q = OpenOk(Options(), &report);
    if (crash == 2) {
      EXPECT_EQ(report.tasks_reset, 1);
    }
    ASSERT_EQ(Claim(q.get()), 1);
    EXPECT_EQ(q->state().Find(1)->attempts, crash);
    EXPECT_EQ(IntField(LinesOf(LogPath(), "task_claimed").back(), "attempt"),
              crash);
    q.reset();  // the worker dies
  }
  OpenReport report;
  auto q = OpenOk(Options(), &report);
  EXPECT_EQ(report.tasks_reset, 0);
  EXPECT_EQ(report.tasks_lost, 1);
  const Task* t = q->state().Find(1);
  EXPECT_EQ(t->state, TaskState::kFailed);
  EXPECT_EQ(t->attempts, 2);
  EXPECT_EQ(t->error_reason, kReasonWorkerLost);
  EXPECT_TRUE(q->state().AllSettled());
  EXPECT_EQ(Claim(q.get()), 0);
  std::vector<std::string> failed = LinesOf(LogPath(), "task_failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(StrField(failed[0], "reason"), "worker_lost");
  EXPECT_TRUE(Contains(failed[0], "\"will_retry\":false"));
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, FailRetriesUntilMaxAttemptsThenFails) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("R", "1", 0, 3, Origin::kInitial),
                     MakeTask("N", "2", 0, 3, Origin::kInitial)};
  auto q = OpenOk(o);
  for (int attempt = 1; attempt <= 3; attempt++) {
    ASSERT_EQ(Claim(q.get()), 1);
    EXPECT_EQ(q->state().Find(1)->attempts, attempt);
    EXPECT_EQ(Fail(q.get(), 1, /*retryable=*/true), attempt < 3);
    EXPECT_EQ(q->state().Find(1)->state,
              attempt < 3 ? TaskState::kPending : TaskState::kFailed);
    EXPECT_EQ(q->state().Find(1)->error_reason, kReasonExitCode);
    EXPECT_EQ(q->state().Find(1)->error_message, "exit 1");
  }
  std::vector<std::string> failed = LinesOf(LogPath(), "task_failed");
  ASSERT_EQ(failed.size(), 3u);
  EXPECT_TRUE(Contains(failed[0], "\"will_retry\":true"));
  EXPECT_TRUE(Contains(failed[2], "\"will_retry\":false"));
  EXPECT_EQ(StrField(failed[2], "reason"), "exit_code");
  // Not retryable: failed at once, attempts left or not.
  ASSERT_EQ(Claim(q.get()), 2);
  EXPECT_FALSE(Fail(q.get(), 2, /*retryable=*/false));
  EXPECT_EQ(q->state().Find(2)->state, TaskState::kFailed);
  EXPECT_EQ(q->state().Find(2)->attempts, 1);
  EXPECT_TRUE(q->state().AllSettled());
  EXPECT_EQ(Claim(q.get()), 0);
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, RetryAtIsRespected) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("A", "1", 0, 5, Origin::kInitial),
                     MakeTask("B", "2", 0, 5, Origin::kInitial),
                     MakeTask("C", "3", 0, 5, Origin::kInitial)};
  auto q = OpenOk(o);
  ASSERT_EQ(Claim(q.get()), 1);
  ASSERT_EQ(Claim(q.get()), 2);
  ASSERT_EQ(Claim(q.get()), 3);
  EXPECT_TRUE(Fail(q.get(), 1, true, 3600 * 1000));  // an hour
  EXPECT_TRUE(Fail(q.get(), 2, true, 150));
  EXPECT_TRUE(Fail(q.get(), 3, true, 0));
  const auto failed_at = std::chrono::steady_clock::now();
  EXPECT_GT(q->state().Find(1)->retry_at_ms, q->state().Find(3)->retry_at_ms);
  // Task 3 is ready at once; 1 and 2 are pending but not ready.
  EXPECT_EQ(Claim(q.get()), 3);
  if (std::chrono::steady_clock::now() - failed_at <
      std::chrono::milliseconds(140)) {
    EXPECT_EQ(Claim(q.get()), 0);
  }
  EXPECT_EQ(q->state().Find(1)->state, TaskState::kPending);
  EXPECT_EQ(q->state().Find(2)->state, TaskState::kPending);
  std::this_thread::sleep_until(failed_at + std::chrono::milliseconds(200));
  EXPECT_EQ(Claim(q.get()), 2);
  EXPECT_EQ(Claim(q.get()), 0);
  Complete(q.get(), 2);
  Complete(q.get(), 3);
  // The delay is durable: still not claimable after a resume.
  ASSERT_TRUE(q->Close().ok());
  q = OpenOk(Options());
  EXPECT_EQ(Claim(q.get()), 0);
  EXPECT_EQ(q->state().Find(1)->state, TaskState::kPending);
  EXPECT_GT(q->state().Find(1)->retry_at_ms, 0);
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, OnlyTheHolderCanCompleteOrFail) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("A", "1", 0, 2, Origin::kInitial),
                     MakeTask("B", "2", 0, 2, Origin::kInitial)};
  auto q1 = OpenOk(o);
  auto q2 = OpenOk(o);
  ASSERT_EQ(Claim(q1.get()), 1);
  const std::string log_before = ReadAll(LogPath());
  bool retry = false;
  Status s =
      q2->Transact([&](Txn& txn) { return txn.Complete(1, {}, nullptr); });
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  s = q2->Transact([&](Txn& txn) {
    return txn.Fail(1, kReasonTimeout, "", true, 0, &retry);
  });
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  // Not claimed by anyone, or not a task at all.
  s = q1->Transact([&](Txn& txn) { return txn.Complete(2, {}, nullptr); });
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  s = q1->Transact([&](Txn& txn) { return txn.Complete(99, {}, nullptr); });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(ReadAll(LogPath()), log_before);
  // The holder still can; afterwards nobody can complete it again.
  Complete(q1.get(), 1);
  s = q1->Transact([&](Txn& txn) { return txn.Complete(1, {}, nullptr); });
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  s = q2->Transact([&](Txn& txn) { return txn.Complete(1, {}, nullptr); });
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  // Conflicts do not stop a queue.
  EXPECT_EQ(Claim(q2.get()), 2);
  Complete(q2.get(), 2);
  EXPECT_TRUE(q2->state().AllSettled());
}

TEST_F(QueueTest, ResetDeadWorkersPutsBackOnlyDeadClaims) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("A", "1", 0, 2, Origin::kInitial),
                     MakeTask("B", "2", 0, 1, Origin::kInitial),
                     MakeTask("C", "3", 0, 2, Origin::kInitial)};
  auto q1 = OpenOk(o);
  auto q2 = OpenOk(o);
  ASSERT_EQ(Claim(q2.get()), 1);
  ASSERT_EQ(Claim(q2.get()), 2);
  ASSERT_EQ(Claim(q1.get()), 3);
  int64_t reset = -1, lost = -1;
  auto reset_dead = [&](Queue* q) {
    reset = lost = 0;
    Status s = q->Transact(
        [&](Txn& txn) { return txn.ResetDeadWorkers(&reset, &lost); });
    EXPECT_TRUE(s.ok()) << s.ToString();
  };
  reset_dead(q1.get());  // q2 is alive: nothing to do
  EXPECT_EQ(reset, 0);
  EXPECT_EQ(lost, 0);
  q2.reset();  // q2's process dies
  reset_dead(q1.get());
  EXPECT_EQ(reset, 1);
  EXPECT_EQ(lost, 1);
  EXPECT_EQ(q1->state().Find(1)->state, TaskState::kPending);
  EXPECT_EQ(q1->state().Find(1)->attempts, 1);
  EXPECT_EQ(q1->state().Find(2)->state, TaskState::kFailed);
  EXPECT_EQ(q1->state().Find(2)->error_reason, kReasonWorkerLost);
  EXPECT_EQ(q1->state().Find(3)->state, TaskState::kInProgress);  // q1's own
  EXPECT_EQ(LinesOf(LogPath(), "task_reset").size(), 1u);
  reset_dead(q1.get());  // idempotent
  EXPECT_EQ(reset + lost, 0);
  EXPECT_EQ(Claim(q1.get()), 1);
  EXPECT_EQ(q1->state().Find(1)->attempts, 2);
  ExpectDiskMatches(q1.get());
}

// --- finally bookkeeping ----------------------------------------------------

TEST_F(QueueTest, FinallyHookIsDueOnceTheTaskAndItsSubtreeSettle) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("R", "{}", 0, 1, Origin::kInitial, true)};
  auto q = OpenOk(o);
  auto due = [&]() { return q->state().hooks_due(); };
  using Ids = std::set<int64_t>;
  ASSERT_EQ(Claim(q.get()), 1);
  // R spawns C1 (with a hook of its own) and C2.
  Complete(q.get(), 1,
           {MakeTask("C1", "{}", 1, 1, Origin::kSpawned, true),
            MakeTask("C2", "{}", 1)});
  EXPECT_EQ(due(), Ids{});  // R waits for its children
  EXPECT_FALSE(q->state().AllSettled());
  ExpectDiskMatches(q.get());
  ASSERT_EQ(Claim(q.get()), 2);
  Complete(q.get(), 2);
  EXPECT_EQ(due(), Ids{2});  // C1 done without children: its hook is due
  ASSERT_EQ(Claim(q.get()), 3);
  Complete(q.get(), 3);
  EXPECT_EQ(due(), Ids{2});  // R still waits for C1's hook
  ExpectDiskMatches(q.get());
  // C1's hook attaches to R, which waits for it too.
  const int64_t h1 = Submit(q.get(), Hook(*q->state().Find(2)));
  EXPECT_EQ(q->state().Find(h1)->parent_id, 1);
  EXPECT_EQ(due(), Ids{});
  ExpectDiskMatches(q.get());
  ASSERT_EQ(Claim(q.get()), h1);
  // The hook prints a task; it attaches to R as well.
  std::vector<int64_t> out = Complete(q.get(), h1, {MakeTask("Out", "{}", 1)});
  EXPECT_EQ(due(), Ids{});
  ASSERT_EQ(Claim(q.get()), out[0]);
  Complete(q.get(), out[0]);
  EXPECT_EQ(due(), Ids{1});  // innermost first: now R's own hook
  EXPECT_FALSE(q->state().AllSettled());
  ExpectDiskMatches(q.get());
  const int64_t hr = Submit(q.get(), Hook(*q->state().Find(1)));
  EXPECT_EQ(due(), Ids{});
  EXPECT_FALSE(q->state().AllSettled());
  ASSERT_EQ(Claim(q.get()), hr);
  Complete(q.get(), hr);
  EXPECT_TRUE(q->state().AllSettled());
  ExpectDiskMatches(q.get());
  ASSERT_TRUE(q->Close().ok());
  q = OpenOk(o);
  EXPECT_TRUE(q->state().AllSettled());
  EXPECT_EQ(due(), Ids{});
}

TEST_F(QueueTest, FailedTaskHasNoHookAndSettlesItsParent) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("R", "{}", 0, 1, Origin::kInitial, true)};
  auto q = OpenOk(o);
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1, {MakeTask("C", "{}", 1, 1, Origin::kSpawned, true)});
  ASSERT_EQ(Claim(q.get()), 2);
  EXPECT_FALSE(Fail(q.get(), 2, true));
  // C failed for good: no hook for it; R (done) is now due.
  EXPECT_EQ(q->state().hooks_due(), std::set<int64_t>{1});
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, AllSettledNeedsAtLeastOneTask) {
  QueueOptions o = Options();
  o.initial_tasks.clear();
  auto q = OpenOk(o);
  EXPECT_FALSE(q->state().AllSettled());
  EXPECT_EQ(Claim(q.get()), 0);
}

// A task that is due for its hook gets a new child (attached while it
// waits): it is no longer due, live as well as when read back.
TEST_F(QueueTest, AttachingAChildToADueTaskMakesItWaitAgain) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("R", "{}", 0, 1, Origin::kInitial, true)};
  auto q = OpenOk(o);
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1);
  EXPECT_EQ(q->state().hooks_due(), std::set<int64_t>{1});
  Submit(q.get(), MakeTask("Late", "{}", 1));
  EXPECT_EQ(q->state().hooks_due(), std::set<int64_t>{});
  ExpectDiskMatches(q.get());
}

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
}  // namespace wizq
