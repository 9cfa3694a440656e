// The claim query under the planner traps and vacuum starvation of the
// anchors (docs/design postgres-anchors.md §2.8, §2.9; pitfall rows 8 and
// 9): ineligible rows ahead of eligible ones, an old snapshot that keeps
// churned rows alive, a session left idle inside a transaction.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "queue/pg/pg_store.h"
#include "queue/pg/pg_work.h"
#include "tests/integration_util.h"
#include "tests/pg/pg_store_fixture.h"

namespace wizq::test {
namespace {

using Clock = std::chrono::steady_clock;

// Submits `n` tasks of `step` (inputs {"i": first..}) in one transaction.
Status SubmitMany(Store* s, const std::string& step, int first, int n) {
  return s->Transact([&](StoreTxn& txn) {
    for (int i = first; i < first + n; i++) {
      int64_t id = 0;
      bool dup = false;
      WIZQ_RETURN_IF_ERROR(txn.Submit(
          MakeNew(step, "{\"i\":" + std::to_string(i) + "}"), &id, &dup));
    }
    return Status::OK();
  });
}

// Claims up to `max` tasks of `steps` and completes them, in one
// transaction; *n: how many.
Status ClaimAndComplete(Store* s, const std::set<std::string>& steps, int max,
                        int* n) {
  return s->Transact([&](StoreTxn& txn) {
    ClaimFilter f;
    f.steps = steps;
    f.max = max;
    std::vector<wizq::Task> got;
    WIZQ_RETURN_IF_ERROR(txn.Claim(f, &got));
    *n = static_cast<int>(got.size());
    std::vector<int64_t> ids;
    for (const wizq::Task& t : got) ids.push_back(t.id);
    if (!ids.empty()) WIZQ_RETURN_IF_ERROR(txn.MarkStarted(ids));
    for (int64_t id : ids) {
      WIZQ_RETURN_IF_ERROR(txn.Complete(id, Completion(), nullptr));
    }
    return Status::OK();
  });
}

// The median time of `rounds` transactions that each claim and complete
// one task of step "Probe" (submitted first).
double ProbeClaimMs(Store* s, int rounds, int first) {
  EXPECT_OK(SubmitMany(s, "Probe", first, rounds));
  std::vector<double> ms;
  for (int i = 0; i < rounds; i++) {
    const auto t0 = Clock::now();
    int n = 0;
    EXPECT_OK(ClaimAndComplete(s, {"Probe"}, 1, &n));
    EXPECT_EQ(n, 1);
    ms.push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The plan of `execute` ("EXECUTE name(args)" of a prepared statement),
// custom and generic (as a prepared statement's becomes after five runs),
// reads the partial index of pending tasks in id order (an index scan, not
// a bitmap scan that fetches every pending row to sort them), never the
// whole table. `generic`: the statement is a PgStatement::generic one (the
// claim), planned as the store plans it: only the generic plan, made
// under kPgGenericPlansSql's settings.
void ExpectReadsTasksReady(PgConn* admin, const std::string& execute,
                           bool generic = false) {
  std::vector<std::string> modes = {"force_generic_plan"};
  if (!generic) modes.push_back("force_custom_plan");
  for (const std::string& mode : modes) {
    if (generic) {
      ASSERT_OK(admin->Exec(kPgGenericPlansSql, {false}));
    } else {
      ASSERT_OK(admin->ExecScript("SET plan_cache_mode = " + mode));
    }
    PgResult plan;
    ASSERT_OK(admin->Exec("EXPLAIN " + execute, {}, &plan));
    std::string text;
    for (int i = 0; i < plan.rows(); i++) {
      text += std::string(plan.Get(i, 0)) + "\n";
    }
    EXPECT_NE(text.find("Scan using tasks_ready"), std::string::npos)
        << mode << ":\n"
        << text;
    EXPECT_EQ(text.find("Bitmap"), std::string::npos) << mode << ":\n" << text;
    EXPECT_EQ(text.find("Sort"), std::string::npos) << mode << ":\n" << text;
    EXPECT_EQ(text.find("Seq Scan on tasks"), std::string::npos)
        << mode << ":\n"
        << text;
  }
  EXPECT_OK(admin->Exec(kPgCustomPlansSql, {false}));
}

// The claim query, prepared as "claim" on `admin` for the run of the
// store's schema; returns its EXECUTE with `steps` (a text[] literal).
std::string PrepareClaim(PgConn* admin, const std::string& schema,
                         const std::string& steps) {
  PgResult run;
  EXPECT_OK(admin->Exec("SELECT run FROM " + schema + ".runs", {}, &run));
  const std::string sql =
      PgSchemaSql(std::string("SELECT ") + kPgTaskColumns + kPgClaimable,
                  admin->QuoteIdentifier(schema));
  EXPECT_OK(admin->ExecScript("PREPARE claim AS " + sql));
  return "EXECUTE claim(" + std::string(run.Get(0, "run")) +
         ", (extract(epoch FROM now()) * 1000)::bigint, 0, '" + steps +
         "', '{Gate}', '{}', 0, '{}', 10, 'elsewhere', 12345)";
}

// Pitfall row 9: 10^4 pending rows no claim may take (a step this worker
// does not do, a gate nobody answered, a retry not due for an hour) ahead
// of eligible ones. The claim returns the eligible ones (each test is
// inside the locked, LIMITed scan: none of the ineligible rows uses up the
// limit), and its plan — custom and generic, as a prepared statement
// becomes after five runs — reads the partial index of pending tasks.
TEST_F(PgStoreTest, IneligibleRowsAheadOfEligibleOnesNeitherHideThemNorScan) {
  auto s = OpenOk(Options());
  ASSERT_NE(s, nullptr);
  ASSERT_OK(SubmitMany(s.get(), "Other", 0, 4000));
  ASSERT_OK(SubmitMany(s.get(), "Gate", 0, 3000));
  ASSERT_OK(SubmitMany(s.get(), "Later", 0, 3000));
  // A retry an hour away, as a failure with a long retry delay leaves it.
  ASSERT_OK(admin_->Exec("UPDATE " + schema_ +
                         ".tasks SET retry_at_ms = (extract(epoch FROM now()) "
                         "* 1000)::bigint + 3600000 WHERE step = 'Later'"));
  ASSERT_OK(SubmitMany(s.get(), "S", 0, 5));
  ClaimFilter f;
  f.steps = {"S", "Gate", "Later"};
  f.answered_only = {"Gate"};
  f.max = 10;
  std::vector<wizq::Task> got;
  ASSERT_OK(s->Transact([&](StoreTxn& txn) { return txn.Claim(f, &got); }));
  ASSERT_EQ(got.size(), 5u);
  for (size_t i = 0; i < got.size(); i++) {
    EXPECT_EQ(got[i].type, "S");
    EXPECT_EQ(got[i].id, static_cast<int64_t>(10001 + i));
  }

  ExpectReadsTasksReady(admin_.get(),
                        PrepareClaim(admin_.get(), schema_, "{S,Gate,Later}"),
                        /*generic=*/true);
}

// Once autovacuum analyzed the tasks (here ANALYZE, with every task of the
// run pending), PostgreSQL's own generic plan of the claim fetches every
// pending row and sorts them, and it kept planning the claim on each run
// instead (374 us a claim). The store runs it on a generic plan made
// without sorts (PgStatement::generic), which reads tasks_ready in order.
TEST_F(PgStoreTest, TheClaimKeepsAnOrderedPlanOnceTheTasksAreAnalyzed) {
  auto s = OpenOk(Options());
  ASSERT_NE(s, nullptr);
  ASSERT_OK(SubmitMany(s.get(), "S", 0, 5000));
  ASSERT_OK(admin_->Exec("ANALYZE " + schema_ + ".tasks"));
  ExpectReadsTasksReady(admin_.get(),
                        PrepareClaim(admin_.get(), schema_, "{S}"),
                        /*generic=*/true);
  int n = 0;  // and the store claims through it
  ASSERT_OK(ClaimAndComplete(s.get(), {"S"}, 8, &n));
  EXPECT_EQ(n, 8);
}

// The claim's transaction raises the run's pending floor in the write of
// the run's row (PgRunWrite), a prepared statement: custom and generic,
// its plan reads the partial index of pending tasks from the floor, never
// the whole run.
TEST_F(PgStoreTest, TheRaisedFloorReadsThePendingIndex) {
  auto s = OpenOk(Options());
  ASSERT_NE(s, nullptr);
  ASSERT_OK(SubmitMany(s.get(), "Other", 0, 4000));
  int n = 0;
  ASSERT_OK(ClaimAndComplete(s.get(), {"Other"}, 3000, &n));
  ASSERT_EQ(n, 3000);
  ASSERT_OK(admin_->Exec("ANALYZE " + schema_ + ".tasks"));
  PgResult run;
  ASSERT_OK(admin_->Exec("SELECT run, pending_floor FROM " + schema_ + ".runs",
                         {}, &run));
  EXPECT_EQ(run.GetInt(0, "pending_floor"), 3001);
  const PgStatement write =
      PgRunWrite(admin_->QuoteIdentifier(schema_), PgRun(), true);
  ASSERT_OK(admin_->ExecScript("PREPARE runwrite AS " + write.sql));
  const std::string args = "(" + std::string(run.Get(0, "run")) +
                           ", 0, 0, 0, '', false, '[]', 1, 4001, 0, 0, 0, "
                           "0, 0, 0, 0, 0, 0, 0, 0, 1, 1)";
  ExpectReadsTasksReady(admin_.get(), "EXECUTE runwrite" + args);
  ASSERT_OK(admin_->ExecScript("DEALLOCATE runwrite"));
}

// Buffer reads of the tasks indexes a write by key has no business in
// (all but the key, the pending and the in-progress ones), as the server's
// statistics have them once the session that made them flushed them.
int64_t StrayIndexReads(PgConn* admin, const std::string& schema) {
  PgResult r;
  EXPECT_OK(admin->Exec(
      "SELECT coalesce(sum(idx_blks_hit + idx_blks_read), 0)::bigint AS n "
      "FROM pg_statio_user_indexes WHERE schemaname = $1 AND relname = "
      "'tasks' AND indexrelname NOT IN ('tasks_pkey', 'tasks_ready', "
      "'tasks_in_progress')",
      {schema}, &r));
  return r.rows() == 1 ? r.GetInt(0, "n") : -1;
}

// The same once the figure holds still for 100 ms (a session's statistics
// reach the server some time after its transaction or its exit).
int64_t SettledStrayIndexReads(PgConn* admin, const std::string& schema) {
  int64_t last = StrayIndexReads(admin, schema);
  for (int i = 0; i < 50; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int64_t now = StrayIndexReads(admin, schema);
    if (now == last) break;
    last = now;
  }
  return last;
}

// A session's generic plans made while its run was small are made again
// once it is not (PgStore::RemakeSmallPlans). Made while the table held
// 20 rows and was never analyzed, the plan of a task's write read another
// index by the run alone, and so walked the whole run for every write
// (autovacuum, off here, would have analyzed the table and replaced the
// plan after a while).
TEST_F(PgStoreTest, PlansMadeWhileTheRunWasSmallAreMadeAgain) {
  auto s = OpenOk(Options());
  ASSERT_NE(s, nullptr);
  ASSERT_OK(admin_->Exec("ALTER TABLE " + schema_ +
                         ".tasks SET (autovacuum_enabled = false)"));
  ASSERT_OK(SubmitMany(s.get(), "S", 0, 20));
  for (int i = 0; i < 10; i++) {  // five runs and more of each statement
    int n = 0;
    ASSERT_OK(ClaimAndComplete(s.get(), {"S"}, 1, &n));
    ASSERT_EQ(n, 1);
  }
  for (int i = 20; i < 20020; i += 1000) {  // a fan-out: 1,000 a transaction
    ASSERT_OK(SubmitMany(s.get(), "S", i, 1000));
  }
  // A session flushes its statistics at the end of a transaction at most
  // once a second: after this one's, those of everything before it are in.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  int n = 0;
  ASSERT_OK(ClaimAndComplete(s.get(), {"S"}, 1, &n));
  const int64_t before = SettledStrayIndexReads(admin_.get(), schema_);
  for (int i = 0; i < 40; i++) {
    ASSERT_OK(ClaimAndComplete(s.get(), {"S"}, 1, &n));
    ASSERT_EQ(n, 1);
  }
  ASSERT_OK(s->Close());
  s.reset();
  // The session's last statistics are flushed as its backend exits.
  const int64_t after = SettledStrayIndexReads(admin_.get(), schema_);
  std::printf("PG-SMALL-PLANS stray index buffers: %lld for 40 claims\n",
              static_cast<long long>(after - before));
  // Each claim reads the children of the task it claims: about 8 buffers
  // a claim (325 in all, measured). A walk of the run's 20,000 entries is
  // about a hundred a write (4,283 in all without the remade plans).
  EXPECT_LT(after - before, 40 * 40);
}

TEST_F(PgStoreTest, ClaimsStayFastWhileAnOldSnapshotKeepsChurnedRowsAlive) {
  const int churn = EnvInt("WIZQ_PG_CHURN", 100000);
  auto s = OpenOk(Options());
  ASSERT_NE(s, nullptr);
  const double before = ProbeClaimMs(s.get(), 20, 0);
  // A session that took a snapshot and sits idle in its transaction (an
  // analytics query, a forgotten psql): no row that died after it can be
  // vacuumed away.
  std::unique_ptr<PgConn> old;
  PgConnOptions o;
  o.application_name = "old snapshot";
  o.idle_in_transaction_timeout_ms = 0;
  ASSERT_OK(PgConn::Open(cluster_->Location(), o, &old));
  ASSERT_OK(old->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ"));
  ASSERT_OK(old->Exec("SELECT count(*) FROM " + schema_ + ".tasks"));
  const auto t0 = Clock::now();
  for (int done = 0; done < churn;) {
    ASSERT_OK(SubmitMany(s.get(), "Churn", done, 1000));
    for (int n = 1; n > 0;) {
      ASSERT_OK(ClaimAndComplete(s.get(), {"Churn"}, 250, &n));
      done += n;
    }
  }
  const double churn_s =
      std::chrono::duration<double>(Clock::now() - t0).count();
  const double after = ProbeClaimMs(s.get(), 20, 100);
  PgResult dead;
  ASSERT_OK(
      admin_->Exec("SELECT n_dead_tup::bigint FROM pg_stat_user_tables WHERE "
                   "schemaname = $1 AND "
                   "relname = 'tasks'",
                   {schema_}, &dead));
  std::printf(
      "PG-CHURN churned=%d in %.1f s; claim+complete median %.2f ms before, "
      "%.2f ms after (x%.1f); dead task rows %s\n",
      churn, churn_s, before, after, after / before,
      dead.rows() > 0 ? std::string(dead.Get(0, "n_dead_tup")).c_str() : "?");
  ASSERT_OK(old->Exec("ROLLBACK"));
  // Each churned task leaves at least its submitted row version dead (its
  // claim and completion, one transaction, write it once). The server's
  // statistics lag the worker's last transactions by up to a few seconds;
  // without the old snapshot, pruning and vacuum would leave few.
  EXPECT_GT(dead.rows() > 0 ? dead.GetInt(0, "n_dead_tup") : 0, churn * 9 / 10)
      << "the old snapshot did not keep the churned rows";
  // Bounded: not a function of the rows churned. Before the claim's
  // floors, the children's index estimate and custom plans it grew with
  // them (x22 at 10^5; docs/POSTGRES.md, "Plans").
  EXPECT_LT(after, 3 * before + 2)
      << "claim+complete " << before << " ms before the churn, " << after
      << " ms after";
}

// Pitfall row 8, its other half: a process frozen inside a transaction
// (its session idle in it, the run's row locked) stalls every transaction
// of the run, renewals included. The server ends that session after
// kPgRunIdleInTransactionMs, whatever the frozen one's own lease: here an
// agent's session (no worker lease) and a worker with a 5 s lease, whose
// transaction waits about 2 s and succeeds, well within its lease.
TEST_F(PgStoreTest, ASessionFrozenInATransactionIsEndedWithinTheLease) {
  StoreOptions o = Options({MakeNew("S", "{}")});
  o.worker_lease_ms = 5000;
  auto a = OpenOk(o);
  ASSERT_NE(a, nullptr);
  StoreOptions agent = o;
  agent.worker_lease_ms = 0;
  std::unique_ptr<PgConn> frozen;
  ASSERT_OK(PgConn::Open(cluster_->Location(),
                         PgStore::SessionOptions(agent, "frozen agent"),
                         &frozen));
  ASSERT_OK(frozen->Exec("BEGIN"));
  ASSERT_OK(frozen->Exec("SELECT run FROM " + schema_ + ".runs FOR UPDATE"));
  const auto t0 = Clock::now();
  std::vector<wizq::Task> got;
  ClaimFilter f;
  f.steps = {"S"};
  ASSERT_OK(a->Transact([&](StoreTxn& txn) { return txn.Claim(f, &got); }));
  const double waited =
      std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(got.size(), 1u);
  EXPECT_GT(waited, 1.5) << "it did not wait for the frozen session";
  EXPECT_LT(waited, 4.0) << "the frozen session held the run too long";
  EXPECT_FALSE(frozen->Exec("SELECT 1").ok()) << "the session lives on";
  EXPECT_TRUE(frozen->lost());
}

// Seconds per task of a submit of `n` tasks in one transaction (a
// fan-out's completion spawns them so).
double SubmitSecondsPerTask(Store* s, int first, int n) {
  const auto t0 = Clock::now();
  EXPECT_OK(SubmitMany(s, "S", first, n));
  return std::chrono::duration<double>(Clock::now() - t0).count() / n;
}

// A transaction's submits find a key among the tasks it holds by a hash
// map (PgWork::keys_): a submit costs the same in a transaction of 3,000
// as in one of 45,000. When each submit compared its key with every task
// held, 50,000 took 43 s and 25,000 a quarter of that; here the larger
// transaction then cost about 5 times as much a task.
TEST_F(PgStoreTest, ASubmitOfManyTasksInOneTransactionIsLinear) {
  auto s = OpenOk(Options());
  ASSERT_NE(s, nullptr);
  const double small = SubmitSecondsPerTask(s.get(), 0, 3000);
  const double large = SubmitSecondsPerTask(s.get(), 3000, 45000);
  std::printf("PG-SUBMIT %.1f us a task in 3,000, %.1f in 45,000 (x%.2f)\n",
              small * 1e6, large * 1e6, large / small);
  EXPECT_LT(large, 3 * small);
}

}  // namespace
}  // namespace wizq::test
