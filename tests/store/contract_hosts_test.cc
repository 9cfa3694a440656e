// Contract cases: a claim records its host (SPEC §14), and a dead holder's
// claim is judged by what can be seen from where the judge runs: the
// store's facts anywhere (task_started), the local workspace's attempt
// journal only where it is shared (LocalAttempts::started), processes only
// on the claim's host (LocalAttempts::adoptable).
#include <thread>

#include "tests/store/store_contract.h"

namespace wizq::store_test {
namespace {

HostId Host(const std::string& boot, uint64_t ws) {
  HostId h;
  h.boot_id = boot;
  h.pid_ns = 4026531836;
  h.workspace_dev = 2049;
  h.workspace_ino = ws;
  return h;
}

// A run of two tasks claimed on host A by a worker that dies; task 1's
// attempt started (the store's fact), task 2's never did. The journal and
// the process table would say both ran and can be adopted.
class HostsTest : public StoreContractTest {
 protected:
  // A worker on another host takes a dead worker's claim over only once
  // its lease lapsed (SPEC §14: the lease is the authority across
  // machines): the claims' lease is short, and waited out.
  static constexpr int64_t kWorkerLeaseMs = 300;
  static void WaitOutTheLease() {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(kWorkerLeaseMs + 200));
  }

  StoreOptions TwoClaimedOn(const HostId& a) {
    StoreOptions o =
        Options({MakeTask("S", "{\"a\":1}", 0, 3, Origin::kInitial),
                 MakeTask("S", "{\"a\":2}", 0, 3, Origin::kInitial)});
    o.local.started = [](const Task&) { return true; };
    o.local.adoptable = [](const Task&) { return true; };
    o.host = a;
    o.worker_lease_ms = kWorkerLeaseMs;
    auto s = OpenOk(o);
    EXPECT_EQ(Claim(s.get(), AnyOf({"S"}, 2)).size(), 2u);
    EXPECT_TRUE(
        s->Transact([](StoreTxn& txn) { return txn.MarkStarted({1}); }).ok());
    return o;  // `s` dies holding both
  }
};

TEST_P(HostsTest, AClaimRecordsItsHost) {
  const HostId a = Host("boot-a", 7);
  StoreOptions o = TwoClaimedOn(a);
  o.host = Host("boot-b", 8);
  auto s = OpenOk(o);
  const auto claims = EventsNamed(s.get(), "task_claimed");
  ASSERT_EQ(claims.size(), 2u);
  for (const std::string& line : claims) {
    EXPECT_NE(line.find("\"host\":\"" + a.Key() + "\""), std::string::npos)
        << line;
  }
}

TEST_P(HostsTest, OnItsOwnHostALostAttemptIsAdopted) {
  StoreOptions o = TwoClaimedOn(Host("boot-a", 7));
  OpenReport report;
  auto s = OpenOk(o, &report);
  EXPECT_EQ(report.tasks_reset, 2);
  EXPECT_EQ(report.tasks_adopted, 2) << "both still run here";
  EXPECT_EQ(Get(s.get(), 1).attempts, 0) << "adopted: refunded";
}

// Another machine cannot see the processes: nothing is adopted, and only
// the store's started fact charges an attempt (the journal is not shared).
TEST_P(HostsTest, OnAnotherHostOnlyTheStoresStartedFactCounts) {
  StoreOptions o = TwoClaimedOn(Host("boot-a", 7));
  o.host = Host("boot-b", 8);
  WaitOutTheLease();
  OpenReport report;
  auto s = OpenOk(o, &report);
  EXPECT_EQ(report.tasks_reset, 2);
  EXPECT_EQ(report.tasks_adopted, 0) << "its processes are not here";
  EXPECT_EQ(Get(s.get(), 1).attempts, 1) << "started: charged";
  EXPECT_EQ(Get(s.get(), 2).attempts, 0) << "never started: refunded";
}

// A container on the same kernel that shares the workspace reads the
// journal (started) but cannot see the processes of another PID namespace.
TEST_P(HostsTest, ASharedWorkspaceTellsStartedButDoesNotAdopt) {
  HostId a = Host("boot-a", 7);
  StoreOptions o = TwoClaimedOn(a);
  o.host = a;
  o.host.pid_ns = 4026532000;  // another container
  WaitOutTheLease();
  OpenReport report;
  auto s = OpenOk(o, &report);
  EXPECT_EQ(report.tasks_adopted, 0);
  EXPECT_EQ(Get(s.get(), 1).attempts, 1);
  EXPECT_EQ(Get(s.get(), 2).attempts, 1) << "the journal says it started";
}

INSTANTIATE_TEST_SUITE_P(Stores, HostsTest, ::testing::ValuesIn(Factories()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace wizq::store_test
