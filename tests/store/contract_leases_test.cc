// Contract cases: leases (SPEC §9) on the store's clock, lost holders put
// back by any transaction, the started fact, attaching and workers.
// Seeded from queue_attach_test.cc and the lease cases of
// agent_service_test.cc (which fake the clock; these use short leases).
#include <time.h>

#include <thread>

#include "tests/store/store_contract.h"

namespace wizq::store_test {
namespace {

void SleepMs(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

ClaimFilter LeaseOf(const std::string& step, int64_t ms) {
  ClaimFilter f;
  f.steps = {step};
  f.lease = true;
  f.lease_ms = ms;
  f.agent = "tester";
  return f;
}

TEST_P(StoreContractTest, ALeasedClaimCarriesATokenAndIsRenewed) {
  auto s = OpenOk(Options({MakeTask("P", "{}", 0, 2, Origin::kInitial)}));
  std::vector<Task> got = Claim(s.get(), LeaseOf("P", 300));
  ASSERT_EQ(got.size(), 1u);
  const std::string token = got[0].lease_token;
  EXPECT_FALSE(token.empty());
  EXPECT_EQ(got[0].agent, "tester");
  int64_t expires = 0;
  for (int i = 0; i < 4; i++) {  // 600 ms in all, renewed every 150 ms
    SleepMs(150);
    ASSERT_TRUE(s->Transact([&](StoreTxn& txn) {
                   return txn.RenewLease(1, token, 300, &expires);
                 }).ok());
  }
  EXPECT_EQ(Get(s.get(), 1).state, TaskState::kInProgress);
  EXPECT_EQ(EventsNamed(s.get(), "lease_renewed").size(), 4u);
  std::vector<int64_t> ids;
  ASSERT_TRUE(s->Transact([&](StoreTxn& txn) {
                 WIZQ_RETURN_IF_ERROR(txn.ActAs(1, token));
                 return txn.Complete(1, Completion(), &ids);
               }).ok());
  EXPECT_EQ(Get(s.get(), 1).state, TaskState::kDone);
}

// An agent's heartbeat outside a transaction (Store::RenewHeldLease):
// where a store has it, it renews what RenewLease would and refuses what
// ActAs would; only the directory store may say it has none.
TEST_P(StoreContractTest, AHeartbeatOutsideATransactionRenewsOnlyAHeldLease) {
  auto s =
      OpenOk(Options({MakeTask("P", "{}", 0, 2, Origin::kInitial),
                      MakeTask("P", "{\"n\":2}", 0, 2, Origin::kInitial)}));
  std::vector<Task> got = Claim(s.get(), LeaseOf("P", 300));
  ASSERT_EQ(got.size(), 1u);
  const std::string token = got[0].lease_token;
  int64_t expires = 0, from = 0;
  Status st = s->RenewHeldLease(1, token, 300, &expires, &from);
  if (st.IsNotSupported()) {
    EXPECT_EQ(GetParam().name, "dir") << st.ToString();
    return;
  }
  for (int i = 0; i < 4; i++) {  // 600 ms in all, renewed every 150 ms
    ASSERT_TRUE(st.ok()) << st.ToString();
    timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    EXPECT_GT(from, 0);
    EXPECT_LE(from, int64_t{mono.tv_sec} * 1000 + mono.tv_nsec / 1000000);
    EXPECT_EQ(Get(s.get(), 1).lease_expires_ms, expires);
    SleepMs(150);
    st = s->RenewHeldLease(1, token, 300, &expires, &from);
  }
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Get(s.get(), 1).state, TaskState::kInProgress);
  EXPECT_TRUE(EventsNamed(s.get(), "lease_renewed").empty());
  EXPECT_TRUE(
      s->RenewHeldLease(1, "not-the-token", 300, &expires, &from).IsConflict());
  EXPECT_TRUE(
      s->RenewHeldLease(99, token, 300, &expires, &from).IsInvalidArgument());
  std::vector<Task> second = Claim(s.get(), LeaseOf("P", 50));
  ASSERT_EQ(second.size(), 1u);
  SleepMs(150);  // lapsed, not yet put back: not renewed
  const Status lapsed =
      s->RenewHeldLease(2, second[0].lease_token, 60000, &expires, &from);
  EXPECT_TRUE(lapsed.IsConflict()) << lapsed.ToString();
  std::vector<int64_t> ids;
  ASSERT_TRUE(s->Transact([&](StoreTxn& txn) {
                 EXPECT_EQ(txn.reclaimed().reset.size(), 1u);
                 WIZQ_RETURN_IF_ERROR(txn.ActAs(1, token));
                 return txn.Complete(1, Completion(), &ids);
               }).ok());
  EXPECT_EQ(Get(s.get(), 2).state, TaskState::kPending);
}

TEST_P(StoreContractTest, LapsedLeasesArePutBackByAnyTransaction) {
  auto s = OpenOk(Options({MakeTask("P", "{}", 0, 2, Origin::kInitial)}));
  std::vector<Task> got = Claim(s.get(), LeaseOf("P", 100));
  ASSERT_EQ(got.size(), 1u);
  SleepMs(250);
  // Any transaction of any holder, here a second worker's empty one.
  auto other = OpenOk(Options({MakeTask("P", "{}", 0, 2, Origin::kInitial)}));
  Reclaimed seen;
  ASSERT_TRUE(other
                  ->Transact([&](StoreTxn& txn) {
                    seen = txn.reclaimed();
                    return Status::OK();
                  })
                  .ok());
  Task t = Get(other.get(), 1);
  EXPECT_EQ(t.state, TaskState::kPending);
  EXPECT_EQ(t.error_reason, "lease_expired");
  EXPECT_EQ(t.attempts, 1) << "a lapsed lease's attempt counts";
  // The old holder is refused: nothing recorded.
  std::vector<EventRecord> before;
  ASSERT_TRUE(s->ReadEvents(0, SIZE_MAX, &before).ok());
  std::vector<int64_t> ids;
  Status st = s->Transact([&](StoreTxn& txn) {
    WIZQ_RETURN_IF_ERROR(txn.ActAs(1, got[0].lease_token));
    return txn.Complete(1, Completion(), &ids);
  });
  EXPECT_TRUE(st.IsConflict()) << st.ToString();
  EXPECT_NE(st.message().find("lease lost"), std::string::npos) << st.message();
  std::vector<EventRecord> after;
  ASSERT_TRUE(s->ReadEvents(0, SIZE_MAX, &after).ok());
  EXPECT_EQ(after.size(), before.size());
  // The second attempt is the last: when it lapses too, the task fails.
  got = Claim(other.get(), LeaseOf("P", 100));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].attempts, 2);
  SleepMs(250);
  ASSERT_TRUE(s->Transact([](StoreTxn&) { return Status::OK(); }).ok());
  t = Get(s.get(), 1);
  EXPECT_EQ(t.state, TaskState::kFailed);
  EXPECT_EQ(t.error_reason, "worker_lost");
}

