// Tests of OpenMode::kAttach (work on whatever run is there, without
// starting, resuming or archiving it) and of the reclaim of lost claims
// that every transaction makes (queue/claim_holder.h).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>

#include "queue/claim_holder.h"
#include "queue/dir/queue.h"
#include "tests/queue_fixture.h"

namespace wizq {
namespace queue_fixture {
namespace {

// An agent's options: no run_id, workflow or tasks of its own.
QueueOptions AttachOptions(const std::string& install_dir) {
  QueueOptions o;
  o.install_dir = install_dir;
  o.mode = OpenMode::kAttach;
  return o;
}

Status Attach(const std::string& install_dir, std::unique_ptr<Queue>* q,
              OpenReport* report) {
  return Queue::Open(AttachOptions(install_dir), q, report);
}

TEST_F(QueueTest, AttachWithoutARunIsNotFoundAndCreatesNothing) {
  std::unique_ptr<Queue> q;
  OpenReport report;
  Status s = Attach(install_, &q, &report);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "no wizq run")) << s.message();
  EXPECT_FALSE(q);
  EXPECT_FALSE(fs::exists(Wizard()));
  // A .wizard directory with no run in it.
  fs::create_directories(Wizard());
  s = Attach(install_, &q, &report);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "attach")) << s.message();
  EXPECT_FALSE(fs::exists(LogPath()));
  EXPECT_FALSE(fs::exists(SnapshotPath()));
}

TEST_F(QueueTest, AttachJoinsARunningRunWithAnotherLiveWorker) {
  auto q1 = OpenOk(Options());
  const size_t resumed = LinesOf(LogPath(), "run_resumed").size();
  std::unique_ptr<Queue> q2;
  OpenReport report;
  ASSERT_TRUE(Attach(install_, &q2, &report).ok());
  EXPECT_EQ(report.action, OpenAction::kAttached);
  EXPECT_EQ(report.archived_to, "");
  EXPECT_EQ(report.tasks_pending, 1);
  EXPECT_EQ(q2->state().run().run_id, "run-A");
  EXPECT_NE(q1->worker_id(), q2->worker_id());
  EXPECT_EQ(LinesOf(LogPath(), "run_resumed").size(), resumed);
  EXPECT_EQ(LinesOf(LogPath(), "worker_joined").size(), 2u);
  // Both work the one run.
  EXPECT_EQ(Claim(q2.get()), 1);
  EXPECT_EQ(Claim(q1.get()), 0);
  Complete(q2.get(), 1, {MakeTask("C", "{}", 1, 1)});
  EXPECT_EQ(Claim(q1.get()), 2);
  ASSERT_TRUE(q2->Close().ok());
  EXPECT_EQ(LinesOf(LogPath(), "worker_left").size(), 1u);
  EXPECT_FALSE(fs::exists(Wizard() + "/archive"));
  ExpectDiskMatches(q1.get());
}

// A stopped run stays as it was: attaching does not resume it (no
// run_resumed, the resume count unchanged), but the dead worker's claim is
// put back, as any transaction would.
TEST_F(QueueTest, AttachDoesNotResumeAStoppedRun) {
  {
    auto q = OpenOk(Options());
    ASSERT_EQ(Claim(q.get()), 1);
  }  // a crash: no Close
  std::unique_ptr<Queue> q;
  OpenReport report;
  ASSERT_TRUE(Attach(install_, &q, &report).ok());
  EXPECT_EQ(report.action, OpenAction::kAttached);
  EXPECT_EQ(report.tasks_reset, 1);
  EXPECT_EQ(report.tasks_pending, 1);
  EXPECT_EQ(LinesOf(LogPath(), "run_resumed").size(), 0u);
  EXPECT_EQ(q->state().run().resumes, 0);
  EXPECT_EQ(q->state().run().status, RunStatus::kRunning);
  EXPECT_EQ(q->state().Find(1)->state, TaskState::kPending);
  EXPECT_EQ(LinesOf(LogPath(), "task_reset").size(), 1u);
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, AttachToAFinishedRunSeesItFinishedAndWritesNothing) {
  {
    auto q = OpenOk(Options());
    ASSERT_EQ(Claim(q.get()), 1);
    Complete(q.get(), 1);
    ASSERT_TRUE(q->Transact([](Txn& txn) {
                   return txn.FinishRun(RunStatus::kCompleted, 5);
                 }).ok());
    ASSERT_TRUE(q->Close().ok());
  }
  const auto before = Tree(Wizard());
  std::unique_ptr<Queue> q;
  OpenReport report;
  ASSERT_TRUE(Attach(install_, &q, &report).ok());
  EXPECT_EQ(report.action, OpenAction::kFinished);
  EXPECT_EQ(q->state().run().status, RunStatus::kCompleted);
  EXPECT_EQ(q->state().count(TaskState::kDone), 1);
  Status s = q->Transact([](Txn&) { return Status::OK(); });
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  q.reset();
  auto after = Tree(Wizard());
  after.erase("lock");
  auto expected = before;
  expected.erase("lock");
  EXPECT_EQ(after, expected);
}

