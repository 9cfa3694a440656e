// The PostgreSQL store beyond what the contract suite (tests/store/) can
// see: several processes and sessions on one run, a worker's liveness
// session lost, the fence of a stale worker, the server restarted and a
// worker's transaction session dropped (what comes back, what re-runs),
// and the event seq under concurrent transactions (anchors §7.7: rows 1,
// 3, 5, 11 and 13).
#include "queue/pg/pg_store.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <random>
#include <thread>

#include "tests/integration_util.h"
#include "tests/pg/pg_store_fixture.h"

namespace wizq::test {
namespace {

// Submits one S task with `inputs` and claims by `f`, in one transaction.
Status SubmitAndClaim(Store* s, const ClaimFilter& f, const std::string& inputs,
                      std::vector<wizq::Task>* got) {
  return s->Transact([&](StoreTxn& txn) {
    int64_t id = 0;
    bool dup = false;
    WIZQ_RETURN_IF_ERROR(txn.Submit(MakeNew("S", inputs), &id, &dup));
    return txn.Claim(f, got);
  });
}

// Anchors §7.7 row 11: concurrent claims from two processes (SKIP LOCKED,
// one run) never hand one task to both.
TEST_F(PgStoreTest, TwoProcessesClaimDisjointTasks) {
  std::vector<NewTask> roots;
  for (int i = 0; i < 120; i++) {
    roots.push_back(MakeNew("S", "{\"i\":" + std::to_string(i) + "}"));
  }
  ASSERT_OK(OpenOk(Options(roots))->Close());
  const std::string out[2] = {dir_.Join("a.out"), dir_.Join("b.out")};
  const pid_t a = Tool({"--type", "S", "--claim-all"}, out[0]);
  const pid_t b = Tool({"--type", "S", "--claim-all"}, out[1]);
  EXPECT_EQ(Reap(a), 0);
  EXPECT_EQ(Reap(b), 0);
  std::vector<int64_t> all;
  size_t per[2] = {0, 0};
  for (int i = 0; i < 2; i++) {
    std::ifstream in(out[i]);
    int64_t id = 0;
    while (in >> id) {
      all.push_back(id);
      per[i]++;
    }
  }
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 120u);
  for (int i = 0; i < 120; i++) EXPECT_EQ(all[i], i + 1) << "each once";
  EXPECT_GT(per[0], 0u) << "both processes claimed";
  EXPECT_GT(per[1], 0u) << "both processes claimed";
  auto s = OpenOk(Options());
  RunCounts c;
  ASSERT_OK(s->Counts(&c));
  EXPECT_EQ(c.of(TaskState::kDone), 120);
}

// Anchors §7.7 row 11: the same <type, canonical inputs> submitted by
// several processes at once is one task.
TEST_F(PgStoreTest, ConcurrentSubmitsOfTheSameTaskYieldOne) {
  ASSERT_OK(OpenOk(Options({MakeNew("Root", "{}")}))->Close());
  std::vector<pid_t> pids;
  for (int i = 0; i < 4; i++) {
    const std::string inputs =
        i % 2 ? "{\"a\":1,\"b\":2}" : "{\"b\":2,\"a\":1}";
    pids.push_back(Tool({"--type", "S", "--inputs", inputs},
                        dir_.Join("s" + std::to_string(i))));
  }
  for (pid_t p : pids) EXPECT_EQ(Reap(p), 0);
  auto s = OpenOk(Options());
  std::vector<wizq::Task> tasks;
  TaskFilter f;
  f.steps = {"S"};
  ASSERT_OK(s->ListTasks(f, &tasks));
  EXPECT_EQ(tasks.size(), 1u);
  int dups = 0;
  for (const EventRecord& e : Events(s.get())) {
    dups += e.line.find("\"task_deduplicated\"") != std::string::npos;
  }
  EXPECT_EQ(dups, 3);
}

// Anchors §7.7 rows 1 and 5: a worker whose liveness session is ended
// (pg_terminate_backend) stops renewing its claim; once the claim's lease
// lapsed (not before: the lease is the authority across hosts) a worker
// on another host takes the task over, and the first worker's late
// completion is refused with nothing written.
TEST_F(PgStoreTest, AStaleCompleteAfterTheLeaseLapsedIsRefused) {
  StoreOptions oa = Options({MakeNew("S", "{}")});
  oa.host = Host("boot-a");
  oa.worker_lease_ms = 600;
  auto a = OpenOk(oa);
  std::vector<wizq::Task> got;
  ClaimFilter f;
  f.steps = {"S"};
  ASSERT_OK(ClaimStarted(a.get(), f, &got));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_OK(EndLiveness(a.get()));

  StoreOptions ob = Options();
  ob.host = Host("boot-b");
  auto b = OpenOk(ob);
  std::vector<wizq::Task> none;
  ASSERT_OK(b->Transact([&](StoreTxn& txn) { return txn.Claim(f, &none); }));
  EXPECT_TRUE(none.empty()) << "taken over before the lease lapsed";
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  std::vector<wizq::Task> again;
  ASSERT_OK(b->Transact([&](StoreTxn& txn) { return txn.Claim(f, &again); }));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempts, 2) << "the started attempt was charged";

