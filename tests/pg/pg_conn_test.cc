// PgConn (queue/pg/pg_conn.h) against a real PostgreSQL: bound parameters,
// the mapping of errors, the unknown outcome of a COMMIT whose session is
// lost, LISTEN/NOTIFY, advisory locks, and the session settings.
#include "queue/pg/pg_conn.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/pg/pg_test_util.h"

namespace wizq::test {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class PgConnTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_OK(admin_->Exec("CREATE SCHEMA " + schema_));
  }
  std::string T(const std::string& table) { return schema_ + "." + table; }

  // Waits until backend `pid` waits on `event` (pg_stat_activity's
  // wait_event) and runs `query`. Asked on a session of its own: within a
  // transaction pg_stat_activity does not change.
  void WaitForBackend(int pid, const std::string& event,
                      const std::string& query) {
    auto watcher = Connect();
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      PgResult r;
      ASSERT_OK(watcher->Exec(
          "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1 AND "
          "wait_event = $2 AND query = $3",
          {pid, event, query}, &r));
      if (r.GetInt(0, "n") == 1) return;
      std::this_thread::sleep_for(milliseconds(5));
    }
    FAIL() << "backend " << pid << " never waited on " << event;
  }
};

TEST_F(PgConnTest, BoundParametersRoundTripUnchanged) {
  ASSERT_OK(admin_->Exec("CREATE TABLE " + T("v") + " (id int, s text)"));
  const std::vector<std::string> values = {
      "it's \"quoted\"",
      "back\\slash\\",
      "$1 and $2 and ?",
      "'); DROP TABLE v; --",
      "unicode: h\xC3\xA9llo \xE2\x9C\x93 \xE6\x97\xA5\xE6\x9C\xAC "
      "\xF0\x9F\x8E\x89",
      R"({"b":1,"a":"\u0000","a":2})",  // a JSON \u0000 escape, keys as given
      "",
  };
  for (size_t i = 0; i < values.size(); i++) {
    ASSERT_OK(admin_->Exec("INSERT INTO " + T("v") + " VALUES ($1, $2)",
                           {static_cast<int>(i), values[i]}));
  }
  PgResult r;
  ASSERT_OK(
      admin_->Exec("SELECT id, s FROM " + T("v") + " ORDER BY id", {}, &r));
  ASSERT_EQ(r.rows(), static_cast<int>(values.size()));
  for (int i = 0; i < r.rows(); i++) {
    EXPECT_EQ(r.Get(i, "s"), values[i]);
    EXPECT_FALSE(r.IsNull(i, r.Column("s")));
  }
  // NULL is not "".
  ASSERT_OK(admin_->Exec("SELECT $1::text AS s", {nullptr}, &r));
  EXPECT_TRUE(r.IsNull(0, r.Column("s")));

  // Why the schema keeps JSON as text: jsonb refuses \u0000 and reorders.
  Status s = admin_->Exec("SELECT $1::jsonb", {values[5]});
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(admin_->last_error().sqlstate, "22P05");

  // A raw NUL cannot be in a text value: refused before it is sent
  // (libpq would cut the value at it), naming the parameter.
  s = admin_->Exec("SELECT $1::text, $2::text", {"ok", std::string("a\0b", 3)});
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("parameter $2 holds a NUL byte"),
            std::string::npos)
      << s.message();
  // Bytes (bytea, binary format) may hold NULs.
  const std::string bytes("\0\x01\xff'\\", 5);
  ASSERT_OK(admin_->Exec("SELECT $1::bytea AS b", {PgParam::Bytes(bytes)}, &r));
  EXPECT_EQ(r.GetBytes(0, "b"), bytes);
  // Prepared statements bind the same way.
  ASSERT_OK(admin_->Prepare("echo", "SELECT $1::text AS s"));
  ASSERT_OK(admin_->ExecPrepared("echo", {values[3]}, &r));
  EXPECT_EQ(r.Get(0, "s"), values[3]);
}

