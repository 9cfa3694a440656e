// Issue 23's kill -9 check on the PostgreSQL store: three `wizq run`
// workers on one run, each in a directory of its own (its own local
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

constexpr int kTasks = 60;

// Root spawns kTasks Work tasks (retried up to 10 times: power cuts charge
// attempts). Work holds an flock on locks/<id> while it runs: 0.4 s, and
// every fifth one 3 s, longer than the 2 s lease.
constexpr char kWorkflow[] = R"({
  "entrypoint": "Root",
  "options": { "max_retries": 10, "max_concurrency": 2 },
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "jq -nc '[range(60) | {kind: \"Work\", value: {i: .}}]'" },
      "next": ["Work"] },
    { "name": "Work",
      "action": { "kind": "Command", "script": "exec 9>>\"$LEDGER.locks/$WIZQ_TASK_ID\"; if ! flock -n 9; then echo \"overlap $WIZQ_TASK_ID $WIZQ_ATTEMPT\" >> \"$LEDGER\"; flock 9; fi; echo \"start $WIZQ_TASK_ID $WIZQ_ATTEMPT\" >> \"$LEDGER\"; if [ $(( $(jq .value.i) % 5 )) = 0 ]; then sleep 3; else sleep 0.4; fi; echo \"end $WIZQ_TASK_ID $WIZQ_ATTEMPT\" >> \"$LEDGER\"; echo '[]'" },
      "next": [] }
  ]
})";

// The processes whose environment says WIZQ_INSTALL_DIR=dir: the task
// trees a worker in `dir` started.
std::set<pid_t> TaskProcessesOf(const std::string& dir) {
  std::set<pid_t> out;
  const std::string want = "WIZQ_INSTALL_DIR=" + dir;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "environ");
    std::string env((std::istreambuf_iterator<char>(in)), {});
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
    std::ifstream in(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), {});
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
  std::unique_ptr<WizqProcess> Start(const std::string& machine) {
    const std::string dir = root_ + "/" + machine;
    fs::create_directories(dir);
    SpawnOptions o = Env();
    o.new_session = true;
    return std::make_unique<WizqProcess>(
        std::vector<std::string>{"wizq", "run", root_ + "/wf.json", "--dir",
                                 dir, "--run-id", "kill", "--lease", "2",
                                 "--quiet", "--schema", schema_},
        o);
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
    for (pid_t p : TaskProcessesOf(root_ + "/" + machine)) {
      kill(-getpgid(p), SIGKILL);
      kill(p, SIGKILL);
    }
  }

  std::string root_, ledger_;
};

TEST_F(PgKillTest, WorkersKilledAtRandomLoseDuplicateAndOverlapNothing) {
  const char* env = getenv("WIZQ_PG_KILL_SECONDS");
  const int seconds = env != nullptr ? atoi(env) : 20;
  const std::vector<std::string> machines = {"m1", "m2", "m3"};
  std::vector<std::unique_ptr<WizqProcess>> w;
  for (const std::string& m : machines) w.push_back(Start(m));
  std::mt19937 rng(std::random_device{}());
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  int orchestrator_kills = 0, power_cuts = 0;
  // A killed machine comes back after 0-300 ms, or (one kill in four)
  // after 2.5-3.5 s, longer than the lease: its claims lapse meanwhile.
  std::vector<Clock::time_point> back(3, Clock::time_point::max());
  bool finished = false;
  const auto until = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < until && !finished) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pick(200, 700)));
    for (size_t i = 0; i < 3; i++) {
      if (w[i] == nullptr && Clock::now() >= back[i]) w[i] = Start(machines[i]);
      if (w[i] != nullptr && w[i]->Poll() && w[i]->Wait().code == 0) {
        finished = true;  // the run is done
      }
    }
    const size_t i = static_cast<size_t>(pick(0, 2));
    if (finished || w[i] == nullptr || w[i]->Poll()) continue;
    if (pick(0, 2) == 0) {
      PowerCut(machines[i], w[i].get());
      power_cuts++;
    } else {
      w[i]->Kill(SIGKILL);
      orchestrator_kills++;
    }
    w[i]->Wait();
    w[i].reset();
    back[i] = Clock::now() + std::chrono::milliseconds(pick(0, 3) == 0
                                                           ? pick(2500, 3500)
                                                           : pick(0, 300));
  }
  for (size_t i = 0; i < 3; i++) {
    if (w[i] == nullptr) w[i] = Start(machines[i]);
  }
  // Left alone, the run ends; every worker exits 0.
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
  EXPECT_EQ(completed_attempt.size(), static_cast<size_t>(kTasks + 1));
  int lost = 0, duplicated = 0, overlapped = 0, extra_runs = 0;
  for (int64_t id = 1; id <= kTasks + 1; id++) {
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
  EXPECT_EQ(started.size(), static_cast<size_t>(kTasks));
  std::printf(
      "PG-KILL seconds=%d orchestrator_kills=%d power_cuts=%d lost=%d "
      "duplicated=%d overlapped=%d extra_runs=%d\n",
      seconds, orchestrator_kills, power_cuts, lost, duplicated, overlapped,
      extra_runs);
  EXPECT_GT(orchestrator_kills + power_cuts, 0);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
  EXPECT_EQ(overlapped, 0);
}

}  // namespace
}  // namespace wizq::test
