// Issue 23's kill -9 check on the PostgreSQL store: three `wizq run`
// workers and two `wizq agent serve` agents (Pool tasks) on one run, each
// in a directory of its own (its own local
// workspace, so to each other they are other hosts), killed -9 at random
// for a while and started again, then left to finish. Two kinds of kill:
// wizq alone (its attempts live on as orphans: the restarted worker adopts
// them, and the local deadline ends them before any other worker may take
// them over), and the whole "machine" (wizq, its spawner and every task
// tree it started: a power cut). A side-effect ledger written by the task
// bodies catches what must never happen:
//   lost        a task the run does not complete;
//   duplicated  a task completed twice, or started again after the attempt
//               that completed it;
//   overlapped  two attempts of one task executing at once (each body
//               holds an flock on a file of its task while it runs; one
//               that finds it held writes `overlap`).
// Extra runs (an attempt killed with its machine runs again) are expected
// and counted. The size is bounded for `make test` (WIZQ_PG_KILL_SECONDS,
// default 20 s of kills).
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "tests/integration_util.h"
#include "tests/pg/pg_test_util.h"

namespace wizq::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

constexpr int kTasks = 60;    // Work: Command tasks of the workers
constexpr int kReviews = 12;  // Review: Pool tasks of the agents

// Root spawns kTasks Work tasks and kReviews Review tasks (retried up to
// 10 times: power cuts charge attempts). Work holds an flock on
// locks/<id> while it runs: 0.4 s, and every fifth one 3 s, longer than
// the 2 s lease; so does agent.sh, an agent `wizq agent serve` runs for a
// Review (every fourth one 3 s, its step's lease 2 s).
constexpr char kWorkflow[] = R"({
  "entrypoint": "Root",
  "options": { "max_retries": 10, "max_concurrency": 2 },
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "jq -nc '[range(60) | {kind: \"Work\", value: {i: .}}] + [range(12) | {kind: \"Review\", value: {r: .}}]'" },
      "next": ["Work", "Review"] },
    { "name": "Review",
      "action": { "kind": "Pool", "instructions": "Review it." },
      "options": { "lease": 2 },
      "next": [] },
    { "name": "Work",
      "action": { "kind": "Command", "script": "exec 9>>\"$LEDGER.locks/$WIZQ_TASK_ID\"; if ! flock -n 9; then echo \"overlap $WIZQ_TASK_ID $WIZQ_ATTEMPT\" >> \"$LEDGER\"; flock 9; fi; echo \"start $WIZQ_TASK_ID $WIZQ_ATTEMPT\" >> \"$LEDGER\"; if [ $(( $(jq .value.i) % 5 )) = 0 ]; then sleep 3; else sleep 0.4; fi; echo \"end $WIZQ_TASK_ID $WIZQ_ATTEMPT\" >> \"$LEDGER\"; echo '[]'" },
      "next": [] }
  ]
})";

// One Review (3 s of agent.sh) under a 2 s lease.
constexpr char kOneReview[] = R"({
  "entrypoint": "Root",
  "options": { "max_retries": 2 },
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "echo '[{\"kind\": \"Review\", \"value\": {\"r\": 0}}]'" },
      "next": ["Review"] },
    { "name": "Review",
      "action": { "kind": "Pool", "instructions": "Review it." },
      "options": { "lease": 2 },
      "next": [] }
  ]
})";

// The agent `serve` runs: the same ledger as Work's.
constexpr char kAgent[] = R"(#!/bin/sh
exec 9>>"$LEDGER.locks/$WIZQ_TASK_ID"
if ! flock -n 9; then echo "overlap $WIZQ_TASK_ID $WIZQ_ATTEMPT" >> "$LEDGER"; flock 9; fi
echo "start $WIZQ_TASK_ID $WIZQ_ATTEMPT" >> "$LEDGER"
if [ $(( $(jq .task.value.r) % 4 )) = 0 ]; then sleep 3; else sleep 0.4; fi
echo "end $WIZQ_TASK_ID $WIZQ_ATTEMPT" >> "$LEDGER"
echo '[]'
)";

// The processes whose environment holds `want` (MACHINE=<name>): what a
// machine's worker or agent started.
std::set<pid_t> TaskProcessesOf(const std::string& want) {
  std::set<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string env;
    try {  // the process may end while it is read (ESRCH)
      std::ifstream in(e.path() / "environ");
      env.assign(std::istreambuf_iterator<char>(in), {});
    } catch (const std::ios_base::failure&) {
      continue;
    }
    std::istringstream vars(env);
    for (std::string v; std::getline(vars, v, '\0');) {
      if (v == want) out.insert(std::stoi(name));
    }
  }
  return out;
}