TEST_F(PgConnTest, ErrorsAreMappedWithTheirSqlstate) {
  ASSERT_OK(admin_->Exec("CREATE TABLE " + T("u") + " (k int UNIQUE)"));
  ASSERT_OK(admin_->Exec("INSERT INTO " + T("u") + " VALUES (1)"));
  PgResult r;
  ASSERT_OK(admin_->Exec("INSERT INTO " + T("u") + " VALUES (2)", {}, &r));
  EXPECT_EQ(r.affected_rows(), 1);

  Status s = admin_->Exec("INSERT INTO " + T("u") + " VALUES ($1)", {1});
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  EXPECT_EQ(admin_->last_error().kind, PgErrorKind::kUniqueViolation);
  EXPECT_EQ(admin_->last_error().sqlstate, "23505");
  EXPECT_NE(s.message().find("SQLSTATE 23505"), std::string::npos);
  EXPECT_FALSE(admin_->lost());
  ASSERT_OK(admin_->Ping());

  // lock_not_available: a row another session holds, with a short wait.
  auto holder = Connect();
  ASSERT_OK(holder->Begin());
  ASSERT_OK(
      holder->Exec("SELECT k FROM " + T("u") + " WHERE k = 1 FOR UPDATE"));
  ASSERT_OK(admin_->Exec("SET lock_timeout = 50"));
  s = admin_->Exec("UPDATE " + T("u") + " SET k = 3 WHERE k = 1");
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(admin_->last_error().kind, PgErrorKind::kLockNotAvailable);
  EXPECT_EQ(admin_->last_error().sqlstate, "55P03");
  ASSERT_OK(holder->Rollback());

  // serialization_failure: a row changed under a REPEATABLE READ snapshot.
  ASSERT_OK(holder->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ"));
  ASSERT_OK(holder->Exec("SELECT k FROM " + T("u")));
  ASSERT_OK(admin_->Exec("UPDATE " + T("u") + " SET k = 5 WHERE k = 2"));
  s = holder->Exec("UPDATE " + T("u") + " SET k = 6 WHERE k = 2");
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(holder->last_error().kind, PgErrorKind::kRetryable);
  EXPECT_EQ(holder->last_error().sqlstate, "40001");
  ASSERT_OK(holder->Rollback());

  // deadlock_detected: two sessions lock two rows in opposite orders; the
  // one with the short deadlock_timeout is the one told.
  ASSERT_OK(admin_->Exec("RESET lock_timeout"));
  ASSERT_OK(holder->Begin());
  ASSERT_OK(admin_->Begin());
  ASSERT_OK(admin_->Exec("SET LOCAL deadlock_timeout = 10"));
  ASSERT_OK(holder->Exec("UPDATE " + T("u") + " SET k = 7 WHERE k = 1"));
  ASSERT_OK(admin_->Exec("UPDATE " + T("u") + " SET k = 8 WHERE k = 5"));
  Status holder_s;
  std::thread t([&] {
    holder_s = holder->Exec("UPDATE " + T("u") + " SET k = 9 WHERE k = 5");
  });
  WaitForBackend(holder->backend_pid(), "transactionid",
                 "UPDATE " + T("u") + " SET k = 9 WHERE k = 5");
  s = admin_->Exec("UPDATE " + T("u") + " SET k = 10 WHERE k = 1");
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(admin_->last_error().kind, PgErrorKind::kRetryable);
  EXPECT_EQ(admin_->last_error().sqlstate, "40P01");
  ASSERT_OK(admin_->Rollback());
  t.join();
  EXPECT_OK(holder_s);
  ASSERT_OK(holder->Rollback());

  // query_canceled: statement_timeout.
  ASSERT_OK(admin_->Exec("SET statement_timeout = 50"));
  s = admin_->Exec("SELECT pg_sleep(5)");
  EXPECT_TRUE(s.IsBusy()) << s.ToString();
  EXPECT_EQ(admin_->last_error().kind, PgErrorKind::kQueryCanceled);
  EXPECT_EQ(admin_->last_error().sqlstate, "57014");

  // A COMMIT of a failed transaction is a rollback, not a success.
  ASSERT_OK(admin_->Begin());
  EXPECT_FALSE(admin_->Exec("INSERT INTO " + T("u") + " VALUES (1)").ok());
  s = admin_->Commit();
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  EXPECT_FALSE(admin_->in_transaction());

  // admin_shutdown: the session ends, stays lost, is not reconnected.
  auto victim = Connect();
  ASSERT_OK(cluster_->TerminateBackend(victim->backend_pid()));
  s = victim->Ping();
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ(victim->last_error().kind, PgErrorKind::kConnectionLost);
  EXPECT_TRUE(victim->lost());
  s = victim->Exec("SELECT 1");
  EXPECT_EQ(victim->last_error().kind, PgErrorKind::kConnectionLost);
  EXPECT_NE(s.message().find("lost earlier"), std::string::npos) << s.message();
}

// A session lost while its COMMIT waits: here the COMMIT waits on a
// deferred unique check against another session's uncommitted row, and
// the transaction did NOT commit; the caller cannot know that.
TEST_F(PgConnTest, SessionLostDuringCommitIsUnknownOutcomeNotLanded) {
  ASSERT_OK(admin_->Exec("CREATE TABLE " + T("d") +
                         " (k int UNIQUE DEFERRABLE INITIALLY DEFERRED)"));
  auto first = Connect();
  ASSERT_OK(first->Begin());
  ASSERT_OK(first->Exec("INSERT INTO " + T("d") + " VALUES (1)"));
  auto victim = Connect();
  ASSERT_OK(victim->Begin());
  ASSERT_OK(victim->Exec("INSERT INTO " + T("d") + " VALUES (1)"));
  Status commit;
  std::thread t([&] { commit = victim->Commit(); });
  WaitForBackend(victim->backend_pid(), "transactionid", "COMMIT");
  EXPECT_OK(cluster_->TerminateBackend(victim->backend_pid()));
  t.join();
  EXPECT_TRUE(commit.IsIOError()) << commit.ToString();
  EXPECT_EQ(victim->last_error().kind, PgErrorKind::kCommitUnknown)
      << commit.ToString();
  EXPECT_NE(commit.message().find("may or may not have committed"),
            std::string::npos)
      << commit.message();
  ASSERT_OK(first->Rollback());
  PgResult r;
  ASSERT_OK(admin_->Exec("SELECT count(*) AS n FROM " + T("d"), {}, &r));
  EXPECT_EQ(r.GetInt(0, "n"), 0);  // it did not land
}

// The same when the transaction DID commit: a synchronous standby that
// never comes holds COMMIT after it is durable, until the session ends.
TEST_F(PgConnTest, SessionLostDuringCommitIsUnknownOutcomeLanded) {
  ASSERT_OK(admin_->Exec("CREATE TABLE " + T("l") + " (k int)"));
  auto victim = Connect();
  CommitsHeld held(admin_.get());
  ASSERT_OK(held.Hold());
  for (int i = 0;; i++) {  // until the victim's backend has reloaded
    PgResult r;
    ASSERT_OK(victim->Exec("SHOW synchronous_standby_names", {}, &r));
    if (r.Get(0, 0) == CommitsHeld::kNoStandby) break;
    ASSERT_LT(i, 1000) << "the setting never reached the session";
    std::this_thread::sleep_for(milliseconds(5));
  }
  // The checkpointer turns synchronous replication on a moment after the
  // reload: until then a COMMIT does not wait (and lands). Tried again
  // until one waits.
  int landed_before = 0;
  for (bool waited = false; !waited; landed_before += waited ? 0 : 1) {
    ASSERT_LT(landed_before, 200) << "COMMIT never waited for the standby";
    ASSERT_OK(victim->Begin());
    ASSERT_OK(victim->Exec("INSERT INTO " + T("l") + " VALUES (7)"));
    std::atomic<bool> returned{false};
    Status commit;
    std::thread t([&] {
      commit = victim->Commit();
      returned = true;
    });
    while (!returned && !waited) {
      PgResult r;
      ASSERT_OK(admin_->Exec(
          "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1 AND "
          "wait_event = 'SyncRep' AND query = 'COMMIT'",
          {victim->backend_pid()}, &r));
      waited = r.GetInt(0, "n") == 1;
    }
    if (waited) EXPECT_OK(cluster_->TerminateBackend(victim->backend_pid()));
    t.join();
    if (!waited) {
      ASSERT_OK(commit);
      continue;
    }
    EXPECT_TRUE(commit.IsIOError()) << commit.ToString();
    EXPECT_EQ(victim->last_error().kind, PgErrorKind::kCommitUnknown)
        << commit.ToString();
  }
  PgResult r;
  ASSERT_OK(admin_->Exec("SELECT count(*) AS n FROM " + T("l"), {}, &r));
  EXPECT_EQ(r.GetInt(0, "n"), landed_before + 1);  // it landed
}

// A session lost before COMMIT was sent: the outcome is known (nothing
// committed), so it is not kCommitUnknown.
TEST_F(PgConnTest, SessionLostBeforeCommitIsNotUnknown) {
  auto victim = Connect();
  ASSERT_OK(victim->Begin());
  ASSERT_OK(cluster_->TerminateBackend(victim->backend_pid()));
  EXPECT_FALSE(victim->Exec("SELECT 1").ok());
  const Status s = victim->Commit();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(victim->last_error().kind, PgErrorKind::kConnectionLost);
}

// A pipeline answers each statement in order, in the caller's transaction,
// across more statements than one chunk (kPipelineChunk, 64).
TEST_F(PgConnTest, APipelineAnswersEachStatementInOrder) {
  ASSERT_OK(admin_->Exec("CREATE TABLE " + T("p") + " (id int PRIMARY KEY)"));
  std::vector<PgStatement> batch = {{"BEGIN", {}}};
  for (int i = 1; i <= 150; i++) {
    batch.push_back({"INSERT INTO " + T("p") + " VALUES ($1)", {i}});
  }
  batch.push_back({"UPDATE " + T("p") + " SET id = id WHERE id > $1", {100}});
  batch.push_back(
      {"SELECT sum(id) AS s, $1::text AS q FROM " + T("p"), {"it's $1"}});
  std::vector<PgResult> r;
  ASSERT_OK(admin_->ExecPipeline(batch, &r));
  ASSERT_EQ(r.size(), batch.size());
  EXPECT_EQ(r[1].affected_rows(), 1);
  EXPECT_EQ(r[151].affected_rows(), 50);
  EXPECT_EQ(r[152].GetInt(0, "s"), 150 * 151 / 2);
  EXPECT_EQ(r[152].Get(0, "q"), "it's $1");
  EXPECT_TRUE(admin_->in_transaction());  // a sync does not end BEGIN's
  ASSERT_OK(admin_->Rollback());
  ASSERT_OK(admin_->Exec("SELECT count(*) AS n FROM " + T("p"), {}, &r[0]));
  EXPECT_EQ(r[0].GetInt(0, "n"), 0);
}

// The first statement that fails gives the Status; the server skips the
// rest, and the session goes on once the transaction is rolled back.
TEST_F(PgConnTest, APipelineStopsAtItsFirstFailure) {
  ASSERT_OK(admin_->Exec("CREATE TABLE " + T("p") + " (id int PRIMARY KEY)"));
  ASSERT_OK(admin_->Begin());
  const std::string insert = "INSERT INTO " + T("p") + " VALUES ($1)";
  Status s = admin_->ExecPipeline({{insert, {1}}, {insert, {1}}, {insert, {2}}},
                                  nullptr);
  EXPECT_EQ(admin_->last_error().kind, PgErrorKind::kUniqueViolation)
      << s.ToString();
  EXPECT_FALSE(s.ok());
  ASSERT_OK(admin_->Rollback());
  PgResult r;
  ASSERT_OK(admin_->Exec("SELECT count(*) AS n FROM " + T("p"), {}, &r));
  EXPECT_EQ(r.GetInt(0, "n"), 0);
  // A NUL byte is refused before anything is sent.
  s = admin_->ExecPipeline(
      {{insert, {3}}, {"SELECT $1::text", {std::string("a\0b", 3)}}}, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  ASSERT_OK(admin_->Exec("SELECT count(*) AS n FROM " + T("p"), {}, &r));
  EXPECT_EQ(r.GetInt(0, "n"), 0);
  ASSERT_OK(admin_->ExecPipeline({{insert, {4}}}, nullptr));  // implicit txn
  ASSERT_OK(admin_->Exec("SELECT count(*) AS n FROM " + T("p"), {}, &r));
  EXPECT_EQ(r.GetInt(0, "n"), 1);
}

// A generic statement runs between its settings (PgStatement::generic):
// its answer is its own, in its place among the others', and after it the
// settings are the session's again.
TEST_F(PgConnTest, AGenericStatementRunsUnderItsSettingsAndNoOther) {
  ASSERT_OK(admin_->Begin());
  PgStatement during{
      "SELECT current_setting('plan_cache_mode') AS m, "
      "current_setting('enable_sort') AS s, $1::int AS i",
      {2}};
  during.generic = true;
  std::vector<PgResult> r;
  ASSERT_OK(admin_->ExecPipeline(
      {{"SELECT $1::int AS i", {1}},
       during,
       {"SELECT current_setting('plan_cache_mode') AS m, "
        "current_setting('enable_sort') AS s, $1::int AS i",
        {3}}},
      &r));
  ASSERT_OK(admin_->Commit());
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].GetInt(0, "i"), 1);
  EXPECT_EQ(r[1].GetInt(0, "i"), 2);
  EXPECT_EQ(r[1].Get(0, "m"), "force_generic_plan");
  EXPECT_EQ(r[1].Get(0, "s"), "off");
  EXPECT_EQ(r[2].GetInt(0, "i"), 3);
  EXPECT_EQ(r[2].Get(0, "m"), "auto");
  EXPECT_EQ(r[2].Get(0, "s"), "on");
}