  const size_t before = Events(b.get()).size();
  std::vector<int64_t> ids;
  const Status st = a->Transact(
      [&](StoreTxn& txn) { return txn.Complete(1, Completion(), &ids); });
  EXPECT_TRUE(st.IsConflict()) << st.ToString();
  EXPECT_EQ(Events(b.get()).size(), before) << "nothing written";
  wizq::Task t;
  ASSERT_OK(b->GetTask(1, &t));
  EXPECT_EQ(t.state, TaskState::kInProgress);
  EXPECT_EQ(t.claimed_by, b->worker_id());
  // And the worker that lost its liveness claims nothing more: once its
  // renewer found it gone for good (another host took its task over), a
  // claim fails.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (a->Liveness().ok() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(a->Liveness().IsIOError()) << a->Liveness().ToString();
  const Status claim =
      a->Transact([&](StoreTxn& txn) { return txn.Claim(f, &none); });
  EXPECT_FALSE(claim.ok());
}

// Anchors §7.7 row 3, SPEC §14: PostgreSQL stopped -m immediate for 5 s
// (shorter than the 30 s lease) and started again. The worker's sessions
// all end; its next transaction opens a new one and completes its tasks,
// its liveness comes back (nobody took anything over), a worker on another
// host opened meanwhile takes nothing over, and each task ran once.
TEST_F(PgStoreTest, ADatabaseRestartShorterThanTheLeaseRerunsNothing) {
  StoreOptions oa =
      Options({MakeNew("S", "{\"i\":1}"), MakeNew("S", "{\"i\":2}")});
  oa.host = Host("boot-a");
  oa.worker_lease_ms = 30000;
  auto a = OpenOk(oa);
  ClaimFilter f;
  f.steps = {"S"};
  f.max = 10;
  std::vector<wizq::Task> got;
  ASSERT_OK(a->Transact([&](StoreTxn& txn) {
    WIZQ_RETURN_IF_ERROR(txn.Claim(f, &got));
    return txn.MarkStarted({1, 2});
  }));
  ASSERT_EQ(got.size(), 2u);

  ASSERT_OK(cluster_->Stop(PgCluster::StopMode::kImmediate));
  std::this_thread::sleep_for(std::chrono::seconds(5));
  ASSERT_OK(cluster_->Start());

  StoreOptions ob = Options();
  ob.host = Host("boot-b");
  auto b = OpenOk(ob);
  ASSERT_NE(b, nullptr);
  std::vector<wizq::Task> none;
  ASSERT_OK(b->Transact([&](StoreTxn& txn) { return txn.Claim(f, &none); }));
  EXPECT_TRUE(none.empty()) << "another host took a task over in its lease";

  std::vector<int64_t> ids;
  ASSERT_OK(a->Transact([&](StoreTxn& txn) {
    WIZQ_RETURN_IF_ERROR(txn.Complete(1, Completion(), &ids));
    return txn.Complete(2, Completion(), &ids);
  }));
  ASSERT_TRUE(AliveWithin(b.get(), a->worker_id(), 20000))
      << "the worker did not take its liveness back";
  std::vector<wizq::Task> more;
  ASSERT_OK(SubmitAndClaim(a.get(), f, "{\"i\":3}", &more));
  ASSERT_EQ(more.size(), 1u) << "it claims again";

  const std::vector<EventRecord> events = Events(b.get());
  EXPECT_EQ(CountKind(events, "task_claimed"), 3);
  EXPECT_EQ(CountKind(events, "task_reset"), 0);
  EXPECT_EQ(CountKind(events, "task_completed"), 2);
  for (int64_t id : {1, 2}) {
    wizq::Task t;
    ASSERT_OK(b->GetTask(id, &t));
    EXPECT_EQ(t.state, TaskState::kDone);
    EXPECT_EQ(t.attempts, 1) << "task " << id << " ran once";
  }
}

