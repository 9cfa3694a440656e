// SPEC §14, the local deadline: a proof of life counts only for the claims
// it renewed. A claim that lapsed while its worker was frozen and was
// given to another worker is lost: the worker's proofs stop counting (its
// local deadline, passed already, stays passed, so the spawner starts
// nothing) until the caller has taken it (Store::TakeLostClaims) and made
// sure its attempt never starts. Found by machines_torture_test (seed
// 701756270): a woken worker's renewer moved the deadline on and the
// worker started the stale attempt beside the new one.
#include <chrono>
#include <thread>

#include "tests/pg/pg_store_fixture.h"

namespace wizq::test {
namespace {

// Task `id` is given to another worker, as a rescue of its lapsed claim
// and a new claim would leave it.
Status GiveAway(PgConn* admin, const std::string& schema, int64_t id) {
  return admin->Exec("UPDATE " + schema +
                         ".tasks SET claimed_by = 'w-elsewhere', claim_token = "
                         "'elsewhere', claim_host = 'elsewhere' WHERE "
                         "task_id = $1",
                     {id});
}

Status ClaimOne(Store* s, std::vector<wizq::Task>* got) {
  ClaimFilter f;
  f.steps = {"S"};
  f.max = 1;
  return s->Transact([&](StoreTxn& txn) { return txn.Claim(f, got); });
}

// The renewer's proofs.
TEST_F(PgStoreTest, AClaimGivenAwayStopsTheRenewersProofsUntilItIsTaken) {
  StoreOptions o = Options({MakeNew("S", "{}")});
  o.worker_lease_ms = 1500;  // a renewal every 500 ms
  auto a = OpenOk(o);
  ASSERT_NE(a, nullptr);
  std::vector<wizq::Task> got;
  ASSERT_OK(ClaimOne(a.get(), &got));
  ASSERT_EQ(got.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const int64_t renewed = a->LocalDeadlineMs();
  ASSERT_OK(GiveAway(admin_.get(), schema_, got[0].id));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(a->LocalDeadlineMs(), renewed)
      << "a proof that did not renew a claim moved the deadline";
  std::vector<int64_t> lost;
  a->TakeLostClaims(&lost);
  EXPECT_EQ(lost, std::vector<int64_t>{got[0].id});
  lost.clear();
  a->TakeLostClaims(&lost);
  EXPECT_TRUE(lost.empty()) << "taken twice";
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_GT(a->LocalDeadlineMs(), renewed + 500)
      << "once taken, the proofs count again";
}

// A transaction's proofs: it reads the rows its worker holds and finds
// the lost claim itself.
TEST_F(PgStoreTest, AClaimGivenAwayStopsATransactionsProofUntilItIsTaken) {
  StoreOptions o = Options({MakeNew("S", "{}"), MakeNew("S", "{\"i\":2}"),
                            MakeNew("S", "{\"i\":3}")});
  o.worker_lease_ms = 12000;  // the renewer's first renewal after 4 s
  auto a = OpenOk(o);
  ASSERT_NE(a, nullptr);
  std::vector<wizq::Task> got;
  ASSERT_OK(ClaimOne(a.get(), &got));
  ASSERT_EQ(got.size(), 1u);
  const int64_t before = a->LocalDeadlineMs();
  ASSERT_OK(GiveAway(admin_.get(), schema_, got[0].id));
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  std::vector<wizq::Task> more;
  ASSERT_OK(ClaimOne(a.get(), &more));  // renews: a sixth of the lease went
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(a->LocalDeadlineMs(), before)
      << "a transaction that found a claim lost moved the deadline";
  std::vector<int64_t> lost;
  a->TakeLostClaims(&lost);
  EXPECT_EQ(lost, std::vector<int64_t>{got[0].id});
  // Its attempt's result is refused.
  Status done = a->Transact([&](StoreTxn& txn) {
    return txn.Complete(got[0].id, Completion(), nullptr);
  });
  EXPECT_TRUE(done.IsConflict()) << done.ToString();
  std::vector<wizq::Task> last;
  ASSERT_OK(ClaimOne(a.get(), &last));
  EXPECT_GE(a->LocalDeadlineMs(), before + 2100)
      << "once taken, a transaction's proof counts again";
}

// A transaction whose session was lost renews the claims on the liveness
// session before it tries again (PgStore::OnSession), with the store's
// mutex held: a claim given away meanwhile is found lost there, without a
// wait for that mutex (which hung the worker for ever: machines torture,
// seed 332358259).
TEST_F(PgStoreTest, AClaimGivenAwayIsFoundLostWhenTheSessionIsOpenedAgain) {
  StoreOptions o = Options({MakeNew("S", "{}"), MakeNew("S", "{\"i\":2}")});
  o.worker_lease_ms = 12000;
  auto a = OpenOk(o);
  ASSERT_NE(a, nullptr);
  std::vector<wizq::Task> got;
  ASSERT_OK(ClaimOne(a.get(), &got));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_OK(GiveAway(admin_.get(), schema_, got[0].id));
  wizq::Task t;
  ASSERT_OK(a->GetTask(got[0].id, &t));  // its session's last query
  PgResult r;
  ASSERT_OK(admin_->Exec(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
      "application_name = 'wizq' AND strpos(query, $1) > 0",
      {schema_}, &r));
  ASSERT_EQ(r.rows(), 1);
  std::vector<wizq::Task> more;
  ASSERT_OK(ClaimOne(a.get(), &more));
  ASSERT_EQ(more.size(), 1u);
  std::vector<int64_t> lost;
  a->TakeLostClaims(&lost);
  EXPECT_EQ(lost, std::vector<int64_t>{got[0].id});
}

// A lost claim is not claimed again by its worker until the worker's
// caller has taken it (TakeLostClaims): the run loop knows tasks by id,
// and may still hold the old attempt queued in its spawner. Claimed again
// at once, both attempts would run. (Handed back as lost while claimed
// again instead, the run loop dropped the new claim and held it for ever:
// machines torture, seed 2757356469.)
TEST_F(PgStoreTest, ALostClaimIsNotClaimedAgainUntilItIsTaken) {
  StoreOptions o = Options({MakeNew("S", "{}")});
  o.worker_lease_ms = 12000;
  auto a = OpenOk(o);
  ASSERT_NE(a, nullptr);
  std::vector<wizq::Task> got;
  ASSERT_OK(ClaimOne(a.get(), &got));
  ASSERT_EQ(got.size(), 1u);
  // Put back as a rescue of a never-started claim leaves it: pending.
  ASSERT_OK(admin_->Exec(
      "UPDATE " + schema_ +
          ".tasks SET state = 0, claimed_by = '', claim_token = NULL, "
          "claim_until_ms = 0, attempt = 0 WHERE task_id = $1",
      {got[0].id}));
  ASSERT_OK(admin_->Exec("UPDATE " + schema_ +
                         ".runs SET n_pending = n_pending + 1, n_in_progress "
                         "= n_in_progress - 1, pending_floor = 1"));
  std::vector<wizq::Task> again;
  ASSERT_OK(ClaimOne(a.get(), &again));
  EXPECT_TRUE(again.empty()) << "claimed again before its loss was taken";
  std::vector<int64_t> lost;
  a->TakeLostClaims(&lost);
  EXPECT_EQ(lost, std::vector<int64_t>{got[0].id});
  again.clear();
  ASSERT_OK(ClaimOne(a.get(), &again));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id, got[0].id);
  lost.clear();
  a->TakeLostClaims(&lost);
  EXPECT_TRUE(lost.empty()) << "the new claim was handed back as lost";
  EXPECT_OK(a->Transact([&](StoreTxn& txn) {
    return txn.Complete(again[0].id, Completion(), nullptr);
  }));
}

// A transaction that renews its worker's claims (its last proof of life
// is a sixth of the lease old) and writes no event, whose session is lost
// with its COMMIT in flight: whether the renewal landed is unknown, so it
// is no proof of life. Counted, the local deadline would run past the
// claim's lease on the store, and a worker cut off from then on would run
// its attempt on while another worker is given the task.
TEST_F(PgStoreTest, ARenewalWhoseCommitIsOfUnknownOutcomeIsNoProofOfLife) {
  StoreOptions o = Options({MakeNew("S", "{}")});
  o.worker_lease_ms = 30000;  // the renewer's first renewal after 10 s
  auto a = OpenOk(o);
  ASSERT_NE(a, nullptr);
  std::vector<wizq::Task> got;
  ASSERT_OK(ClaimOne(a.get(), &got));
  ASSERT_EQ(got.size(), 1u);
  // Settles the run's floors: the next transaction writes no row.
  ASSERT_OK(a->Transact([&](StoreTxn&) { return Status::OK(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(8000));
  const int64_t before = a->LocalDeadlineMs();
  int tries = 0;
  // Its session ended while idle in the transaction: the COMMIT is sent
  // on a dead connection, its outcome unknown (here it did not land).
  ASSERT_OK(a->Transact([&](StoreTxn&) {
    if (tries++ > 0) return Status::OK();
    PgResult r;
    WIZQ_RETURN_IF_ERROR(admin_->Exec(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
        "application_name = 'wizq' AND state = 'idle in transaction'",
        {}, &r));
    if (r.rows() != 1) return Status::Corruption("no session to end");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return Status::OK();
  }));
  EXPECT_EQ(tries, 1) << "run again: the outcome was known after all";
  EXPECT_EQ(a->LocalDeadlineMs(), before)
      << "a renewal of unknown outcome moved the local deadline";
  PgResult r;
  ASSERT_OK(admin_->Exec(
      "SELECT claim_until_ms - floor(extract(epoch from clock_timestamp()) * "
      "1000)::bigint AS left_ms FROM " +
          schema_ + ".tasks WHERE task_id = $1",
      {got[0].id}, &r));
  const int64_t on_store = r.GetInt(0, "left_ms");
  const int64_t here = a->LocalDeadlineMs() -
                       std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count();
  EXPECT_LE(here, on_store)
      << "the local deadline ends after the claim's lease on the store";
}

}  // namespace
}  // namespace wizq::test