// A session ended while a pipeline waits is lost, as for one statement.
TEST_F(PgConnTest, ASessionLostDuringAPipelineIsLost) {
  auto victim = Connect();
  const int pid = victim->backend_pid();
  std::thread killer([&] {
    WaitForBackend(pid, "PgSleep", "SELECT pg_sleep($1)");
    ASSERT_OK(admin_->Exec("SELECT pg_terminate_backend($1)", {pid}));
  });
  const Status s = victim->ExecPipeline(
      {{"SELECT 1 AS a", {}}, {"SELECT pg_sleep($1)", {30}}}, nullptr);
  killer.join();
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(victim->lost());
  EXPECT_EQ(victim->last_error().kind, PgErrorKind::kConnectionLost);
  EXPECT_TRUE(victim->Exec("SELECT 1").IsIOError());
}

TEST_F(PgConnTest, ListenNotifyDeliversAndTimesOut) {
  auto listener = Connect();
  auto notifier = Connect();
  const std::string channel = schema_ + " \"odd\" channel";  // quoted
  ASSERT_OK(listener->Listen(channel));
  std::vector<PgNotification> got;
  Clock::time_point t0 = Clock::now();
  ASSERT_OK(listener->WaitForNotifications(milliseconds(150), &got));
  EXPECT_TRUE(got.empty());
  EXPECT_GE(Clock::now() - t0, milliseconds(150));

  // Sent at once outside a transaction; the wait ends when it comes.
  std::thread sender([&] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_OK(notifier->Notify(channel, "run:42"));
  });
  t0 = Clock::now();
  ASSERT_OK(listener->WaitForNotifications(std::chrono::seconds(10), &got));
  sender.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].channel, channel);
  EXPECT_EQ(got[0].payload, "run:42");
  EXPECT_EQ(got[0].sender_pid, notifier->backend_pid());

  // Inside a transaction: delivered at COMMIT, dropped at ROLLBACK.
  ASSERT_OK(notifier->Begin());
  ASSERT_OK(notifier->Notify(channel, "rolled back"));
  ASSERT_OK(notifier->Rollback());
  ASSERT_OK(notifier->Begin());
  ASSERT_OK(notifier->Notify(channel, "run:43"));
  ASSERT_OK(listener->WaitForNotifications(milliseconds(100), &got));
  EXPECT_TRUE(got.empty());
  ASSERT_OK(notifier->Commit());
  ASSERT_OK(listener->WaitForNotifications(std::chrono::seconds(10), &got));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "run:43");

  // A listener whose session ends learns it.
  ASSERT_OK(cluster_->TerminateBackend(listener->backend_pid()));
  const Status s =
      listener->WaitForNotifications(std::chrono::seconds(10), &got);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(listener->lost());
}