// The other side of the rule: a worker on the same host, opened after the
// restart and before the first worker took its liveness back, saw it dead
// and put its claim back (as a same-host worker may). The first worker
// then stays gone: it does not take its liveness back, claims nothing, and
// its late completion is refused.
TEST_F(PgStoreTest, AfterARestartAWorkerDeclaredDeadStaysGone) {
  StoreOptions oa = Options({MakeNew("S", "{}")});
  oa.host = Host("boot-a");
  oa.worker_lease_ms = 60000;  // no renewal before the restart is done
  auto a = OpenOk(oa);
  ClaimFilter f;
  f.steps = {"S"};
  std::vector<wizq::Task> got;
  ASSERT_OK(ClaimStarted(a.get(), f, &got));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_OK(cluster_->Stop(PgCluster::StopMode::kImmediate));
  ASSERT_OK(cluster_->Start());

  StoreOptions oc = Options();
  oc.host = Host("boot-a");
  OpenReport report;
  std::unique_ptr<Store> c;
  ASSERT_OK(Store::Open(oc, &c, &report));
  EXPECT_EQ(report.tasks_reset, 1) << "the same host put the claim back";

  std::vector<int64_t> ids;
  const Status late = a->Transact(
      [&](StoreTxn& txn) { return txn.Complete(1, Completion(), &ids); });
  EXPECT_TRUE(late.IsConflict()) << late.ToString();
  EXPECT_FALSE(AliveWithin(c.get(), a->worker_id(), 3000));
  std::vector<wizq::Task> none;
  const Status claim =
      a->Transact([&](StoreTxn& txn) { return txn.Claim(f, &none); });
  EXPECT_FALSE(claim.ok()) << "a worker declared dead claimed again";
  EXPECT_TRUE(none.empty());
}

// A restart longer than the lease: the worker's claim lapsed meanwhile (any
// host may rescue it), so the worker does not take its liveness back.
TEST_F(PgStoreTest, AfterARestartLongerThanTheLeaseTheWorkerStaysGone) {
  StoreOptions oa = Options({MakeNew("S", "{}"), MakeNew("S", "{\"i\":2}")});
  oa.host = Host("boot-a");
  oa.worker_lease_ms = 1500;
  auto a = OpenOk(oa);
  ClaimFilter f;
  f.steps = {"S"};
  std::vector<wizq::Task> got;
  ASSERT_OK(a->Transact([&](StoreTxn& txn) { return txn.Claim(f, &got); }));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_OK(cluster_->Stop(PgCluster::StopMode::kImmediate));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ASSERT_OK(cluster_->Start());
  std::vector<wizq::Task> none;
  const Status claim =
      a->Transact([&](StoreTxn& txn) { return txn.Claim(f, &none); });
  EXPECT_FALSE(claim.ok()) << "a worker whose claim lapsed claimed again";
  StoreOptions ob = Options();
  ob.host = Host("boot-b");
  auto b = OpenOk(ob);
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(AliveWithin(b.get(), a->worker_id(), 2000));
}

