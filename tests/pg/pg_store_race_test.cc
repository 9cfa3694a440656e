// The PostgreSQL store's races (anchors §7.7): a rescuer against a late
// completion, and a wait whose notification was lost.
#include <atomic>
#include <random>

#include "tests/pg/pg_store_fixture.h"

namespace wizq::test {
namespace {

// Anchors §7.7 row 13: transitions of one run from several sessions, some
// rolled back, leave a dense seq 1..n that a tailer never sees out of
// order.
// Anchors §7.7: notifications lost. The waiting store's listener session is
// ended over and over while another store commits: the wait still returns
// that commit, by its backstop read, well before its timeout.
// Anchors §7.7 row 1: the rescuer against the completion. A holder whose
// lease is about to lapse completes while a worker on another host tries
// to take the task over, at once, many times at random offsets around the
// lapse: exactly one of them wins each time — a completed task nobody
// took over, or a take-over whose holder's completion was refused.
TEST_F(PgStoreTest, ARescuerAndALateCompletionNeverBothWin) {
  std::mt19937 rng(std::random_device{}());
  int completed = 0, rescued = 0;
  for (int round = 0; round < 16; round++) {
    StoreOptions oa = Options({MakeNew("S", "{}")});
    oa.run_id = "race" + std::to_string(round);
    oa.host = Host("boot-a");
    oa.worker_lease_ms = 300;
    auto a = OpenOk(oa);
    ASSERT_NE(a, nullptr);
    ClaimFilter f;
    f.steps = {"S"};
    std::vector<wizq::Task> got;
    ASSERT_OK(ClaimStarted(a.get(), f, &got));
    ASSERT_EQ(got.size(), 1u);
    // Both act at a random moment between well before and well after the
    // lease lapses (300 ms after the claim).
    const auto at = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(
                        std::uniform_int_distribution<int>(200, 500)(rng));
    ASSERT_OK(EndLiveness(a.get()));  // its renewals stop: the lease runs out
    StoreOptions ob = oa;
    ob.initial_tasks.clear();
    ob.host = Host("boot-b");
    auto b = OpenOk(ob);
    ASSERT_NE(b, nullptr);
    std::this_thread::sleep_until(at);
    // Either may come first, by up to 10 ms.
    const int skew = std::uniform_int_distribution<int>(-10, 10)(rng);
    auto pause = [](int ms) {
      if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    };
    Status done, took;
    std::vector<wizq::Task> taken;
    std::thread completer([&] {
      pause(skew);
      done = a->Transact([&](StoreTxn& txn) {
        return txn.Complete(1, Completion(), nullptr);
      });
    });
    std::thread rescuer([&] {
      pause(-skew);
      took = b->Transact([&](StoreTxn& txn) { return txn.Claim(f, &taken); });
    });
    completer.join();
    rescuer.join();
    ASSERT_OK(took);
    wizq::Task t;
    ASSERT_OK(b->GetTask(1, &t));
    const int completions = CountKind(Events(b.get()), "task_completed");
    if (done.ok()) {
      completed++;
      EXPECT_TRUE(taken.empty()) << "round " << round;
      EXPECT_EQ(t.state, TaskState::kDone);
      EXPECT_EQ(completions, 1);
    } else {
      rescued++;
      EXPECT_TRUE(done.IsConflict()) << done.ToString();
      ASSERT_EQ(taken.size(), 1u) << "round " << round;
      EXPECT_EQ(t.state, TaskState::kInProgress);
      EXPECT_EQ(t.claimed_by, b->worker_id());
      EXPECT_EQ(completions, 0);
    }
  }
  std::printf("completed first %d times, rescued first %d times\n", completed,
              rescued);
}

TEST_F(PgStoreTest, AWaitSeesACommitWhoseNotificationWasLost) {
  auto waiter = OpenOk(Options({MakeNew("Root", "{}")}));
  auto writer = OpenOk(Options());
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(writer, nullptr);
  const int64_t after = Events(waiter.get()).back().seq;
  std::atomic<bool> stop{false};
  std::atomic<int> ended{0};
  std::thread killer([&] {
    auto c = Connect();
    while (c != nullptr && !stop.load()) {
      PgResult r;
      EXPECT_OK(
          c->Exec("SELECT count(pg_terminate_backend(pid)) AS n FROM "
                  "pg_stat_activity WHERE application_name = 'wizq listener'",
                  {}, &r));
      ended += static_cast<int>(r.GetInt(0, "n"));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  int64_t seq = 0;
  Status waited;
  std::chrono::steady_clock::time_point woke;
  std::thread wait([&] {
    waited = waiter->WaitForChange(after, 10000, &seq);
    woke = std::chrono::steady_clock::now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_OK(writer->Transact([&](StoreTxn& txn) {
    int64_t id = 0;
    bool dup = false;
    return txn.Submit(MakeNew("S", "{}"), &id, &dup);
  }));
  const auto committed = std::chrono::steady_clock::now();
  wait.join();
  stop = true;
  killer.join();
  EXPECT_OK(waited);
  EXPECT_GT(seq, after);
  EXPECT_LT(std::chrono::duration<double>(woke - committed).count(), 3.0);
  EXPECT_GT(ended.load(), 0) << "no listener session was ended";
  EXPECT_OK(writer->Close());
  EXPECT_OK(waiter->Close());
}

// A worker whose claim was given out again (its liveness lost, its lease
// lapsed) still lists the task among its own until it ends it. Its
// transactions lock only what it still holds: frozen in one (here a
// transaction that sleeps), it holds back neither the new holder's
// renewal nor anything else on that task's row.
TEST_F(PgStoreTest, ATransactionLeavesTheRowOfAClaimItLostUnlocked) {
  StoreOptions oa = Options({MakeNew("S", "{}")});
  oa.host = Host("boot-a");
  oa.worker_lease_ms = 600;
  auto a = OpenOk(oa);
  ClaimFilter f;
  f.steps = {"S"};
  std::vector<wizq::Task> got;
  ASSERT_OK(ClaimStarted(a.get(), f, &got));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_OK(EndLiveness(a.get()));
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  StoreOptions ob = Options();
  ob.host = Host("boot-b");
  auto b = OpenOk(ob);
  std::vector<wizq::Task> again;
  ASSERT_OK(b->Transact([&](StoreTxn& txn) { return txn.Claim(f, &again); }));
  ASSERT_EQ(again.size(), 1u) << "the lapsed claim was not given out again";

  std::atomic<bool> inside{false};
  std::thread frozen([&] {
    EXPECT_OK(a->Transact([&](StoreTxn&) {
      inside = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return Status::OK();
    }));
  });
  while (!inside) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // The new holder's renewal, as PgStore::ExtendClaims writes it, from a
  // session that gives up after 300 ms of waiting for a lock.
  std::unique_ptr<PgConn> renewer;
  PgResult r;
  ASSERT_OK(cluster_->Connect(&renewer));
  ASSERT_OK(renewer->Exec("SET lock_timeout = 300"));
  const Status renewed =
      renewer->Exec("UPDATE " + schema_ +
                        ".tasks SET claim_until_ms = claim_until_ms + 1 "
                        "WHERE task_id = 1 AND claimed_by = $1",
                    {b->worker_id()}, &r);
  frozen.join();
  EXPECT_TRUE(renewed.ok())
      << "the renewal waited behind the transaction of the worker that lost "
         "the claim: "
      << renewed.ToString();
  EXPECT_OK(b->Close());
}

}  // namespace
}  // namespace wizq::test