// The children of `pid` (its spawner).
std::set<pid_t> ChildrenOf(pid_t pid) {
  std::set<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat;
    try {  // the process may end while it is read (ESRCH)
      std::ifstream in(e.path() / "stat");
      stat.assign(std::istreambuf_iterator<char>(in), {});
    } catch (const std::ios_base::failure&) {
      continue;
    }
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream f(stat.substr(paren + 2));
    std::string state;
    pid_t ppid = 0;
    f >> state >> ppid;
    if (ppid == pid) out.insert(std::stoi(name));
  }
  return out;
}

// The lines of `text` that contain `part`.
std::string Grep(const std::string& text, const std::string& part) {
  std::istringstream in(text);
  std::string out;
  for (std::string l; std::getline(in, l);) {
    if (l.find(part) != std::string::npos) out += l + "\n";
  }
  return out;
}

class PgKillTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    char tmpl[] = "/tmp/wizq-pgkill-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ledger_ = root_ + "/ledger";
    fs::create_directories(ledger_ + ".locks");
    std::ofstream(root_ + "/wf.json") << kWorkflow;
    std::ofstream(root_ + "/agent.sh") << kAgent;
    fs::permissions(root_ + "/agent.sh", fs::perms::owner_all);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  SpawnOptions Env() const {
    SpawnOptions o;
    o.env = {{"WIZQ_STORE", cluster_->Location()}, {"LEDGER", ledger_}};
    return o;
  }
  // `wizq ARGS... --run-id kill --schema S` on the store, to its end.
  WizqResult Wizq(std::vector<std::string> args) {
    args.insert(args.begin(), "wizq");
    args.insert(args.end(), {"--run-id", "kill", "--schema", schema_});
    return WizqProcess(args, Env()).Wait();
  }
  // A worker (machine "m...") or an agent serving Review ("a...").
  std::unique_ptr<WizqProcess> Start(const std::string& machine,
                                     std::vector<std::string> extra = {}) {
    const std::string dir = root_ + "/" + machine;
    fs::create_directories(dir);
    SpawnOptions o = Env();
    o.env.push_back({"MACHINE", machine});
    o.new_session = true;
    std::vector<std::string> args = {"wizq",    "run", root_ + "/wf.json",
                                     "--lease", "2",   "--quiet"};
    if (machine[0] == 'a') {
      args = {"wizq", "agent", "serve", "--agent", machine};
    }
    args.insert(args.end(),
                {"--dir", dir, "--run-id", "kill", "--schema", schema_});
    args.insert(args.end(), extra.begin(), extra.end());
    if (machine[0] == 'a') args.insert(args.end(), {"--", root_ + "/agent.sh"});
    return std::make_unique<WizqProcess>(args, o);
  }
  // A power cut of `machine`: wizq, its spawner and its task trees.
  // Stopped first, so that nothing starts another tree meanwhile; the
  // shells (the spawner's children) lead their groups.
  void PowerCut(const std::string& machine, WizqProcess* w) {
    w->Kill(SIGSTOP);
    const std::set<pid_t> spawners = ChildrenOf(w->pid());
    for (pid_t p : spawners) kill(p, SIGSTOP);
    for (pid_t sp : spawners) {
      for (pid_t shell : ChildrenOf(sp)) kill(-shell, SIGKILL);
    }
    for (pid_t p : spawners) kill(p, SIGKILL);
    w->Kill(SIGKILL);
    for (pid_t p : TaskProcessesOf("MACHINE=" + machine)) {
      const pid_t group = getpgid(p);
      if (group > 1) kill(-group, SIGKILL);
      kill(p, SIGKILL);
    }
  }

  std::string root_, ledger_;
};