TEST_F(PgConnTest, AdvisoryLockReleasedWhenSessionTerminated) {
  const int32_t space = 0x77697a74, key = 4242;
  auto holder = Connect();
  auto other = Connect();
  bool got = false;
  ASSERT_OK(holder->TryAdvisoryLock(space, key, &got));
  EXPECT_TRUE(got);
  ASSERT_OK(other->TryAdvisoryLock(space, key, &got));
  EXPECT_FALSE(got);
  PgResult r;
  ASSERT_OK(admin_->Exec(
      "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
      "classid = $1::int::oid AND objid = $2::int::oid AND objsubid = 2",
      {space, key}, &r));
  ASSERT_EQ(r.rows(), 1);
  EXPECT_EQ(r.GetInt(0, "pid"), holder->backend_pid());

  ASSERT_OK(cluster_->TerminateBackend(holder->backend_pid()));
  ASSERT_OK(other->TryAdvisoryLock(space, key, &got));
  EXPECT_TRUE(got);  // released with the session
  EXPECT_FALSE(holder->Ping().ok());
  EXPECT_TRUE(holder->lost());

  bool released = false;
  ASSERT_OK(other->AdvisoryUnlock(space, key, &released));
  EXPECT_TRUE(released);
  ASSERT_OK(other->AdvisoryUnlock(space, key, &released));
  EXPECT_FALSE(released);
}

