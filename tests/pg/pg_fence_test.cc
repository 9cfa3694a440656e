// SPEC §14 "Across machines", issue 23 item 3, through the real binary: a
// worker cut off from the store ends its attempts at its local deadline —
// enforced by its spawner, so also while wizq itself is frozen (SIGSTOP) —
// before its claim lapses and another worker is given the task; the task
// then never runs twice at once, and the frozen worker's late result, once
// it wakes, is dropped and said so.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tests/integration_util.h"
#include "tests/pg/pg_test_util.h"
#include "tests/test_util.h"

namespace wizq::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// One task. Attempt 1 starts a long sleep and records its pids; a later
// attempt ends at once. Each appends "<attempt> start|end <ns since the
// epoch>" to $LEDGER.
constexpr char kLong[] = R"({
  "entrypoint": "Long",
  "options": { "max_retries": 1 },
  "steps": [
    { "name": "Long",
      "action": { "kind": "Command", "script": "echo \"$WIZQ_ATTEMPT start $(date +%s%N)\" >> \"$LEDGER\"; if [ \"$WIZQ_ATTEMPT\" = 1 ]; then sleep 60 & echo $! > \"$LEDGER.sleep\"; echo $$ > \"$LEDGER.shell\"; wait; fi; echo \"$WIZQ_ATTEMPT end $(date +%s%N)\" >> \"$LEDGER\"; echo '[]'" },
      "next": [] }
  ]
})";

// One task that runs 7 s: three and a half leases of 2 s.
constexpr char kSlow[] = R"({
  "entrypoint": "Slow",
  "steps": [
    { "name": "Slow",
      "action": { "kind": "Command", "script": "echo \"$WIZQ_ATTEMPT start\" >> \"$LEDGER\"; sleep 7; echo '[]'" },
      "next": [] }
  ]
})";

// Root spawns 12 Work tasks; Work 0 runs 4 s (two leases of 2 s), the
// others 0.1 s. Each appends "<id> <attempt> <machine> <its wall clock, s>".
constexpr char kSkewed[] = R"({
  "entrypoint": "Root",
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "jq -nc '[range(12) | {kind: \"Work\", value: {i: .}}]'" },
      "next": ["Work"] },
    { "name": "Work",
      "action": { "kind": "Command", "script": "i=$(jq .value.i); echo \"$WIZQ_TASK_ID $WIZQ_ATTEMPT $(basename \"$WIZQ_INSTALL_DIR\") $(date +%s)\" >> \"$LEDGER\"; if [ \"$i\" = 0 ]; then sleep 4; fi; sleep 0.1; echo '[]'" },
      "next": [] }
  ]
})";

// Root spawns 18 Work tasks; the tenth is long. With one job (--jobs 1),
// Work becomes a fast step after 8 short attempts (RunLoop::
// kQueueHistory), so while the long one runs, 4 of the 8 after it are
// queued in the spawner and more claimed ahead, until the worker holds
// all it may: it then commits only when an attempt ends (and once the
// long attempt has ended, Work is slow again: nothing more is claimed
// ahead). Each short
// one appends "<id> <attempt> <machine>" to $LEDGER; the long one writes
// its shell's pid to $LEDGER.long and, on machine m1, sleeps.
constexpr char kAhead[] = R"({
  "entrypoint": "Root",
  "options": { "max_retries": 1 },
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "jq -nc '[range(18) | {kind: \"Work\", value: (if . == 9 then {i: ., long: true} else {i: .} end)}]'" },
      "next": ["Work"] },
    { "name": "Work",
      "action": { "kind": "Command", "script": "v=$(cat); case \"$v\" in *long*) echo $$ > \"$LEDGER.long\"; if [ \"$(basename \"$WIZQ_INSTALL_DIR\")\" = m1 ]; then sleep 60; fi;; *) echo \"$WIZQ_TASK_ID $WIZQ_ATTEMPT $(basename \"$WIZQ_INSTALL_DIR\")\" >> \"$LEDGER\";; esac; echo '[]'" },
      "next": [] }
  ]
})";

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

