// Several processes draining one run (SPEC §6.5): no task runs twice, no
// transition is lost, the audit log stays one gap-free sequence, and the
// claims of a SIGKILLed worker are put back and finished by the others.
//
// The workers are tests/helpers/queue_worker.cc, started with fork/exec.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "queue/dir/queue.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using json = nlohmann::json;

constexpr char kRunId[] = "multiprocess-run";
constexpr int kFan = 20;  // 1 root Fan -> 20 Fans -> 20 Leaves each
constexpr int kTotalTasks = 1 + kFan + kFan * kFan;
constexpr int kWorkers = 4;

// Starts the run: one root Fan task, nothing claimed. Spawned tasks get the
// root's max_attempts.
void SeedRun(const std::string& dir, int max_attempts = 3) {
  QueueOptions o;
  o.install_dir = std::filesystem::canonical(dir).string();  // as the workers
  o.run_id = kRunId;
  o.workflow_json = "{\"steps\":[]}";
  NewTask root;
  root.type = "Fan";
  root.inputs = "{\"level\":0,\"fan\":" + std::to_string(kFan) + ",\"i\":0}";
  root.origin = Origin::kInitial;
  root.max_attempts = max_attempts;
  o.initial_tasks.push_back(root);
  std::unique_ptr<Queue> q;
  OpenReport report;
  Status s = Queue::Open(o, &q, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(report.action, OpenAction::kStartedFresh);
  s = q->Close();
  ASSERT_TRUE(s.ok()) << s.ToString();
}

pid_t StartWorker(const std::string& dir,
                  const std::vector<std::string>& extra = {}) {
  const std::string bin = test::BuildDir() + "/queue_worker";
  std::vector<std::string> args = {bin, "--dir", dir, "--run-id", kRunId};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for every pid; returns false (and kills the rest) past `timeout`.
bool WaitAll(const std::vector<pid_t>& pids, std::chrono::seconds timeout,
             std::map<pid_t, int>* statuses) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::set<pid_t> running(pids.begin(), pids.end());
  while (!running.empty()) {
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      if (waitpid(*it, &status, WNOHANG) == *it) {
        (*statuses)[*it] = status;
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    if (running.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (pid_t p : running) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void ExpectAllExitedZero(const std::vector<pid_t>& pids) {
  std::map<pid_t, int> statuses;
  ASSERT_TRUE(WaitAll(pids, std::chrono::seconds(45), &statuses))
      << "workers did not finish in time";
  for (const auto& [pid, status] : statuses) {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker " << pid << " ended with status " << status;
  }
}

// The log's lines, without the free space (blank lines) a killed worker
// may have left after them; a blank line anywhere else fails to parse.
std::vector<json> ReadAudit(const std::string& dir) {
  std::vector<json> events;
  std::string text = test::ReadAll(dir + "/.wizard/audit.jsonl");
  text.resize(text.find_last_not_of('\n') + 1);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    events.push_back(json::parse(line, nullptr, /*allow_exceptions=*/false));
  }
  return events;
}

// Ledger lines "<task_id> <pid>", in the order they were written.
std::vector<std::pair<int64_t, int64_t>> ReadLedger(const std::string& dir) {
  std::vector<std::pair<int64_t, int64_t>> out;
  std::istringstream in(test::ReadAll(dir + "/ledger.txt"));
  int64_t id = 0, pid = 0;
  while (in >> id >> pid) out.emplace_back(id, pid);
  return out;
}

// Seqs run 1, 2, 3, ... across every line, whoever wrote it.
void ExpectGapFreeSeqs(const std::vector<json>& events) {
  ASSERT_FALSE(events.empty());
  for (size_t i = 0; i < events.size(); i++) {
    ASSERT_TRUE(events[i].is_object())
        << "audit line " << i + 1 << " is not a JSON object";
    ASSERT_EQ(events[i].value("seq", int64_t{-1}), static_cast<int64_t>(i + 1))
        << "audit line " << i + 1;
  }
}

// queue.json at rest: every task done, ids 1..kTotalTasks, and it covers
// the whole log.
void ExpectSnapshotAllDone(const std::string& dir, int64_t last_seq,
                           json* snapshot) {
  *snapshot =
      json::parse(test::ReadAll(dir + "/.wizard/queue.json"), nullptr, false);
  ASSERT_TRUE(snapshot->is_object()) << "queue.json does not parse";
  EXPECT_EQ((*snapshot)["seq"], last_seq) << "the snapshot is not at rest";
  const json& tasks = (*snapshot)["tasks"];
  ASSERT_EQ(tasks.size(), static_cast<size_t>(kTotalTasks));
  std::set<int64_t> ids;
  for (const json& t : tasks) {
    ids.insert(t["id"].get<int64_t>());
    EXPECT_EQ(t["state"], "done") << "task " << t["id"];
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kTotalTasks));
  EXPECT_EQ(*ids.begin(), 1);
  EXPECT_EQ(*ids.rbegin(), kTotalTasks);
}

TEST(QueueMultiprocessTest, WorkersDrainOneRunWithoutLossOrDuplicates) {
  test::ScratchDir dir;
  SeedRun(dir.path());
  // All workers join before any takes a task, so that they really share
  // the run even on a slow machine.
  const std::string go = dir.Join("go");
  std::vector<pid_t> pids;
  for (int i = 0; i < kWorkers; i++) {
    pids.push_back(StartWorker(dir.path(), {"--go-file", go}));
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (true) {
    int joined = 0;
    for (const json& e : ReadAudit(dir.path())) {
      joined += e.is_object() && e["event"] == "worker_joined";
    }
    if (joined == 1 + kWorkers) break;  // + the seeding process
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the workers did not join in time";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  test::WriteAll(go, "");
  ExpectAllExitedZero(pids);

  const std::vector<json> events = ReadAudit(dir.path());
  ExpectGapFreeSeqs(events);
  if (HasFatalFailure()) return;
  json snapshot;
  ExpectSnapshotAllDone(dir.path(), events.back()["seq"], &snapshot);

  // The ledger: each task's work was started exactly once.
  std::map<int64_t, int> runs;
  for (const auto& [id, pid] : ReadLedger(dir.path())) runs[id]++;
  EXPECT_EQ(runs.size(), static_cast<size_t>(kTotalTasks));
  for (const auto& [id, n] : runs) EXPECT_EQ(n, 1) << "task " << id;

  // Every claim has its completion, by the same worker; nothing claimed
  // twice; each worker process joined; several processes submitted tasks.
  std::map<int64_t, std::string> claimed_by, completed_by;
  std::set<int64_t> joined_pids;
  std::set<std::string> spawning_workers;
  int submitted = 0;
  for (const json& e : events) {
    const std::string name = e["event"];
    if (name == "task_claimed") {
      EXPECT_TRUE(claimed_by.emplace(e["id"], e["worker"]).second)
          << "task " << e["id"] << " claimed twice";
    } else if (name == "task_completed") {
      EXPECT_TRUE(completed_by.emplace(e["id"], e["worker"]).second)
          << "task " << e["id"] << " completed twice";
      if (!e["spawned"].empty()) spawning_workers.insert(e["worker"]);
    } else if (name == "worker_joined") {
      joined_pids.insert(e["pid"].get<int64_t>());
    } else if (name == "task_submitted") {
      submitted++;
    } else {
      EXPECT_NE(name, "task_reset");
      EXPECT_NE(name, "task_failed");
      EXPECT_NE(name, "task_deduplicated");
    }
  }
  EXPECT_EQ(submitted, kTotalTasks);
  EXPECT_EQ(claimed_by.size(), static_cast<size_t>(kTotalTasks));
  EXPECT_EQ(claimed_by, completed_by);
  for (pid_t pid : pids) EXPECT_EQ(joined_pids.count(pid), 1u) << pid;
  EXPECT_GE(spawning_workers.size(), 2u)
      << "tasks were submitted by only one process";
}

TEST(QueueMultiprocessTest, KilledWorkersClaimsAreResetAndFinished) {
  test::ScratchDir dir;
  SeedRun(dir.path());
  // The victim completes the root (spawning 20 Fans), claims 3 of them,
  // starts their work and then holds on to them.
  constexpr int kHeld = 3;
  const pid_t victim =
      StartWorker(dir.path(), {"--max-tasks", "1", "--hold-after-claim",
                               "--hold-count", std::to_string(kHeld)});
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  const std::string victim_prefix = "w" + std::to_string(victim) + "-";
  std::string victim_id;
  while (true) {
    // Claimed 1 + kHeld tasks, and started all their work.
    int claims = 0;
    for (const json& e : ReadAudit(dir.path())) {
      if (e.is_object() && e["event"] == "task_claimed" &&
          e["worker"].get<std::string>().rfind(victim_prefix, 0) == 0) {
        claims++;
        victim_id = e["worker"];
      }
    }
    int started = 0;
    for (const auto& [id, pid] : ReadLedger(dir.path()))
      started += pid == victim;
    if (claims == 1 + kHeld && started == 1 + kHeld) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the holding worker did not claim in time";
    int status = 0;
    ASSERT_EQ(waitpid(victim, &status, WNOHANG), 0)
        << "the holding worker exited early, status " << status;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  ASSERT_EQ(waitpid(victim, nullptr, 0), victim);

  std::vector<pid_t> pids;
  for (int i = 0; i < kWorkers; i++) pids.push_back(StartWorker(dir.path()));
  ExpectAllExitedZero(pids);

  const std::vector<json> events = ReadAudit(dir.path());
  ExpectGapFreeSeqs(events);
  if (HasFatalFailure()) return;
  json snapshot;
  ExpectSnapshotAllDone(dir.path(), events.back()["seq"], &snapshot);

  // Replay the claims: the victim's unfinished ones are reset (worker_lost)
  // before anyone else claims them, then claimed and completed once.
  std::set<int64_t> held;         // claimed by the victim, never completed
  std::map<int64_t, int> claims;  // per task
  std::map<int64_t, int> completions;
  std::set<int64_t> reset;
  for (const json& e : events) {
    const std::string name = e["event"];
    if (name == "task_claimed") {
      const int64_t id = e["id"];
      if (e["worker"] == victim_id) {
        held.insert(id);
      } else {
        EXPECT_EQ(held.count(id), 0u)
            << "task " << id << " claimed again before it was reset";
      }
      claims[id]++;
    } else if (name == "task_completed") {
      const int64_t id = e["id"];
      if (e["worker"] == victim_id) held.erase(id);
      completions[id]++;
    } else if (name == "task_reset") {
      const int64_t id = e["id"];
      EXPECT_EQ(e["reason"], "worker_lost");
      EXPECT_EQ(e["worker"], victim_id);
      EXPECT_EQ(held.erase(id), 1u) << "reset of task " << id;
      reset.insert(id);
    } else {
      EXPECT_NE(name, "task_failed");
    }
  }
  EXPECT_TRUE(held.empty());
  EXPECT_EQ(reset.size(), static_cast<size_t>(kHeld));
  EXPECT_EQ(completions.size(), static_cast<size_t>(kTotalTasks));
  for (const auto& [id, n] : completions) {
    EXPECT_EQ(n, 1) << "task " << id;
    EXPECT_EQ(claims[id], reset.count(id) ? 2 : 1) << "task " << id;
  }
  for (const json& t : snapshot["tasks"]) {
    const int64_t id = t["id"];
    EXPECT_EQ(t["attempts"], reset.count(id) ? 2 : 1) << "task " << id;
  }

  // The ledger: the reset tasks ran twice (first in the victim), every
  // other task exactly once.
  std::map<int64_t, std::vector<int64_t>> runs;
  for (const auto& [id, pid] : ReadLedger(dir.path())) runs[id].push_back(pid);
  EXPECT_EQ(runs.size(), static_cast<size_t>(kTotalTasks));
  for (const auto& [id, by] : runs) {
    if (reset.count(id)) {
      ASSERT_EQ(by.size(), 2u) << "task " << id;
      EXPECT_EQ(by[0], victim);
      EXPECT_NE(by[1], victim);
    } else {
      EXPECT_EQ(by.size(), 1u) << "task " << id;
    }
  }
}

// Workers are SIGKILLed at random moments (mid-claim, mid-work, mid-commit)
// and replaced until the run drains. Whatever was lost is reset and run
// again; nothing that was completed runs again; the log stays gap-free (a
// batch torn by a kill is set aside by the next writer).
TEST(QueueMultiprocessTest, RandomKillsLoseNothing) {
  test::ScratchDir dir;
  SeedRun(dir.path(), /*max_attempts=*/20);
  std::mt19937 rng(std::random_device{}());
  std::vector<pid_t> live;
  std::set<int64_t> killed;
  for (int i = 0; i < kWorkers; i++) live.push_back(StartWorker(dir.path()));
  bool drained = false;
  for (int kills = 0; kills < 25 && !drained; kills++) {
    std::this_thread::sleep_for(std::chrono::microseconds(
        std::uniform_int_distribution<int>(2000, 12000)(rng)));
    // A worker that exited by itself found the run drained.
    for (auto it = live.begin(); it != live.end();) {
      int status = 0;
      if (waitpid(*it, &status, WNOHANG) == *it) {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
        drained = true;
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    if (drained || live.empty()) break;
    const size_t victim =
        std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
    ASSERT_EQ(kill(live[victim], SIGKILL), 0);
    ASSERT_EQ(waitpid(live[victim], nullptr, 0), live[victim]);
    killed.insert(live[victim]);
    live[victim] = StartWorker(dir.path());
  }
  ExpectAllExitedZero(live);
  if (HasFatalFailure()) return;
  EXPECT_GT(killed.size(), 0u);

  const std::vector<json> events = ReadAudit(dir.path());
  ExpectGapFreeSeqs(events);
  if (HasFatalFailure()) return;
  json snapshot;
  ExpectSnapshotAllDone(dir.path(), events.back()["seq"], &snapshot);

  std::map<int64_t, int> claims, completions, resets;
  for (const json& e : events) {
    const std::string name = e["event"];
    if (name == "task_claimed") claims[e["id"]]++;
    if (name == "task_completed") completions[e["id"]]++;
    if (name == "task_reset") {
      EXPECT_EQ(e["reason"], "worker_lost");
      resets[e["id"]]++;
    }
    EXPECT_NE(name, "task_failed");
  }
  EXPECT_EQ(completions.size(), static_cast<size_t>(kTotalTasks));
  for (const auto& [id, n] : completions) {
    EXPECT_EQ(n, 1) << "task " << id;
    EXPECT_EQ(claims[id], 1 + resets[id]) << "task " << id;
  }
  for (const json& t : snapshot["tasks"]) {
    EXPECT_EQ(t["attempts"], claims[t["id"].get<int64_t>()]) << t["id"];
  }
  // Each task's work started at most once per claim; all but the last
  // start were in processes that were killed.
  std::map<int64_t, std::vector<int64_t>> runs;
  for (const auto& [id, pid] : ReadLedger(dir.path())) runs[id].push_back(pid);
  EXPECT_EQ(runs.size(), static_cast<size_t>(kTotalTasks));
  for (const auto& [id, by] : runs) {
    EXPECT_LE(static_cast<int>(by.size()), claims[id]) << "task " << id;
    for (size_t i = 0; i + 1 < by.size(); i++) {
      EXPECT_EQ(killed.count(by[i]), 1u)
          << "task " << id << " ran again after pid " << by[i]
          << ", which was not killed";
    }
  }
  int reset_total = 0;
  for (const auto& [id, n] : resets) reset_total += n;
  int torn = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(dir.path() + "/.wizard")) {
    torn += entry.path().filename().string().rfind("audit.torn-", 0) == 0;
  }
  std::printf(
      "  %zu workers killed, %d tasks reset, %d torn tails set aside, %zu "
      "audit events\n",
      killed.size(), reset_total, torn, events.size());
}

}  // namespace
}  // namespace wizq