// A renewal that waited behind a lock (held by a session that is only
// slow: here all of `tasks`) past its answer timeout: this side ended the
// liveness session itself, nobody acted on the worker's death and it held
// no claim that could lapse, so it takes its liveness back and claims
// again; the old backend lets go of the lock once it sees its client gone.
TEST_F(PgStoreTest, ALivenessSessionEndedHereForASlowAnswerIsTakenBack) {
  StoreOptions oa = Options();
  oa.worker_lease_ms = 5000;  // renewals every 1.7 s; no answer after 4 s
  auto a = OpenOk(oa);
  ASSERT_NE(a, nullptr);
  auto* pa = dynamic_cast<PgStore*>(a.get());
  ASSERT_NE(pa, nullptr);
  ASSERT_OK(admin_->Exec("BEGIN"));
  ASSERT_OK(admin_->Exec("LOCK TABLE " + schema_ + ".tasks IN EXCLUSIVE MODE"));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(7);
  bool lost = false;
  while (std::chrono::steady_clock::now() < until) {
    lost = lost || !pa->live();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_OK(admin_->Exec("COMMIT"));
  EXPECT_TRUE(lost) << "the renewal was not cut off by its answer timeout";
  ASSERT_TRUE(AliveWithin(a.get(), a->worker_id(), 10000))
      << "the worker did not take its liveness back"
      << ": " << a->Liveness().ToString();
  EXPECT_OK(a->Liveness());
  // The server holds its lock a moment before its renewal thread says so.
  ASSERT_TRUE(WaitFor([&] { return pa->live(); }, std::chrono::seconds(5)))
      << "the worker never knew it had its liveness back";
  ClaimFilter f;
  f.steps = {"S"};
  std::vector<wizq::Task> got;
  ASSERT_OK(SubmitAndClaim(a.get(), f, "{}", &got));
  EXPECT_EQ(got.size(), 1u) << "it claims again";
}

// The server's word on liveness: a worker whose liveness session the
// server ended claims nothing, even before its renewer has noticed (here
// not for 10 s): a worker of its host may put back at once what it claims,
// and it could renew none of it.
TEST_F(PgStoreTest, AWorkerWhoseLivenessSessionEndedClaimsNothingAtOnce) {
  StoreOptions o = Options({MakeNew("S", "{}")});
  o.worker_lease_ms = 30000;  // renewals every 10 s
  auto a = OpenOk(o);
  ASSERT_NE(a, nullptr);
  auto* pa = dynamic_cast<PgStore*>(a.get());
  ASSERT_NE(pa, nullptr);
  PgResult r;
  ASSERT_OK(admin_->Exec(
      "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE "
      "application_name = 'wizq worker'",
      {}, &r));
  ASSERT_EQ(r.rows(), 1);
  ASSERT_TRUE(pa->live()) << "the renewer noticed already: the test proves "
                             "nothing";
  ClaimFilter f;
  f.steps = {"S"};
  std::vector<wizq::Task> got;
  ASSERT_OK(a->Transact([&](StoreTxn& txn) { return txn.Claim(f, &got); }));
  EXPECT_TRUE(got.empty()) << "claimed without its liveness lock";
}

// A session frozen while it holds the run's row (a frozen machine's
// worker, mid-transaction) stalls the run's transactions, not the renewals
// of the other workers: a claim held across a hold longer than its lease
// is still held when the row comes free.
TEST_F(PgStoreTest, RenewalsGoOnWhileTheRunsRowIsHeld) {
  StoreOptions oa = Options({MakeNew("S", "{}")});
  oa.worker_lease_ms = 1500;  // renewed every 0.5 s
  auto a = OpenOk(oa);
  ClaimFilter f;
  f.steps = {"S"};
  std::vector<wizq::Task> got;
  ASSERT_OK(ClaimStarted(a.get(), f, &got));
  ASSERT_EQ(got.size(), 1u);
  std::unique_ptr<PgConn> reader;
  ASSERT_OK(cluster_->Connect(&reader));
  ASSERT_OK(admin_->Exec("BEGIN"));
  ASSERT_OK(admin_->Exec("SELECT run FROM " + schema_ + ".runs FOR UPDATE"));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  PgResult r;
  ASSERT_OK(reader->Exec("SELECT claim_until_ms - " + std::string(kPgNowMsSql) +
                             " AS left FROM " + schema_ +
                             ".tasks WHERE task_id = 1",
                         {}, &r));
  ASSERT_OK(admin_->Exec("COMMIT"));
  EXPECT_GT(r.GetInt(0, "left"), 0)
      << "the claim lapsed while the row was held";
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  EXPECT_GT(a->LocalDeadlineMs(),
            int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1000000);
}

// A transaction of the worker itself that waits for the run's row (held
// by a frozen machine's session) holds back neither its renewals nor its
// local deadline: what it may claim holds from when it gets the row.
TEST_F(PgStoreTest, AWorkersTransactionWaitingForTheRunsRowHoldsBackNothing) {
  StoreOptions oa = Options({MakeNew("S", "{}"), MakeNew("S", "{\"n\":2}")});
  oa.worker_lease_ms = 1500;  // renewed every 0.5 s
  auto a = OpenOk(oa);
  ClaimFilter f;
  f.steps = {"S"};
  f.max = 1;
  std::vector<wizq::Task> got;
  ASSERT_OK(ClaimStarted(a.get(), f, &got));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_OK(admin_->Exec("BEGIN"));
  ASSERT_OK(admin_->Exec("SELECT run FROM " + schema_ + ".runs FOR UPDATE"));
  std::vector<wizq::Task> second;
  std::thread waiting([&] {
    EXPECT_OK(
        a->Transact([&](StoreTxn& txn) { return txn.Claim(f, &second); }));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t deadline = a->LocalDeadlineMs();
  ASSERT_OK(admin_->Exec("COMMIT"));
  waiting.join();
  EXPECT_GT(deadline, int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1000000)
      << "the local deadline stood still while the transaction waited";
  EXPECT_EQ(second.size(), 1u);
}

// An agent's heartbeat (Store::RenewHeldLease) does not wait for the
// run's row, which a frozen machine's session may hold past the agent's
// lease: it renews on the task's row alone.
TEST_F(PgStoreTest, AnAgentsHeartbeatDoesNotWaitForTheRunsRow) {
  auto a = OpenOk(Options({MakeNew("P", "{}")}));
  ClaimFilter f;
  f.steps = {"P"};
  f.lease = true;
  f.lease_ms = 1000;
  std::vector<wizq::Task> got;
  ASSERT_OK(a->Transact([&](StoreTxn& txn) { return txn.Claim(f, &got); }));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_OK(admin_->Exec("BEGIN"));
  ASSERT_OK(admin_->Exec("SELECT run FROM " + schema_ + ".runs FOR UPDATE"));
  for (int i = 0; i < 6; i++) {  // 3 s, three leases, the row held
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    int64_t expires = 0, from = 0;
    ASSERT_OK(a->RenewHeldLease(got[0].id, got[0].lease_token, 1000, &expires,
                                &from));
  }
  ASSERT_OK(admin_->Exec("COMMIT"));
  std::vector<int64_t> ids;
  ASSERT_OK(a->Transact([&](StoreTxn& txn) {
    EXPECT_TRUE(txn.reclaimed().reset.empty());
    WIZQ_RETURN_IF_ERROR(txn.ActAs(got[0].id, got[0].lease_token));
    return txn.Complete(got[0].id, Completion(), &ids);
  }));
}

// A transaction of a live worker renews all its claims too once its last
// proof of life is a sixth of the lease old: its local deadline moves on
// with the commit, not only with its renewer (every third of the lease),
// so that what it claims is never started near it. Younger, it renews
// nothing: a renewal writes every held row once more.
TEST_F(PgStoreTest, ATransactionIsAProofOfLifeOnceASixthOfTheLeaseWent) {
  StoreOptions oa = Options({MakeNew("S", "{}"), MakeNew("S", "{\"i\":2}")});
  oa.worker_lease_ms = 12000;  // the renewer's first renewal after 4 s
  auto a = OpenOk(oa);
  ASSERT_NE(a, nullptr);
  const int64_t before = a->LocalDeadlineMs();
  ClaimFilter f;
  f.steps = {"S"};
  f.max = 1;
  std::vector<wizq::Task> got;
  ASSERT_OK(ClaimStarted(a.get(), f, &got));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(a->LocalDeadlineMs(), before) << "a young proof was renewed";
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  auto until = [&] {
    PgResult r;
    EXPECT_OK(admin_->Exec(
        "SELECT claim_until_ms FROM " + schema_ + ".tasks WHERE task_id = $1",
        {got[0].id}, &r));
    return r.rows() == 1 ? r.GetInt(0, "claim_until_ms") : 0;
  };
  const int64_t held_until = until();
  std::vector<wizq::Task> more;
  ASSERT_OK(ClaimStarted(a.get(), f, &more));
  ASSERT_EQ(more.size(), 1u);
  EXPECT_GE(a->LocalDeadlineMs(), before + 2100);
  EXPECT_GE(until(), held_until + 2000) << "the held claim was not renewed";
}

// The backend of the store's transaction session (its last statement
// named the schema), found as the superuser.
int SessionOf(PgConn* admin, const std::string& schema) {
  PgResult r;
  const Status s = admin->Exec(
      "SELECT pid FROM pg_stat_activity WHERE application_name = 'wizq' AND "
      "strpos(query, $1) > 0",
      {schema}, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.rows(), 1);
  return r.rows() == 1 ? static_cast<int>(r.GetInt(0, "pid")) : 0;
}

// SPEC §14: the worker's transaction session (not its liveness session)
// ended between two transactions: the next read and the next transaction
// each open a new one and succeed; nothing re-runs, the worker stays alive.
TEST_F(PgStoreTest, ADroppedTransactionSessionRerunsNothing) {
  StoreOptions oa = Options({MakeNew("S", "{}"), MakeNew("S", "{\"i\":2}")});
  oa.worker_lease_ms = 30000;
  auto a = OpenOk(oa);
  ClaimFilter f;
  f.steps = {"S"};
  std::vector<wizq::Task> got;
  ASSERT_OK(ClaimStarted(a.get(), f, &got));
  ASSERT_EQ(got.size(), 1u);
  wizq::Task t;
  ASSERT_OK(a->GetTask(1, &t));
  ASSERT_OK(cluster_->TerminateBackend(SessionOf(admin_.get(), schema_)));
  ASSERT_OK(a->GetTask(1, &t));
  EXPECT_EQ(t.state, TaskState::kInProgress);
  ASSERT_OK(cluster_->TerminateBackend(SessionOf(admin_.get(), schema_)));
  std::vector<int64_t> ids;
  std::vector<wizq::Task> next;
  ASSERT_OK(a->Transact([&](StoreTxn& txn) {
    WIZQ_RETURN_IF_ERROR(txn.Complete(1, Completion(), &ids));
    return txn.Claim(f, &next);
  }));
  ASSERT_EQ(next.size(), 1u) << "the worker still claims";
  EXPECT_EQ(next[0].id, 2);
  ASSERT_OK(a->GetTask(1, &t));
  EXPECT_EQ(t.state, TaskState::kDone);
  EXPECT_EQ(t.attempts, 1);
  const std::vector<EventRecord> events = Events(a.get());
  EXPECT_EQ(CountKind(events, "task_claimed"), 2);
  EXPECT_EQ(CountKind(events, "task_reset"), 0);
  EXPECT_TRUE(AliveWithin(a.get(), a->worker_id(), 0));
}

TEST_F(PgStoreTest, SeqIsDenseUnderConcurrentTransactionsWithRollbacks) {
  ASSERT_OK(OpenOk(Options({MakeNew("Root", "{}")}))->Close());
  std::atomic<bool> done{false};
  std::atomic<int> committed{0};
  auto worker = [&](int n) {
    auto s = OpenOk(Options());
    if (s == nullptr) return;
    std::mt19937 rng(n);
    for (int i = 0; i < 40; i++) {
      const bool rollback = rng() % 3 == 0;
      const Status st = s->Transact([&](StoreTxn& txn) {
        int64_t id = 0;
        bool dup = false;
        WIZQ_RETURN_IF_ERROR(
            txn.Submit(MakeNew("S", "{\"w\":" + std::to_string(n) +
                                        ",\"i\":" + std::to_string(i) + "}"),
                       &id, &dup));
        return rollback ? Status::Busy("rolled back on purpose") : Status::OK();
      });
      EXPECT_EQ(st.ok(), !rollback) << st.ToString();
      if (st.ok()) committed++;
    }
    EXPECT_OK(s->Close());
  };
  std::vector<std::string> problems;
  std::thread tailer([&] {
    auto s = OpenOk(Options());
    if (s == nullptr) return;
    int64_t last = 0;
    while (!done.load()) {
      std::vector<EventRecord> got;
      EXPECT_OK(s->ReadEvents(last, SIZE_MAX, &got));
      for (const EventRecord& e : got) {
        if (e.seq != last + 1) {
          problems.push_back(std::to_string(e.seq) + " after " +
                             std::to_string(last));
        }
        last = e.seq;
      }
    }
  });
  std::vector<std::thread> workers;
  for (int n = 0; n < 4; n++) workers.emplace_back(worker, n);
  for (std::thread& w : workers) w.join();
  done = true;
  tailer.join();
  EXPECT_TRUE(problems.empty()) << problems.front();
  auto s = OpenOk(Options());
  const std::vector<EventRecord> all = Events(s.get());
  for (size_t i = 0; i < all.size(); i++) {
    ASSERT_EQ(all[i].seq, static_cast<int64_t>(i + 1));
  }
  TaskFilter f;
  f.steps = {"S"};
  std::vector<wizq::Task> tasks;
  ASSERT_OK(s->ListTasks(f, &tasks));
  EXPECT_EQ(static_cast<int>(tasks.size()), committed.load());
  for (size_t i = 0; i < tasks.size(); i++) {
    EXPECT_EQ(tasks[i].id, static_cast<int64_t>(i + 2)) << "ids are dense";
  }
}

}  // namespace
}  // namespace wizq::test