// A Pool step's timeout (SPEC §9) rides on the claim: past it, any
// transaction fails the attempt with reason timeout even while its lease
// is renewed; with retry false the task fails for good, and the holder's
// later calls are refused.
TEST_P(StoreContractTest, ALeasedAttemptPastItsStepsTimeoutFailsAsTimeout) {
  auto s = OpenOk(Options({MakeTask("P", "{}", 0, 3, Origin::kInitial),
                           MakeTask("Q", "{}", 0, 3, Origin::kInitial)}));
  ClaimFilter f = LeaseOf("P", 60000);
  f.steps.insert("Q");
  f.max = 2;
  f.timeouts["P"] = {150, false};
  std::vector<Task> got = Claim(s.get(), f);
  ASSERT_EQ(got.size(), 2u);
  SleepMs(300);
  int64_t expires = 0;
  ASSERT_TRUE(s->Transact([&](StoreTxn& txn) {
                 return txn.RenewLease(2, got[1].lease_token, 60000, &expires);
               }).ok());
  Task p = Get(s.get(), 1);
  EXPECT_EQ(p.state, TaskState::kFailed) << "P has no retry on timeout";
  EXPECT_EQ(p.error_reason, "timeout");
  EXPECT_EQ(p.attempts, 1);
  EXPECT_EQ(Get(s.get(), 2).state, TaskState::kInProgress)
      << "Q has no timeout: its lease holds";
  std::vector<int64_t> ids;
  const Status st = s->Transact([&](StoreTxn& txn) {
    WIZQ_RETURN_IF_ERROR(txn.ActAs(1, got[0].lease_token));
    return txn.Complete(1, Completion(), &ids);
  });
  EXPECT_TRUE(st.IsConflict()) << st.ToString();
}