TEST_F(PgConnTest, SessionSettingsAreSet) {
  PgResult r;
  ASSERT_OK(admin_->Exec(
      "SELECT current_setting('application_name') AS app, "
      "current_setting('lock_timeout') AS lock, "
      "current_setting('statement_timeout') AS stmt, "
      "current_setting('idle_in_transaction_session_timeout') AS idle_tx, "
      "current_setting('idle_session_timeout') AS idle, "
      "current_setting('client_encoding') AS enc",
      {}, &r));
  EXPECT_EQ(r.Get(0, "app"), "wizq test");
  EXPECT_EQ(r.Get(0, "lock"), "10s");
  EXPECT_EQ(r.Get(0, "stmt"), "1min");
  EXPECT_EQ(r.Get(0, "idle_tx"), "1min");
  EXPECT_EQ(r.Get(0, "idle"), "0");
  EXPECT_EQ(r.Get(0, "enc"), "UTF8");

  // The caller's values, then the location's, win over the defaults.
  PgConnOptions o;
  o.application_name = "wizq caller";
  o.lock_timeout_ms = 1234;
  o.idle_in_transaction_timeout_ms = 300;
  std::unique_ptr<PgConn> c;
  ASSERT_OK(PgConn::Open(cluster_->Location() + " connect_timeout=3", o, &c));
  ASSERT_OK(
      c->Exec("SELECT current_setting('application_name') AS app, "
              "current_setting('lock_timeout') AS lock",
              {}, &r));
  EXPECT_EQ(r.Get(0, "app"), "wizq caller");
  EXPECT_EQ(r.Get(0, "lock"), "1234ms");
  std::unique_ptr<PgConn> named;
  ASSERT_OK(
      PgConn::Open(cluster_->Location() + " application_name=mine", o, &named));
  ASSERT_OK(
      named->Exec("SELECT current_setting('application_name') AS app", {}, &r));
  EXPECT_EQ(r.Get(0, "app"), "mine");

  // idle_in_transaction_session_timeout ends a session left in a
  // transaction.
  ASSERT_OK(c->Begin());
  std::this_thread::sleep_for(milliseconds(900));
  const Status s = c->Exec("SELECT 1");
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ(c->last_error().kind, PgErrorKind::kConnectionLost);
}

}  // namespace
}  // namespace wizq::test
