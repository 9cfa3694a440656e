// A COMMIT whose session is lost, through the real binary (issue 23's
// pitfall matrix): a `wizq run` worker on the store through
// tests/machines' fault proxy, whose transaction session has
//   - the server's reply to one COMMIT dropped and the connection closed
//     (committed, acknowledgement lost): the worker reads the transaction
//     back on a new session and goes on as if acknowledged;
//   - one COMMIT itself dropped and the connection closed (not committed):
//     the worker finds it absent and runs the transaction again;
// and a database restart (`pg_ctl stop -m immediate`, 5 s) during a run
// with a 30 s lease. Each time the run completes (exit 0) with no event
// twice and no task run a second time (the sweep's ledger).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/pg/pg_commit_util.h"
#include "tests/pg/pg_store_fixture.h"

namespace wizq::test {
namespace {

using namespace std::chrono_literals;

const bool kTcp = (SharedPgClusterTcp() = true);

// A TCP port on 127.0.0.1 nothing listens on now.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// tests/machines' fault proxy in front of the cluster, for one test.
class FaultProxy {
 public:
  ~FaultProxy() {
    if (proxy_ != nullptr) proxy_->Kill(SIGKILL);
  }
  // Starts it; returns the location through it.
  std::string Start(const PgCluster& cluster) {
    const int port = FreePort();
    EXPECT_GT(port, 0);
    proxy_ = std::make_unique<WizqProcess>(std::vector<std::string>{
        BuildDir() + "/wizq_fault_proxy", "--listen",
        "127.0.0.1:" + std::to_string(port), "--upstream",
        "127.0.0.1:" + std::to_string(cluster.port()), "--control", Socket(),
        "--log", LogPath()});
    EXPECT_TRUE(
        WaitFor([&] { return std::filesystem::exists(Socket()); }, 10s));
    return "host=127.0.0.1 port=" + std::to_string(port) +
           " user=wizq dbname=postgres sslmode=disable";
  }
  std::string LogPath() const { return dir_.path() + "/faults.log"; }
  std::vector<Json> Faults() const {
    return ParseJsonLines(ReadAll(LogPath()));
  }
  WizqResult Send(const std::string& command) {
    return WizqProcess({BuildDir() + "/wizq_fault_proxy", "--control", Socket(),
                        "--send", command})
        .Wait();
  }
  // The id of the proxied connection of a store's transactions (its
  // application_name is "wizq"; the liveness session's "wizq worker"),
  // the newest if several; 0 if none.
  int TransactionSession() {
    int id = 0;
    for (const std::string& l : SplitLines(Send("list").out)) {
      int conn = 0;
      if (Contains(l, "application_name=wizq state") &&
          std::sscanf(l.c_str(), "conn %d", &conn) == 1) {
        id = std::max(id, conn);
      }
    }
    return id;
  }
  // Arms `fault` on the transaction session; false if there is none.
  bool Arm(const std::string& fault) {
    const int conn = TransactionSession();
    return conn > 0 && Send(fault + " " + std::to_string(conn)).code == 0;
  }

 private:
  std::string Socket() const { return dir_.path() + "/proxy.sock"; }
  ScratchDir dir_;
  std::unique_ptr<WizqProcess> proxy_;
};

class PgCommitTest : public PgSweepTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kTcp);
    PgSweepTest::SetUp();
    BecomeSubreaper();
  }
  void TearDown() override { ReapStrays(); }

  // Arms `fault` on the worker's transaction session once the ledger has
  // `lines` lines (tasks run), and waits until the proxy logged it.
  void InjectAt(const std::string& dir, size_t lines,
                const std::string& fault) {
    const size_t before = proxy_.Faults().size();
    ASSERT_TRUE(WaitFor([&] { return ReadLedger(dir).size() >= lines; }, 60s));
    ASSERT_TRUE(proxy_.Arm(fault)) << proxy_.Send("list").out;
    ASSERT_TRUE(WaitFor([&] { return proxy_.Faults().size() > before; }, 30s))
        << fault << " never happened";
  }

  ScratchDir scratch_;
  FaultProxy proxy_;
};

TEST_F(PgCommitTest, ACommitLostWithItsSessionIsReadBackAndNothingRunsTwice) {
  const std::string location = proxy_.Start(*cluster_);
  const std::string dir = scratch_.path() + "/w";
  std::filesystem::create_directories(dir);
  auto w = Run(dir, location, "lost", {{"SWEEP_NAP", "0.4"}});
  // Several, so that some hit a commit of results and claims (others
  // carry only "attempt started" facts, which a second try would not
  // show).
  const std::vector<std::pair<size_t, std::string>> plan = {
      {3, "drop-commit-reply"},
      {7, "drop-commit"},
      {11, "drop-commit-reply"},
      {15, "drop-commit-reply"}};
  for (const auto& [lines, fault] : plan) InjectAt(dir, lines, fault);
  const WizqResult r = w->Wait();
  ASSERT_EQ(r.code, 0) << r.Describe();
  const std::vector<Json> faults = proxy_.Faults();
  ASSERT_EQ(faults.size(), plan.size()) << ReadAll(proxy_.LogPath());
  for (size_t i = 0; i < plan.size(); i++) {
    EXPECT_EQ(faults[i]["fault"], plan[i].second);
    if (plan[i].second == "drop-commit-reply") {
      EXPECT_EQ(faults[i]["outcome"], "COMMIT") << "it committed";
    }
  }
  VerifyRun(dir, "lost", 0);
}