// One claim of several steps gives each task its own step's lease (an
// agent's take: each Pool step has its `lease` option); a step without an
// entry gets lease_ms.
TEST_P(StoreContractTest, EachStepsLeaseLastsItsOwnTime) {
  auto s = OpenOk(Options({MakeTask("P", "{}", 0, 1, Origin::kInitial),
                           MakeTask("Q", "{}", 0, 1, Origin::kInitial),
                           MakeTask("R", "{}", 0, 1, Origin::kInitial)}));
  ClaimFilter f = LeaseOf("P", 60000);
  f.steps.insert("Q");
  f.steps.insert("R");
  f.step_lease_ms["P"] = 5000;
  f.step_lease_ms["Q"] = 500000;
  f.max = 3;
  int64_t before = 0;
  std::vector<Task> got;
  ASSERT_TRUE(s->Transact([&](StoreTxn& txn) {
                 before = txn.now_ms();
                 return txn.Claim(f, &got);
               }).ok());
  ASSERT_EQ(got.size(), 3u);
  const int64_t after_ms = before + 1000;  // the claim's clock reading
  const int64_t expected[] = {5000, 500000, 60000};
  for (int i = 0; i < 3; i++) {
    const Task t = Get(s.get(), i + 1);
    EXPECT_GE(t.lease_expires_ms, before + expected[i]) << t.type;
    EXPECT_LT(t.lease_expires_ms, after_ms + expected[i]) << t.type;
    EXPECT_EQ(got[i].lease_expires_ms, t.lease_expires_ms) << t.type;
  }
}

TEST_P(StoreContractTest, AWrongTokenIsLeaseLost) {
  auto s = OpenOk(Options({MakeTask("P", "{}", 0, 1, Origin::kInitial)}));
  ASSERT_EQ(Claim(s.get(), LeaseOf("P", 60000)).size(), 1u);
  int64_t expires = 0;
  Status st = s->Transact([&](StoreTxn& txn) {
    return txn.RenewLease(1, "not-the-token", 60000, &expires);
  });
  EXPECT_TRUE(st.IsConflict()) << st.ToString();
  st = s->Transact([](StoreTxn& txn) { return txn.ActAs(1, "nope"); });
  EXPECT_TRUE(st.IsConflict()) << st.ToString();
  EXPECT_EQ(Get(s.get(), 1).state, TaskState::kInProgress);
}

// A dead worker's claim whose attempt started is charged; one that never
// started (claimed ahead) is given back free. The started fact is the
// store's, so it holds even when the local journal cannot tell.
TEST_P(StoreContractTest, AStartedAttemptIsChargedAnUnstartedOneIsNot) {
  StoreOptions o =
      Options({MakeTask("S", "{\"a\":1}", 0, 3, Origin::kInitial),
               MakeTask("S", "{\"a\":2}", 0, 3, Origin::kInitial)});
  o.local.started = [](const Task&) { return false; };  // no journal
  {
    auto s = OpenOk(o);
    ASSERT_EQ(Claim(s.get(), AnyOf({"S"}, 2)).size(), 2u);
    ASSERT_TRUE(
        s->Transact([](StoreTxn& txn) { return txn.MarkStarted({1}); }).ok());
  }  // dies holding both
  OpenReport report;
  auto s = OpenOk(o, &report);
  EXPECT_EQ(report.tasks_reset, 2);
  EXPECT_EQ(Get(s.get(), 1).attempts, 1) << "started: charged";
  EXPECT_EQ(Get(s.get(), 2).attempts, 0) << "never started: refunded";
  EXPECT_EQ(EventsNamed(s.get(), "task_started").size(), 1u);
}

