// RunHistory (queue/history.h): the attempts and workers of a run read back
// from its events (a read-only Store) — a crash found by a reset, a crash
// found only by the resume, a lapsed lease, a retry, a completion — and an
// archived run read back through Store::OpenRun.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "fs/env.h"
#include "queue/dir/queue.h"
#include "queue/history.h"
#include "queue/store.h"
#include "tests/queue_fixture.h"

namespace wizq {
namespace queue_fixture {
namespace {

using Json = nlohmann::json;

class RunHistoryTest : public QueueTest {
 protected:
  std::vector<Json> ReadLogJson() {
    std::vector<Json> out;
    for (const std::string& l : LogLines(LogPath())) {
      out.push_back(Json::parse(l));
    }
    return out;
  }

  // The run as a view reads it: a read-only Store.
  std::unique_ptr<Store> Reader() {
    StoreOptions o;
    o.install_dir = Options().install_dir;
    o.mode = OpenMode::kReadOnly;
    std::unique_ptr<Store> store;
    Status s = Store::Open(o, &store, nullptr);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return store;
  }

  RunHistory Load() {
    RunHistory h;
    std::unique_ptr<Store> store = Reader();
    if (store == nullptr) return h;
    Status s = LoadRunHistory(*store, &h);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return h;
  }
};

// Worker 1 dies holding the root (found by the reset), worker 2 dies
// holding nothing (found only by the resume), worker 3 retries and
// completes it and leaves.
TEST_F(RunHistoryTest, CrashesAreFoundWhereTheLogRecordsThem) {
  std::string w1, w2, w3;
  QueueOptions o = Options();
  o.initial_tasks[0].max_attempts = 3;
  {
    auto q = OpenOk(o);
    w1 = q->worker_id();
    ASSERT_EQ(Claim(q.get()), 1);
  }  // destroyed without Close: a crash
  {
    auto q = OpenOk(o);
    w2 = q->worker_id();
  }
  auto q = OpenOk(o);
  w3 = q->worker_id();
  ASSERT_EQ(Claim(q.get()), 1);
  EXPECT_TRUE(Fail(q.get(), 1, /*retryable=*/true));
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1);
  ASSERT_TRUE(q->Close().ok());

  const RunHistory h = Load();
  EXPECT_EQ(h.run_id, "run-A");
  ASSERT_EQ(h.workers.size(), 3u);
  const std::vector<Json> log = ReadLogJson();
  auto seq_of = [&](const std::string& event, const std::string& worker) {
    for (const Json& e : log) {
      if (e["event"] == event && (worker.empty() || e["worker"] == worker)) {
        return e["seq"].get<int64_t>();
      }
    }
    return int64_t{-1};
  };
  EXPECT_TRUE(h.workers[0].lost);
  EXPECT_EQ(h.workers[0].lost_seq, seq_of("task_reset", w1));
  EXPECT_TRUE(h.workers[1].lost);
  int64_t second_resume = -1;
  for (const Json& e : log) {
    if (e["event"] == "run_resumed") second_resume = e["seq"];
  }
  EXPECT_EQ(h.workers[1].lost_seq, second_resume);
  EXPECT_FALSE(h.workers[2].lost);
  EXPECT_GT(h.workers[2].left_ms, 0);

  ASSERT_EQ(h.attempts.size(), 3u);
  EXPECT_EQ(h.attempts[0].worker, w1);
  EXPECT_EQ(h.attempts[0].outcome, "reset");
  EXPECT_EQ(h.attempts[0].reason, "worker_lost");
  EXPECT_EQ(h.attempts[0].value, "{\"n\":0}");
  EXPECT_EQ(h.attempts[1].worker, w3);
  EXPECT_EQ(h.attempts[1].outcome, "failed");
  EXPECT_TRUE(h.attempts[1].will_retry);
  EXPECT_EQ(h.attempts[2].outcome, "completed");
  EXPECT_EQ(h.attempts[2].attempt, 3);
  int resumes = 0;
  for (const RunMilestone& m : h.milestones)
    resumes += m.event == "run_resumed";
  EXPECT_EQ(resumes, 2);
}

// A lapsed lease ends its attempt as a reset with reason lease_expired, in
// the lease lane; no worker is lost for it.
TEST_F(RunHistoryTest, LapsedLeaseIsAResetOfTheLease) {
  auto q = OpenOk(Options());
  int64_t id = 0;
  std::string token;
  ASSERT_TRUE(q->Transact([&](Txn& txn) {
                 Txn::LeaseTerms terms;
                 terms.lease_ms = 1;
                 terms.agent = "bot";
                 return txn.ClaimLeased(nullptr, terms, &id, &token);
               }).ok());
  ASSERT_EQ(id, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(q->Transact([](Txn&) { return Status::OK(); }).ok());
  const RunHistory h = Load();
  ASSERT_EQ(h.attempts.size(), 1u);
  EXPECT_EQ(h.attempts[0].worker, "lease");
  EXPECT_EQ(h.attempts[0].agent, "bot");
  EXPECT_EQ(h.attempts[0].outcome, "reset");
  EXPECT_EQ(h.attempts[0].reason, "lease_expired");
  for (const WorkerRecord& w : h.workers) EXPECT_FALSE(w.lost) << w.id;
}

// An archived run's state is replayed from its log alone.
TEST_F(RunHistoryTest, StateOfAnArchivedRunIsReplayedFromItsLog) {
  {
    auto q = OpenOk(Options());
    ASSERT_EQ(Claim(q.get()), 1);
    Complete(q.get(), 1, {MakeTask("C", "{}", 1, 1)});
    ASSERT_TRUE(q->Close().ok());
  }
  OpenReport report;
  auto q = OpenOk(Options("run-B"), &report);
  ASSERT_FALSE(report.archived_to.empty());
  std::unique_ptr<Store> reader = Reader();
  ASSERT_NE(reader, nullptr);
  std::vector<RunRef> runs;
  ASSERT_TRUE(reader->ListRuns(&runs).ok());
  const RunRef* archived = nullptr;
  for (const RunRef& r : runs) {
    if (r.key == report.archived_to) archived = &r;
  }
  ASSERT_NE(archived, nullptr) << report.archived_to;
  EXPECT_TRUE(archived->archived);
  std::unique_ptr<Store> old;
  ASSERT_TRUE(reader->OpenRun(*archived, &old).ok());
  RunInfo run;
  ASSERT_TRUE(old->GetRun(&run).ok());
  EXPECT_EQ(run.run_id, "run-A");
  RunCounts counts;
  ASSERT_TRUE(old->Counts(&counts).ok());
  EXPECT_EQ(counts.total, 2);
  EXPECT_EQ(counts.of(TaskState::kDone), 1);
  RunHistory h;
  ASSERT_TRUE(LoadRunHistory(*old, &h).ok());
  EXPECT_EQ(h.run_id, "run-A");
  EXPECT_EQ(h.attempts.size(), 1u);
  RunRef nope = *archived;
  nope.key = Wizard() + "/archive/nope";
  std::unique_ptr<Store> none;
  EXPECT_TRUE(reader->OpenRun(nope, &none).IsNotFound());
}

}  // namespace
}  // namespace queue_fixture
}  // namespace wizq