TEST_F(PgKillTest, WorkersKilledAtRandomLoseDuplicateAndOverlapNothing) {
  const char* env = getenv("WIZQ_PG_KILL_SECONDS");
  const int seconds = env != nullptr ? atoi(env) : 20;
  // Three workers' machines and two agents' (each `agent serve`).
  const std::vector<std::string> machines = {"m1", "m2", "m3", "a1", "a2"};
  const size_t n = machines.size();
  std::vector<std::unique_ptr<WizqProcess>> w;
  for (const std::string& m : machines) w.push_back(Start(m));
  std::mt19937 rng(std::random_device{}());
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  std::map<std::string, int> kills;  // by kind
  // A killed machine comes back after 0-300 ms, or (one kill in four)
  // after 2.5-3.5 s, longer than the lease: its claims lapse meanwhile.
  std::vector<Clock::time_point> back(n, Clock::time_point::max());
  bool finished = false;
  const auto until = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < until && !finished) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pick(200, 700)));
    for (size_t i = 0; i < n; i++) {
      if (w[i] == nullptr && Clock::now() >= back[i]) w[i] = Start(machines[i]);
      if (w[i] != nullptr && w[i]->Poll() && w[i]->Wait().code == 0) {
        finished = true;  // the run is done
      }
    }
    const size_t i = static_cast<size_t>(pick(0, static_cast<int>(n) - 1));
    if (finished || w[i] == nullptr || w[i]->Poll()) continue;
    const std::string who = machines[i][0] == 'a' ? "agent_" : "worker_";
    if (pick(0, 2) == 0) {
      PowerCut(machines[i], w[i].get());
      kills[who + "power_cuts"]++;
    } else {
      w[i]->Kill(SIGKILL);
      kills[who + "kills"]++;
    }
    w[i]->Wait();
    w[i].reset();
    back[i] = Clock::now() + std::chrono::milliseconds(pick(0, 3) == 0
                                                           ? pick(2500, 3500)
                                                           : pick(0, 300));
  }
  for (size_t i = 0; i < n; i++) {
    if (w[i] == nullptr) w[i] = Start(machines[i]);
  }
  // Left alone, the run ends; every worker and agent exits 0.
  for (auto& p : w) {
    const WizqResult& r = p->Wait();
    EXPECT_EQ(r.code, 0) << r.Describe();
  }
  const WizqResult st = Wizq({"status", "--json"});
  ASSERT_EQ(st.code, 0) << st.Describe();
  const Json status = Json::parse(st.out);
  EXPECT_EQ(status["status"], "completed") << st.out;
  // How often each task completed (its task_completed events), and the
  // attempt it completed with (status: a done task's attempts).
  const WizqResult log = Wizq({"log", "--json"});
  std::map<int64_t, int> completed_attempt, completions;
  std::istringstream lines(log.out);
  for (std::string l; std::getline(lines, l);) {
    const Json e = Json::parse(l, nullptr, false);
    if (!e.is_object() || e.value("event", "") != "task_completed") continue;
    completions[e.value("id", int64_t{0})]++;
  }
  for (const Json& t : status["tasks"]) {
    completed_attempt[t.value("id", int64_t{0})] = t.value("attempts", 0);
  }
  EXPECT_EQ(completed_attempt.size(),
            static_cast<size_t>(kTasks + kReviews + 1));
  int lost = 0, duplicated = 0, overlapped = 0, extra_runs = 0;
  for (int64_t id = 1; id <= kTasks + kReviews + 1; id++) {
    if (completions[id] == 0) lost++;
    if (completions[id] > 1) duplicated++;
  }
  std::ifstream in(ledger_);
  std::map<int64_t, std::set<int>> started;
  for (std::string l; std::getline(in, l);) {
    std::istringstream f(l);
    std::string what;
    int64_t id = 0;
    int attempt = 0;
    f >> what >> id >> attempt;
    if (what == "overlap") {
      overlapped++;
      ADD_FAILURE() << "task " << id << " attempt " << attempt
                    << " found another attempt running:\n"
                    << Grep(log.out, "\"id\":" + std::to_string(id) + ",");
    }
    if (what != "start") continue;
    if (!started[id].insert(attempt).second) extra_runs++;  // refunded, ran
    if (completed_attempt.count(id) && attempt > completed_attempt[id]) {
      duplicated++;
    }
  }
  for (const auto& [id, attempts] : started) {
    extra_runs += static_cast<int>(attempts.size()) - 1;
  }
  EXPECT_EQ(started.size(), static_cast<size_t>(kTasks + kReviews));
  std::printf(
      "PG-KILL seconds=%d worker_kills=%d worker_power_cuts=%d "
      "agent_kills=%d agent_power_cuts=%d lost=%d duplicated=%d "
      "overlapped=%d extra_runs=%d\n",
      seconds, kills["worker_kills"], kills["worker_power_cuts"],
      kills["agent_kills"], kills["agent_power_cuts"], lost, duplicated,
      overlapped, extra_runs);
  EXPECT_GT(kills["worker_kills"] + kills["worker_power_cuts"], 0);
  EXPECT_GT(kills["agent_kills"] + kills["agent_power_cuts"], 0);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
  EXPECT_EQ(overlapped, 0);
}