TEST_P(StoreContractTest, AttachWithoutARunIsNotFound) {
  StoreOptions o = Options();
  o.mode = OpenMode::kAttach;
  std::unique_ptr<Store> s;
  Status st = Store::Open(o, &s, nullptr);
  EXPECT_TRUE(st.IsNotFound()) << st.ToString();
  o.mode = OpenMode::kReadOnly;
  st = Store::Open(o, &s, nullptr);
  EXPECT_TRUE(st.IsNotFound()) << st.ToString();
}

TEST_P(StoreContractTest, AttachToAFinishedRunSeesItFinishedAndWritesNothing) {
  {
    auto s = OpenOk(Options());
    ASSERT_EQ(ClaimAny(s.get()), 1);
    Complete(s.get(), 1);
    RunStatus status;
    ASSERT_TRUE(s->Transact([&](StoreTxn& txn) {
                   return txn.FinishIfSettled(1, &status);
                 }).ok());
    ASSERT_EQ(status, RunStatus::kCompleted);
    ASSERT_TRUE(s->Close().ok());
  }
  StoreOptions o = Options();
  o.mode = OpenMode::kAttach;
  OpenReport report;
  auto s = OpenOk(o, &report);
  EXPECT_EQ(report.action, OpenAction::kFinished);
  std::vector<EventRecord> before;
  ASSERT_TRUE(s->ReadEvents(0, SIZE_MAX, &before).ok());
  Status st = s->Transact([](StoreTxn&) { return Status::OK(); });
  EXPECT_FALSE(st.ok());
  std::vector<EventRecord> after;
  ASSERT_TRUE(s->ReadEvents(0, SIZE_MAX, &after).ok());
  EXPECT_EQ(after.size(), before.size());
}

TEST_P(StoreContractTest,
       AttachJoinsARunningRunAndLeasesOnlyRegistersNoWorker) {
  auto first = OpenOk(Options());
  std::vector<WorkerInfo> workers;
  ASSERT_TRUE(first->Workers(&workers).ok());
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_TRUE(workers[0].alive);
  EXPECT_EQ(workers[0].id, first->worker_id());

  StoreOptions o = Options();
  o.mode = OpenMode::kAttach;
  o.leases_only = true;
  OpenReport report;
  auto agent = OpenOk(o, &report);
  EXPECT_EQ(report.action, OpenAction::kAttached);
  ASSERT_TRUE(first->Workers(&workers).ok());
  EXPECT_EQ(workers.size(), 1u);
  o.leases_only = false;
  auto second = OpenOk(o, &report);
  ASSERT_TRUE(first->Workers(&workers).ok());
  int alive = 0;
  for (const WorkerInfo& w : workers) alive += w.alive ? 1 : 0;
  EXPECT_EQ(alive, 2);
  ASSERT_TRUE(second->Close().ok());
  ASSERT_TRUE(first->Workers(&workers).ok());
  alive = 0;
  for (const WorkerInfo& w : workers) alive += w.alive ? 1 : 0;
  EXPECT_EQ(alive, 1);
}

TEST_P(StoreContractTest, AFailedTransactionKeepsNothingNotEvenItsReclaim) {
  auto s = OpenOk(Options({MakeTask("P", "{}", 0, 2, Origin::kInitial)}));
  ASSERT_EQ(Claim(s.get(), LeaseOf("P", 50)).size(), 1u);
  SleepMs(150);
  Status st = s->Transact([](StoreTxn& txn) {
    EXPECT_EQ(txn.reclaimed().reset.size(), 1u);
    return Status::InvalidArgument("changed my mind");
  });
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(EventsNamed(s.get(), "task_reset").empty());
}

}  // namespace
}  // namespace wizq::store_test