TEST_F(PgCommitTest, ADatabaseRestartShorterThanTheLeaseRerunsNothing) {
  const std::string dir = scratch_.path() + "/w";
  std::filesystem::create_directories(dir);
  auto w = Run(dir, cluster_->Location(), "restart", {{"SWEEP_NAP", "1"}},
               {"--lease", "30"});
  ASSERT_TRUE(WaitFor([&] { return ReadLedger(dir).size() >= 4; }, 60s));
  ASSERT_OK(cluster_->Stop(PgCluster::StopMode::kImmediate));
  std::this_thread::sleep_for(5s);
  ASSERT_OK(cluster_->Start());
  const WizqResult r = w->Wait();
  ASSERT_EQ(r.code, 0) << r.Describe();
  VerifyRun(dir, "restart", 0);
  const WizqResult log = Wizq({"log", "--json"}, "restart");
  EXPECT_EQ(CountOf(log.out, "\"event\":\"task_reset\""), 0) << log.out;
}

// The same at the store: a transaction that completes task 1 and claims
// task 2, on a session through the proxy with `fault` armed. It succeeds;
// `tries` counts how often its function ran.
class PgCommitStoreTest : public PgStoreTest {
 protected:
  void CompleteAndClaimUnder(const std::string& fault, int* tries) {
    StoreOptions o =
        Options({MakeNew("S", "{\"i\":1}"), MakeNew("S", "{\"i\":2}")});
    o.location = proxy_.Start(*cluster_);
    auto a = OpenOk(o);
    ASSERT_NE(a, nullptr);
    ClaimFilter f;
    f.steps = {"S"};
    f.max = 1;
    std::vector<wizq::Task> got;
    ASSERT_OK(ClaimStarted(a.get(), f, &got));
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(proxy_.Arm(fault)) << proxy_.Send("list").out;
    std::vector<wizq::Task> next;
    ASSERT_OK(a->Transact([&](StoreTxn& txn) {
      ++*tries;
      next.clear();
      WIZQ_RETURN_IF_ERROR(txn.Complete(1, Completion(), nullptr));
      WIZQ_RETURN_IF_ERROR(txn.Claim(f, &next));
      return next.empty() ? Status::OK() : txn.MarkStarted({next[0].id});
    }));
    ASSERT_EQ(next.size(), 1u);
    ASSERT_EQ(proxy_.Faults().size(), 1u) << "the fault never happened";
    // The claim is this worker's as if the COMMIT had been acknowledged.
    ASSERT_OK(a->Transact([&](StoreTxn& txn) {
      return txn.Complete(next[0].id, Completion(), nullptr);
    }));
    const std::vector<EventRecord> events = Events(a.get());
    EXPECT_EQ(CountKind(events, "task_claimed"), 2);
    EXPECT_EQ(CountKind(events, "task_completed"), 2);
    for (int64_t id : {1, 2}) {
      wizq::Task t;
      ASSERT_OK(a->GetTask(id, &t));
      EXPECT_EQ(t.state, TaskState::kDone);
      EXPECT_EQ(t.attempts, 1);
    }
    for (size_t i = 0; i < events.size(); i++) {
      EXPECT_EQ(events[i].seq, static_cast<int64_t>(i + 1));
    }
  }
  FaultProxy proxy_;
};

TEST_F(PgCommitStoreTest, ACommitWhoseReplyIsLostIsReadBackNotRunAgain) {
  int tries = 0;
  CompleteAndClaimUnder("drop-commit-reply", &tries);
  EXPECT_EQ(tries, 1) << "it had committed: running it again would have "
                         "claimed a second task";
  EXPECT_EQ(proxy_.Faults()[0]["outcome"], "COMMIT");
}

TEST_F(PgCommitStoreTest, ACommitThatNeverLandedIsRunAgain) {
  int tries = 0;
  CompleteAndClaimUnder("drop-commit", &tries);
  EXPECT_EQ(tries, 2) << "it had not committed: it runs once more";
}

// A COMMIT that is still running on the server when its worker gives up
// waiting for the answer (a synchronous standby that does not answer, a
// slow WAL flush) and closes the session: the backend goes on and commits
// a moment later. The worker must wait for that outcome, not read the
// transaction back at once, find it absent and run it again (it then
// claimed a second task, and the first stayed claimed by the worker but
// outside its claims: nobody ran it, and the run never finished).
TEST_F(PgCommitStoreTest, ACommitStillRunningWhenTheSessionIsGivenUpIsAwaited) {
  StoreOptions o =
      Options({MakeNew("S", "{\"i\":1}"), MakeNew("S", "{\"i\":2}")});
  o.worker_lease_ms = 10000;  // an answer is awaited 8 s, the outcome 10 s
  auto a = OpenOk(o);
  ASSERT_NE(a, nullptr);
  // Every commit waits for a standby that does not exist, for 9 s.
  CommitsHeld held(admin_.get());
  ASSERT_OK(held.Hold());
  std::thread release([&] {
    std::this_thread::sleep_for(9s);
    EXPECT_OK(held.Release());
  });
  int tries = 0;
  std::vector<wizq::Task> got;
  ClaimFilter f;
  f.steps = {"S"};
  f.max = 1;
  const Status s = a->Transact([&](StoreTxn& txn) {
    tries++;
    got.clear();
    return txn.Claim(f, &got);
  });
  release.join();
  ASSERT_OK(s);
  EXPECT_EQ(tries, 1) << "run again although it had committed";
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, 1);
  EXPECT_EQ(CountKind(Events(a.get()), "task_claimed"), 1);
  wizq::Task second;
  ASSERT_OK(a->GetTask(2, &second));
  EXPECT_EQ(second.state, TaskState::kPending);
  // The claim is the worker's own: its result is taken.
  EXPECT_OK(a->Transact(
      [&](StoreTxn& txn) { return txn.Complete(1, Completion(), nullptr); }));
}

}  // namespace
}  // namespace wizq::test