pid_t WaitForPid(const std::string& path, double seconds) {
  const auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() <
         seconds) {
    std::ifstream in(path);
    std::string line;
    if (std::getline(in, line) && !line.empty() && in.eof() == false) {
      return std::stoi(line);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

class PgFenceTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    char tmpl[] = "/tmp/wizq-pgfence-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ledger_ = root_ + "/ledger";
    wf_ = root_ + "/long.json";
    std::ofstream(wf_) << kLong;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::vector<std::string> Worker(const std::string& machine,
                                  const std::string& lease = "3") {
    fs::create_directories(root_ + "/" + machine);
    return {"wizq",     "run",   wf_,       "--dir", root_ + "/" + machine,
            "--run-id", "fence", "--lease", lease,   "--schema",
            schema_};
  }
  SpawnOptions Opts() {
    SpawnOptions o;
    o.env = {{"WIZQ_STORE", cluster_->Location()}, {"LEDGER", ledger_}};
    return o;
  }
  // The run's events, as `wizq log --json` prints them.
  WizqResult Log() {
    return WizqProcess({"wizq", "log", "--json", "--run-id", "fence",
                        "--schema", schema_},
                       Opts())
        .Wait();
  }
  std::vector<std::string> OneJob(const std::string& machine) {
    std::vector<std::string> args = Worker(machine, "2");
    args.insert(args.end(), {"--jobs", "1"});
    return args;
  }
  // kAhead's long task runs, its start is a fact of the store, and short tasks
  // after it are claimed ahead.
  void WaitForClaimsAhead() {
    ASSERT_GT(WaitForPid(ledger_ + ".long", 30), 0)
        << "the long task never started";
    int ahead = 0;
    for (int i = 0; i < 300 && ahead < 4; i++) {
      PgResult r;
      ASSERT_TRUE(admin_
                      ->Exec("SELECT count(*) AS n FROM " + schema_ +
                                 ".tasks WHERE state = 1 AND strpos(inputs, "
                                 "'long') = 0",
                             {}, &r)
                      .ok());
      ahead = static_cast<int>(r.GetInt(0, "n"));
      if (ahead < 4) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GE(ahead, 4) << "too little was claimed ahead";
    // The commit under way, if any, lands: the worker holds all it may.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_TRUE(LongStarted())
        << "the long task's start never reached the store";
  }
  // Each of kAhead's 17 short tasks ran once, on whichever machine.
  void ExpectEachShortRanOnce() {
    std::ifstream in(ledger_);
    std::map<std::string, int> runs;
    std::string all;
    for (std::string line; std::getline(in, line);) {
      std::istringstream f(line);
      std::string id;
      f >> id;
      runs[id]++;
      all += line + "\n";
    }
    EXPECT_EQ(runs.size(), 17u) << all;
    for (const auto& [id, n] : runs) {
      EXPECT_EQ(n, 1) << "task " << id << "; the ledger:\n" << all;
    }
  }
  // Whether the start of kAhead's long task is a fact of the store.
  bool LongStarted() {
    for (int i = 0; i < 300; i++) {
      PgResult r;
      if (!admin_
               ->Exec("SELECT started FROM " + schema_ +
                          ".tasks WHERE strpos(inputs, 'long') > 0",
                      {}, &r)
               .ok()) {
        return false;
      }
      if (r.rows() == 1 && r.GetBool(0, "started")) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // Milliseconds the task's claim still holds on the store's clock.
  int64_t ClaimLeftMs() {
    PgResult r;
    EXPECT_TRUE(admin_
                    ->Exec("SELECT claim_until_ms - (extract(epoch FROM "
                           "clock_timestamp()) * 1000)::bigint AS left_ms "
                           "FROM " +
                               schema_ + ".tasks WHERE task_id = 1",
                           {}, &r)
                    .ok());
    return r.rows() == 1 ? r.GetInt(0, "left_ms") : -1;
  }

  std::string root_, ledger_, wf_;
};

TEST_F(PgFenceTest, AFrozenWorkersAttemptEndsBeforeItsClaimCanBeGivenAway) {
  WizqProcess first(Worker("m1"), Opts());
  const pid_t shell = WaitForPid(ledger_ + ".shell", 20);
  const pid_t sleeper = WaitForPid(ledger_ + ".sleep", 5);
  ASSERT_GT(shell, 0) << "attempt 1 never started";
  ASSERT_GT(sleeper, 0);
  // Its start is a fact of the store soon (so that another host charges
  // it), not only with its result.
  bool started = false;
  for (int i = 0; i < 200 && !started; i++) {
    PgResult r;
    ASSERT_TRUE(admin_
                    ->Exec("SELECT started FROM " + schema_ +
                               ".tasks WHERE task_id = 1",
                           {}, &r)
                    .ok());
    started = r.rows() == 1 && r.GetBool(0, "started");
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(started) << "attempt 1's start never reached the store";
  // Frozen: wizq renews nothing from here on, and tells its spawner
  // nothing. Its liveness session stays open (a frozen process, not a
  // dead one), so another worker must wait for the claim to lapse.
  ASSERT_EQ(kill(first.pid(), SIGSTOP), 0);
  // Every session says whose it is (application_name), the worker's
  // liveness session among them.
  PgResult apps;
  ASSERT_TRUE(admin_
                  ->Exec("SELECT count(*) FILTER (WHERE application_name = "
                         "'wizq worker') AS workers, count(*) FILTER (WHERE "
                         "application_name NOT LIKE 'wizq%') AS others FROM "
                         "pg_stat_activity WHERE backend_type = 'client "
                         "backend'",
                         {}, &apps)
                  .ok());
  EXPECT_EQ(apps.GetInt(0, "workers"), 1);
  EXPECT_EQ(apps.GetInt(0, "others"), 0);
  WizqProcess second(Worker("m2"), Opts());
  const auto frozen = Clock::now();
  while (!(ProcessGone(shell) && ProcessGone(sleeper)) &&
         Clock::now() - frozen < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int64_t gone_ns = WallNs();
  const int64_t left_ms = ClaimLeftMs();
  ASSERT_TRUE(ProcessGone(shell)) << "attempt 1 still runs";
  EXPECT_TRUE(ProcessGone(sleeper));
  // It ended while the claim still held: nobody could have the task yet.
  EXPECT_GT(left_ms, 0);
  const WizqResult r2 = second.Wait();
  EXPECT_EQ(r2.code, 0) << r2.Describe();
  // Attempt 2 began after attempt 1 was gone: never twice at once.
  std::ifstream in(ledger_);
  int64_t second_start = 0;
  int starts = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string attempt, what;
    int64_t ns = 0;
    f >> attempt >> what >> ns;
    if (what == "start") starts++;
    if (attempt == "2" && what == "start") second_start = ns;
    EXPECT_FALSE(attempt == "1" && what == "end") << line;
  }
  EXPECT_EQ(starts, 2);
  EXPECT_GT(second_start, gone_ns);
  // The frozen worker wakes: its attempt's end is fenced off and said so.
  ASSERT_EQ(kill(first.pid(), SIGCONT), 0);
  const WizqResult r1 = first.Wait();
  EXPECT_TRUE(Contains(r1.err, "its result is dropped")) << r1.Describe();
  const WizqResult log = Log();
  EXPECT_EQ(CountOf(log.out, "\"event\":\"task_completed\""), 1) << log.out;
}

// The torture's finding (seed 701756270): a worker frozen past its lease
// while tasks it claimed ahead wait in its spawner. Another worker is given
// them and runs them; the frozen one, woken, must not start them: its
// renewals no longer hold those claims, so its local deadline must not
// move on until it has dropped them.
TEST_F(PgFenceTest, ClaimsLostWhileFrozenNeverStartOnceTheWorkerWakes) {
  std::ofstream(wf_, std::ios::trunc) << kAhead;
  WizqProcess first(OneJob("m1"), Opts());
  ASSERT_NO_FATAL_FAILURE(WaitForClaimsAhead());
  ASSERT_EQ(kill(first.pid(), SIGSTOP), 0);
  WizqProcess second(Worker("m2", "2"), Opts());
  const WizqResult r2 = second.Wait();
  EXPECT_EQ(r2.code, 0) << r2.Describe();
  ASSERT_EQ(kill(first.pid(), SIGCONT), 0);
  const WizqResult r1 = first.Wait();
  EXPECT_TRUE(Contains(r1.err,
                       "another worker was given it; it does not "
                       "start here"))
      << r1.Describe();
  ExpectEachShortRanOnce();
}

// A claim lost while its attempt still runs here (put back to pending, as
// a rescue does, and not given to anyone yet): once the worker has taken
// the loss (Store::TakeLostClaims), its store would let it claim the task
// again. It must not while it holds the old attempt: the run loop knows
// attempts by task id, and the two would run at once. (The review of
// 2026-11-29 found it by reading: a loss taken while a transaction ran let
// that transaction claim the task again.)
TEST_F(PgFenceTest, ALostClaimIsNotClaimedAgainWhileItsAttemptRunsHere) {
  std::vector<std::string> args = Worker("m1", "30");
  args.insert(args.end(), {"--jobs", "2"});
  WizqProcess worker(args, Opts());
  const pid_t sleeper = WaitForPid(ledger_ + ".sleep", 20);
  ASSERT_GT(sleeper, 0) << "attempt 1 never started";
  ASSERT_TRUE(admin_
                  ->Exec("UPDATE " + schema_ +
                         ".tasks SET state = 0, claimed_by = '', claim_host = "
                         "'', claim_token = NULL, claim_until_ms = 0 WHERE "
                         "task_id = 1")
                  .ok());
  ASSERT_TRUE(admin_
                  ->Exec("UPDATE " + schema_ +
                         ".runs SET n_pending = n_pending + 1, n_in_progress "
                         "= n_in_progress - 1, pending_floor = 1")
                  .ok());
  // The worker polls for work every 100 ms at most (a free slot): it
  // finds the claim lost, takes it, and polls on.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::string ledger;
  {
    std::ifstream in(ledger_);
    std::stringstream text;
    text << in.rdbuf();
    ledger = text.str();
  }
  EXPECT_FALSE(Contains(ledger, "2 start"))
      << "a second attempt started beside the first:\n"
      << ledger;
  // The first attempt ends; its result is refused, and the task runs again.
  ASSERT_EQ(kill(sleeper, SIGKILL), 0);
  const WizqResult r = worker.Wait();
  EXPECT_EQ(r.code, 0) << r.Describe();
  std::ifstream in(ledger_);
  std::vector<std::string> events;
  for (std::string line; std::getline(in, line);) {
    events.push_back(line.substr(0, line.rfind(' ')));
  }
  EXPECT_EQ(events,
            (std::vector<std::string>{"1 start", "1 end", "2 start", "2 end"}))
      << r.Describe();
}

// A worker whose whole machine is cut off (wizq, its spawner, the task's
// tree: kill -9) within its lease: the worker started again on the same
// directory finds the attempt dead and puts it back at once, charged; it
// does not wait for the 30 s lease as it must for one that may still run
// and that it cannot adopt (AnOrphanThisHostCannotAdoptWaitsForItsLease).
TEST_F(PgFenceTest, ADeadAttemptOfThisHostIsPutBackWithoutWaitingForTheLease) {
  WizqProcess first(Worker("m1", "30"), Opts());
  const pid_t shell = WaitForPid(ledger_ + ".shell", 20);
  const pid_t sleeper = WaitForPid(ledger_ + ".sleep", 5);
  ASSERT_GT(shell, 0) << "attempt 1 never started";
  ASSERT_GT(sleeper, 0);
  ASSERT_EQ(kill(first.pid(), SIGKILL), 0);
  first.Wait();
  ASSERT_EQ(kill(shell, SIGKILL), 0);
  kill(sleeper, SIGKILL);
  const auto again = Clock::now();
  WizqProcess second(Worker("m1", "30"), Opts());
  const WizqResult r = second.Wait();
  const double took =
      std::chrono::duration<double>(Clock::now() - again).count();
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_LT(took, 15) << "it waited for the lease: " << r.Describe();
  std::ifstream in(ledger_);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(Contains(text.str(), "2 end")) << text.str();
}

// A worker whose liveness session is ended (not a server restart: another
// worker may act on its death) with tasks queued in its spawner: its local
// deadline never moves on again, so they would wait for ever, and so would
// it (the machines torture found one hung). It gives them back at once
// and stops, saying why; another worker runs them.
TEST_F(PgFenceTest, AWorkerWhoseLivenessIsGoneGivesBackWhatItQueuedAndStops) {
  std::ofstream(wf_, std::ios::trunc) << kAhead;
  WizqProcess first(OneJob("m1"), Opts());
  ASSERT_NO_FATAL_FAILURE(WaitForClaimsAhead());
  PgResult r;
  ASSERT_TRUE(admin_
                  ->Exec("SELECT pg_terminate_backend(pid) FROM "
                         "pg_stat_activity WHERE application_name = 'wizq "
                         "worker'",
                         {}, &r)
                  .ok());
  ASSERT_EQ(r.rows(), 1);
  // Its long task ends at the local deadline (1.6 s at most); its result
  // claims nothing (Work is no longer a fast step), so without a rule for a
  // worker gone for good it would wait for the queued ones for ever.
  const WizqResult r1 = first.Wait(std::chrono::seconds(20));
  EXPECT_FALSE(r1.timed_out) << "the worker did not stop";
  EXPECT_NE(r1.code, 0) << r1.Describe();
  EXPECT_TRUE(Contains(r1.err, "lost its liveness session with the store"))
      << r1.Describe();
  WizqProcess second(Worker("m2", "2"), Opts());
  const WizqResult r2 = second.Wait();
  EXPECT_EQ(r2.code, 0) << r2.Describe();
  ExpectEachShortRanOnce();
}

// The other side of the lease: a worker that renews keeps a task that runs
// far longer than its lease, while another worker waits to take over
// whatever lapses; nothing is rescued, nothing runs twice.
TEST_F(PgFenceTest, ARenewedClaimOutlivesItsLease) {
  std::ofstream(wf_, std::ios::trunc) << kSlow;
  WizqProcess a(Worker("m1", "2"), Opts());
  WizqProcess b(Worker("m2", "2"), Opts());
  const WizqResult ra = a.Wait(), rb = b.Wait();
  EXPECT_EQ(ra.code, 0) << ra.Describe();
  EXPECT_EQ(rb.code, 0) << rb.Describe();
  std::ifstream in(ledger_);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(all, "1 start\n");
  const WizqResult log = Log();
  EXPECT_EQ(CountOf(log.out, "\"event\":\"task_completed\""), 1);
  EXPECT_EQ(CountOf(log.out, "\"event\":\"task_reset\""), 0) << log.out;
  EXPECT_EQ(CountOf(log.out, "\"event\":\"task_failed\""), 0) << log.out;
}

// Wall clocks of workers an hour apart (libfaketime, the monotonic clock
// left true) change nothing: leases, retries and rescue go by the
// server's clock. Each task runs once, none is put back, though one worker
// thinks it is two hours later than the other.
TEST_F(PgFenceTest, WorkersWhoseWallClocksAreHoursApartChangeNothing) {
  const std::string lib = [] {
    for (const auto& e : fs::directory_iterator("/usr/lib")) {
      const fs::path p = e.path() / "faketime/libfaketime.so.1";
      if (fs::exists(p)) return p.string();
    }
    return std::string();
  }();
  ASSERT_FALSE(lib.empty()) << "no libfaketime: make test installs faketime";
  const std::string gate =
      std::string(WIZQ_BUILD_DIR) + "/libwizq_faketime_gate.so";
  ASSERT_TRUE(fs::exists(gate)) << gate;
  std::ofstream(wf_, std::ios::trunc) << kSkewed;
  auto skewed = [&](const std::string& offset) {
    SpawnOptions o = Opts();
    o.env.push_back({"LD_PRELOAD", gate + " " + lib});
    o.env.push_back({"FAKETIME", offset});
    o.env.push_back({"DONT_FAKE_MONOTONIC", "1"});
    // An AddressSanitizer build's wizq is fine preloaded (the gate is never
    // instrumented); ASan only insists on coming first.
    o.env.push_back({"ASAN_OPTIONS", "verify_asan_link_order=0"});
    return o;
  };
  const int64_t now_s = WallNs() / 1'000'000'000;
  WizqProcess ahead(Worker("ahead", "2"), skewed("+3600"));
  WizqProcess behind(Worker("behind", "2"), skewed("-3600"));
  const WizqResult ra = ahead.Wait(), rb = behind.Wait();
  EXPECT_EQ(ra.code, 0) << ra.Describe();
  EXPECT_EQ(rb.code, 0) << rb.Describe();
  std::ifstream in(ledger_);
  std::map<std::string, int> runs;
  int skew_seen = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, attempt, machine;
    int64_t clock_s = 0;
    f >> id >> attempt >> machine >> clock_s;
    runs[id]++;
    EXPECT_EQ(attempt, "1") << line;
    // The tasks see their worker's clock: the skew is real.
    const int64_t off = clock_s - now_s;
    if (machine == "ahead" && off > 3000) skew_seen++;
    if (machine == "behind" && off < -3000) skew_seen++;
  }
  EXPECT_EQ(runs.size(), 12u);
  for (const auto& [id, n] : runs) EXPECT_EQ(n, 1) << "task " << id;
  EXPECT_EQ(skew_seen, 12);
  const WizqResult log = Log();
  EXPECT_EQ(CountOf(log.out, "\"event\":\"task_completed\""), 13);
  EXPECT_EQ(CountOf(log.out, "\"event\":\"task_reset\""), 0) << log.out;
}

}  // namespace
}  // namespace wizq::test