// Attach takes any run_id, but never archives: an older format is refused.
TEST_F(QueueTest, AttachRefusesAnOlderFormatUntouched) {
  {
    auto q = OpenOk(Options());
    ASSERT_TRUE(q->Close().ok());
  }
  std::string snapshot = ReadAll(SnapshotPath());
  const size_t at = snapshot.find("\"version\":1,");
  ASSERT_NE(at, std::string::npos);
  snapshot.replace(at, 12, "\"version\":0,");
  WriteAll(SnapshotPath(), snapshot);
  const auto before = Tree(Wizard());
  std::unique_ptr<Queue> q;
  Status s = Attach(install_, &q, nullptr);
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "older format version 0")) << s.message();
  EXPECT_EQ(Tree(Wizard()), before);
}

TEST_F(QueueTest, TransactionOfAnAttachedQueueReclaimsADeadWorkersTask) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("A", "1", 0, 2, Origin::kInitial),
                     MakeTask("B", "2", 0, 1, Origin::kInitial)};
  auto q1 = OpenOk(o);
  std::unique_ptr<Queue> agent;
  ASSERT_TRUE(Attach(install_, &agent, nullptr).ok());
  ASSERT_EQ(Claim(q1.get()), 1);
  ASSERT_EQ(Claim(q1.get()), 2);
  q1.reset();  // its process dies
  Reclaimed seen;
  int64_t id = 0;
  ASSERT_TRUE(agent
                  ->Transact([&](Txn& txn) {
                    seen = txn.reclaimed();
                    // Put back before the callback runs.
                    EXPECT_EQ(txn.state().Find(1)->state, TaskState::kPending);
                    return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
                  })
                  .ok());
  EXPECT_EQ(seen.reset, std::vector<int64_t>{1});
  EXPECT_EQ(seen.lost, std::vector<int64_t>{2});
  EXPECT_EQ(id, 1);
  EXPECT_EQ(agent->state().Find(1)->attempts, 2);
  EXPECT_EQ(agent->state().Find(2)->state, TaskState::kFailed);
  EXPECT_EQ(agent->state().Find(2)->error_reason, kReasonWorkerLost);
  const auto resets = LinesOf(LogPath(), "task_reset");
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(StrField(resets[0], "reason"), "worker_lost");
  // The next transaction has nothing to put back.
  ASSERT_TRUE(agent
                  ->Transact([&](Txn& txn) {
                    seen = txn.reclaimed();
                    return Status::OK();
                  })
                  .ok());
  EXPECT_TRUE(seen.reset.empty());
  EXPECT_TRUE(seen.lost.empty());
  ExpectDiskMatches(agent.get());
}

// A process that cannot judge a worker's attempt (a `wizq agent` call,
// `wizq answer`) leaves a dead worker's claims to the next run worker, which
// can adopt what the attempt left (QueueOptions::reclaim_worker_claims).
TEST_F(QueueTest, AttachedQueueThatCannotJudgeAttemptsLeavesWorkerClaims) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("A", "1", 0, 1, Origin::kInitial)};
  auto q1 = OpenOk(o);
  ASSERT_EQ(Claim(q1.get()), 1);
  q1.reset();  // its process dies; its attempt may still run
  QueueOptions ao = AttachOptions(install_);
  ao.reclaim_worker_claims = false;
  std::unique_ptr<Queue> agent;
  ASSERT_TRUE(Queue::Open(ao, &agent, nullptr).ok());
  Reclaimed seen;
  ASSERT_TRUE(agent
                  ->Transact([&](Txn& txn) {
                    seen = txn.reclaimed();
                    return Status::OK();
                  })
                  .ok());
  EXPECT_TRUE(seen.reset.empty());
  EXPECT_TRUE(seen.lost.empty());
  EXPECT_EQ(agent->state().Find(1)->state, TaskState::kInProgress);
  EXPECT_TRUE(LinesOf(LogPath(), "task_failed").empty());
  agent.reset();
  // A run worker that comes next does put it back (here: failed, as its
  // only attempt ran and nothing can adopt it).
  std::unique_ptr<Queue> other;
  ASSERT_TRUE(Attach(install_, &other, nullptr).ok());
  ASSERT_TRUE(other->Transact([](Txn&) { return Status::OK(); }).ok());
  EXPECT_EQ(other->state().Find(1)->state, TaskState::kFailed);
  EXPECT_EQ(other->state().Find(1)->error_reason, kReasonWorkerLost);
}