// An agent's machine whose `serve` dies alone (kill -9) leaves its COMMAND
// running; once the lease lapsed, an agent on another machine is given the
// task. The dead serve's spawner ends the COMMAND at the local deadline
// (last renewal + lease - lease/5), before the lease lapses: the two
// attempts never run at once (without Server::SetLocalDeadline, the first
// runs on for about a second beside the second: `overlap`).
TEST_F(PgKillTest, AnAgentWhoseServeDiedEndsBeforeAnotherMachineTakesItsTask) {
  std::ofstream(root_ + "/wf.json") << kOneReview;
  std::unique_ptr<WizqProcess> worker = Start("m1");
  std::unique_ptr<WizqProcess> first = Start("a1");
  ASSERT_TRUE(WaitFor(
      [&] { return ReadAll(ledger_).find("start 2 1") != std::string::npos; },
      std::chrono::seconds(30)))
      << ReadAll(ledger_);
  first->Kill(SIGKILL);  // serve alone: its COMMAND lives on
  first->Wait();
  std::unique_ptr<WizqProcess> second = Start("a2");
  EXPECT_EQ(second->Wait().code, 0) << second->result().Describe();
  EXPECT_EQ(worker->Wait().code, 0) << worker->result().Describe();
  const std::string ledger = ReadAll(ledger_);
  EXPECT_EQ(ledger.find("overlap"), std::string::npos) << ledger;
  EXPECT_EQ(ledger.find("end 2 1"), std::string::npos)
      << "the dead serve's COMMAND ran to its end:\n"
      << ledger;
  EXPECT_NE(ledger.find("end 2 2"), std::string::npos) << ledger;
}

// A Review, and an agent that runs 30 s on machine m1 (its worker's
// --agent), at once elsewhere.
constexpr char kOneLongReview[] = R"({
  "entrypoint": "Root",
  "options": { "max_retries": 3 },
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "echo '[{\"kind\": \"Review\", \"value\": {\"r\": 1}}]'" },
      "next": ["Review"] },
    { "name": "Review",
      "action": { "kind": "Pool", "instructions": "Review it." },
      "next": [] }
  ]
})";
constexpr char kAgentLongOnM1[] = R"(#!/bin/sh
exec 9>>"$LEDGER.locks/$WIZQ_TASK_ID"
if ! flock -n 9; then echo "overlap $WIZQ_TASK_ID $WIZQ_ATTEMPT" >> "$LEDGER"; flock 9; fi
echo "start $WIZQ_TASK_ID $WIZQ_ATTEMPT $MACHINE" >> "$LEDGER"
if [ "$MACHINE" = m1 ]; then sleep 30; fi
echo "end $WIZQ_TASK_ID $WIZQ_ATTEMPT $MACHINE" >> "$LEDGER"
echo '[]'
)";

// SPEC §14: within its lease, a claim of this host is given back early only
// to be adopted. A `wizq run --agent` (which runs Pool tasks itself) is
// killed -9 alone: its agent runs on, until the dead worker's local
// deadline. A `wizq run` without --agent on the same directory cannot
// adopt it; had it put the task back at once, an agent elsewhere would have
// been given it beside the orphan (found by a review: `overlap`). It
// waits for the lease instead, as another host's worker does.
TEST_F(PgKillTest, AnOrphanThisHostCannotAdoptWaitsForItsLease) {
  std::ofstream(root_ + "/wf.json") << kOneLongReview;
  std::ofstream(root_ + "/agent.sh", std::ios::trunc) << kAgentLongOnM1;
  const std::string m1 = root_ + "/m1";
  fs::create_directories(m1);
  auto run = [&](bool agent) {
    SpawnOptions o = Env();
    o.env.push_back({"MACHINE", "m1"});
    o.new_session = true;
    std::vector<std::string> args = {"wizq", "run", root_ + "/wf.json",
                                     "--lease", "10"};
    if (agent) args.insert(args.end(), {"--agent", root_ + "/agent.sh"});
    args.insert(args.end(),
                {"--dir", m1, "--run-id", "kill", "--schema", schema_});
    return std::make_unique<WizqProcess>(args, o);
  };
  std::unique_ptr<WizqProcess> a = run(true);
  ASSERT_TRUE(WaitFor(
      [&] { return ReadAll(ledger_).find("start 2 1") != std::string::npos; },
      std::chrono::seconds(30)))
      << ReadAll(ledger_);
  a->Kill(SIGKILL);  // wizq alone: its agent lives on
  a->Wait();
  std::unique_ptr<WizqProcess> agent = Start("a2");
  std::unique_ptr<WizqProcess> b = run(false);
  EXPECT_EQ(b->Wait().code, 0) << b->result().Describe();
  agent->Kill(SIGTERM);
  agent->Wait();
  const std::string ledger = ReadAll(ledger_);
  EXPECT_EQ(ledger.find("overlap"), std::string::npos) << ledger;
  EXPECT_EQ(ledger.find("end 2 1"), std::string::npos)
      << "the orphan ran to its end:\n"
      << ledger;
  EXPECT_NE(ledger.find("end 2 2 a2"), std::string::npos) << ledger;
}