// A transaction whose callback fails commits nothing, its reclaim neither;
// the next one puts the claim back.
TEST_F(QueueTest, FailedTransactionDropsItsReclaimToo) {
  auto q1 = OpenOk(Options());
  auto q2 = OpenOk(Options());
  ASSERT_EQ(Claim(q2.get()), 1);
  q2.reset();
  const std::string log = ReadAll(LogPath());
  Status s = q1->Transact([](Txn&) { return Status::Conflict("no"); });
  EXPECT_TRUE(s.IsConflict());
  EXPECT_EQ(q1->state().Find(1)->state, TaskState::kInProgress);
  EXPECT_EQ(ReadAll(LogPath()), log);
  EXPECT_EQ(Claim(q1.get()), 1);
  ExpectDiskMatches(q1.get());
}

// A claim in a log written before claims carried a host (an older wizq's)
// counts as this host's, as it always did: the journal is asked whether it
// started and a tree left running is adopted. Here the host fields are
// taken out of the log (each line's crc recomputed), as an older wizq
// wrote it.
TEST_F(QueueTest, AClaimOfAnOlderLogWithoutAHostIsJudgedAsThisHosts) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("A", "1", 0, 3, Origin::kInitial)};
  o.host.boot_id = "boot-a";
  o.host.workspace_ino = 1;
  auto q1 = OpenOk(o);
  ASSERT_EQ(Claim(q1.get()), 1);
  q1.reset();  // dies; its attempt still runs
  std::string log = ReadAll(LogPath()), old;
  ASSERT_NE(log.find("\"host\":\"" + o.host.Key() + "\""), std::string::npos);
  for (size_t pos = 0, nl; (nl = log.find('\n', pos)) != std::string::npos;
       pos = nl + 1) {
    std::string line = log.substr(pos, nl - pos);
    const size_t h = line.find(",\"host\":\"");
    if (h != std::string::npos) {
      line.erase(h, line.find('"', h + 9) + 1 - h);
      line.erase(line.rfind(",\"crc\":"));
      char crc[16];
      std::snprintf(crc, sizeof(crc), "%08lx",
                    crc32(0L, reinterpret_cast<const Bytef*>(line.data()),
                          static_cast<uInt>(line.size())));
      line += std::string(",\"crc\":\"") + crc + "\"}";
    }
    old += line + "\n";
  }
  ASSERT_EQ(old.find("\"host\""), std::string::npos);
  WriteAll(LogPath(), old);
  o.host.boot_id = "boot-b";  // judged by another host: as its own anyway
  o.host.workspace_ino = 2;
  o.attempt_started = [](const Task&) { return true; };
  o.attempt_adoptable = [](const Task&) { return true; };
  OpenReport report;
  auto q2 = OpenOk(o, &report);
  EXPECT_EQ(report.tasks_reset, 1);
  EXPECT_EQ(report.tasks_adopted, 1) << "as before hosts were recorded";
  EXPECT_EQ(q2->state().Find(1)->attempts, 0);
}

TEST(ClaimHolderTest, LeasesLapseByTheClockWorkersDoNot) {
  const ClaimHolder lease = ClaimHolder::Lease("tok", 1000);
  EXPECT_EQ(lease.kind, ClaimHolder::Kind::kLease);
  EXPECT_FALSE(lease.LeaseLapsed(1000));
  EXPECT_TRUE(lease.LeaseLapsed(1001));
  const ClaimHolder worker = ClaimHolder::Worker("w1-ab");
  EXPECT_EQ(worker.kind, ClaimHolder::Kind::kWorker);
  EXPECT_FALSE(worker.LeaseLapsed(1 << 30));
  Task t;
  t.claimed_by = "w2-cd";
  EXPECT_EQ(HolderOf(t).worker, "w2-cd");
  EXPECT_EQ(HolderOf(t).kind, ClaimHolder::Kind::kWorker);
}

}  // namespace
}  // namespace queue_fixture
}  // namespace wizq