// A Review with a 2 s timeout, retried on timeout; an agent whose first
// attempt runs 30 s and, on SIGTERM, takes 1.5 s to end.
constexpr char kTimedReview[] = R"({
  "entrypoint": "Root",
  "options": { "max_retries": 3 },
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "echo '[{\"kind\": \"Review\", \"value\": {\"r\": 1}}, {\"kind\": \"Other\", \"value\": {}}]'" },
      "next": ["Review", "Other"] },
    { "name": "Review",
      "action": { "kind": "Pool", "instructions": "Review it." },
      "options": { "lease": 20, "timeout": 2, "retry_on_timeout": true },
      "next": [] },
    { "name": "Other",
      "action": { "kind": "Pool", "instructions": "Take 4 s." },
      "options": { "lease": 20 },
      "next": [] }
  ]
})";
constexpr char kSlowToStopAgent[] = R"(#!/bin/sh
exec 9>>"$LEDGER.locks/$WIZQ_TASK_ID"
if ! flock -n 9; then echo "overlap $WIZQ_TASK_ID $WIZQ_ATTEMPT" >> "$LEDGER"; flock 9; fi
echo "start $WIZQ_TASK_ID $WIZQ_ATTEMPT" >> "$LEDGER"
if [ "$WIZQ_STEP" = Other ]; then sleep 4; echo "end other $WIZQ_ATTEMPT" >> "$LEDGER"; echo '[]'; exit 0; fi
trap 'sleep 1.5; echo "end $WIZQ_TASK_ID $WIZQ_ATTEMPT term" >> "$LEDGER"; exit 1' TERM
if [ "$WIZQ_ATTEMPT" = 1 ]; then sleep 30 & wait; fi
echo "end $WIZQ_TASK_ID $WIZQ_ATTEMPT" >> "$LEDGER"
echo '[]'
)";

// The store fails a Pool attempt at its step's timeout counted from the
// claim, and gives the retry to another agent at once. `agent serve`
// counted its COMMAND's timeout from the spawn and then gave it a grace
// after SIGTERM: the two attempts ran together for up to about 2 s (found
// by a review: `overlap`). Its spawner now ends the COMMAND at the store's
// time, SIGTERM coming a grace before.
TEST_F(PgKillTest, AnAgentsTimedOutAttemptEndsBeforeItsRetryIsGivenOut) {
  std::ofstream(root_ + "/wf.json") << kTimedReview;
  std::ofstream(root_ + "/agent.sh", std::ios::trunc) << kSlowToStopAgent;
  std::unique_ptr<WizqProcess> worker = Start("m1");
  // Both tasks at once: the timeout of one ends no other.
  std::unique_ptr<WizqProcess> first = Start("a1", {"--jobs", "2"});
  ASSERT_TRUE(WaitFor(
      [&] { return ReadAll(ledger_).find("start 2 1") != std::string::npos; },
      std::chrono::seconds(30)))
      << ReadAll(ledger_);
  std::unique_ptr<WizqProcess> second = Start("a2");
  EXPECT_EQ(worker->Wait().code, 0) << worker->result().Describe();
  first->Kill(SIGTERM);
  second->Kill(SIGTERM);
  first->Wait();
  second->Wait();
  const std::string ledger = ReadAll(ledger_);
  EXPECT_EQ(ledger.find("overlap"), std::string::npos) << ledger;
  EXPECT_NE(ledger.find("start 2 2"), std::string::npos) << ledger;
  EXPECT_NE(ledger.find("end other 1"), std::string::npos)
      << "the other task was ended with the timed-out one:\n"
      << ledger;
}

}  // namespace
}  // namespace wizq::test
