// kill -9 tests of the real `wizq` binary (SPEC §5, §6.2, §6.3, §6.5).
//
// The fan-out workflow of tests/data/cli/fanout.jsonc runs while the test
// SIGKILLs wizq after random delays and starts it again, first one process
// at a time, then three processes sharing the install directory. Every task
// records its start and end in a ledger (tests/data/cli/lib.sh). At the end
// the test checks, from queue.json, audit.jsonl and the ledger, that every
// task completed exactly once, that no two attempts of a task overlapped,
// that a task ran more than once only when a worker running it was killed,
// and that the finally hooks ran once, after everything below them.
//
// Sizes: WIZQ_TORTURE_CYCLES (kills of the one-process loop, default 30),
// WIZQ_TORTURE_MP_KILLS (kills of the three-process loop, default 24),
// WIZQ_TORTURE_FANOUT (Work tasks of the root, default 40),
// WIZQ_TORTURE_SEED (the random seed; printed on failure).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Json;
using test::LedgerLine;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

class WizqCrashTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  void SetUp() override {
    const int seed = test::EnvInt("WIZQ_TORTURE_SEED", 0);
    seed_ = seed != 0 ? static_cast<uint32_t>(seed) : std::random_device{}();
    rng_.seed(seed_);
    RecordProperty("seed", static_cast<int>(seed_));
  }
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }

  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

std::string FanoutWorkflow() { return test::DataFile("fanout.jsonc"); }
std::string FanoutInput(int n) { return "{\"n\":" + std::to_string(n) + "}"; }

// The <type, inputs> of every non-hook task a fan-out run of `n` has.
std::set<std::string> ExpectedFanoutTasks(int n) {
  std::set<std::string> want;
  want.insert("Root " + Json{{"n", n}}.dump());
  for (int i = 0; i < n; i++) {
    want.insert("Work " + Json{{"i", i}}.dump());
    if (i % 3 == 0) {
      want.insert("Leaf " + Json{{"k", i % 10}}.dump());
      want.insert("Leaf " + Json{{"k", (i + 5) % 10}}.dump());
    }
  }
  for (int g = 0; g < n / 9; g++) {
    want.insert("Group " + Json{{"g", g}}.dump());
    want.insert("Leaf " + Json{{"k", 100 + g}}.dump());
    want.insert("Leaf " + Json{{"k", 200 + g}}.dump());
  }
  return want;
}

// The role tests/data/cli/fanout/task.sh writes in the ledger for a task.
std::string FanoutRole(const Json& task) {
  const std::string type = task["type"];
  const Json& in = task["inputs"];
  if (task["origin"] == "Finally") {
    std::string value;
    for (char c : in.dump()) {
      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) value += c;
    }
    return "hook-" + type + "-" + value;
  }
  if (type == "Root") return "root";
  if (type == "Work") return "work-" + std::to_string(in["i"].get<int>());
  if (type == "Group") return "group-" + std::to_string(in["g"].get<int>());
  if (type == "Leaf") return "leaf-" + std::to_string(in["k"].get<int>());
  return "?";
}

int64_t PidOfWorker(const std::string& worker,
                    const std::map<std::string, int64_t>& pids) {
  auto it = pids.find(worker);
  return it == pids.end() ? -1 : it->second;
}

// Checks a finished fan-out run of `n` in `dir`. `killed` holds the pids of
// the wizq processes the test SIGKILLed; `one_process` is true when only
// one wizq ran at a time (then tasks are put back only by a resume).
void VerifyFanoutRun(const std::string& dir, int n,
                     const std::set<int64_t>& killed, bool one_process) {
  SCOPED_TRACE("install dir " + dir);
  // --- the audit log: one gap-free sequence, one run, finished once.
  const std::vector<Json> audit = test::ReadAudit(dir);
  ASSERT_FALSE(audit.empty());
  int64_t run_started = 0, run_finished = 0;
  std::map<std::string, int64_t> worker_pids;
  for (size_t i = 0; i < audit.size(); i++) {
    ASSERT_FALSE(audit[i].is_discarded()) << "audit line " << i + 1;
    ASSERT_EQ(audit[i]["seq"], static_cast<int64_t>(i + 1));
    const std::string ev = audit[i]["event"];
    if (ev == "run_started") run_started++;
    if (ev == "run_finished") {
      run_finished++;
      EXPECT_EQ(audit[i]["status"], "completed");
    }
    if (ev == "worker_joined") {
      worker_pids[audit[i]["worker"]] = audit[i]["pid"].get<int64_t>();
    }
  }
  EXPECT_EQ(audit.back().value("commit", false), true)
      << "the log ends in an unfinished batch";
  EXPECT_EQ(run_started, 1) << "the run was started over";
  EXPECT_EQ(run_finished, 1);
  EXPECT_FALSE(fs::exists(dir + "/.wizard/archive"))
      << "a queue was archived: the run was restarted instead of resumed";

  // --- queue.json: exact at rest, every task done.
  const Json q = test::ReadQueue(dir);
  ASSERT_FALSE(q.is_discarded()) << "queue.json does not parse";
  EXPECT_EQ(q["status"], "completed");
  EXPECT_EQ(q["seq"], audit.back()["seq"])
      << "queue.json is not exact although the run is at rest";
  const Json st = test::StatusJson(dir);
  ASSERT_TRUE(st.is_object());
  EXPECT_EQ(st["status"], "completed");
  EXPECT_EQ(st["counts"]["failed"], 0);
  EXPECT_EQ(st["counts"]["pending"], 0);
  EXPECT_EQ(st["counts"]["in_progress"], 0);

  std::map<int64_t, Json> tasks;
  std::map<int64_t, std::vector<int64_t>> kids;  // by parent_id
  std::set<std::string> seen;
  std::map<int64_t, int> hooks_of;  // owner -> number of hooks
  for (const Json& t : q["tasks"]) {
    const int64_t id = t["id"];
    tasks[id] = t;
    kids[test::ParentId(t)].push_back(id);
    EXPECT_EQ(t["state"], "done") << t.dump();
    if (t["origin"] == "Finally") {
      hooks_of[t["finally_for"].get<int64_t>()]++;
      continue;
    }
    const std::string key =
        t["type"].get<std::string>() + " " + t["inputs"].dump();
    EXPECT_TRUE(seen.insert(key).second) << "submitted twice: " << key;
  }
  EXPECT_EQ(seen, ExpectedFanoutTasks(n));
  for (const auto& [id, t] : tasks) {
    const bool has_hook = t["origin"] != "Finally" &&
                          (t["type"] == "Root" || t["type"] == "Group");
    EXPECT_EQ(hooks_of[id], has_hook ? 1 : 0)
        << "finally hooks of task " << id << " " << t.dump();
  }
  EXPECT_EQ(st["tasks"].size(), tasks.size());

  // --- per task, from the log: each claim but the last was put back
  // because the worker holding it was SIGKILLed by the test; the last one
  // completed. Attempts count at claim, except that a claim put back
  // before its attempt started is refunded (`refund`): the next claim has
  // the same attempt number.
  std::map<int64_t, std::vector<const Json*>> timeline;
  std::map<int64_t, int64_t> submitted_seq, finished_seq;
  for (size_t i = 0; i < audit.size(); i++) {
    const Json& e = audit[i];
    const std::string ev = e["event"];
    if (ev == "task_submitted") submitted_seq[e["id"]] = e["seq"];
    if (ev == "task_claimed" || ev == "task_reset" || ev == "task_completed" ||
        ev == "task_failed") {
      timeline[e["id"].get<int64_t>()].push_back(&e);
    }
    if (ev == "task_completed") finished_seq[e["id"]] = e["seq"];
    if (ev == "task_reset" && one_process) {
      // A resume puts tasks back, then says so.
      size_t j = i + 1;
      while (j < audit.size() && (audit[j]["event"] == "task_reset" ||
                                  audit[j]["event"] == "task_failed")) {
        j++;
      }
      EXPECT_TRUE(j < audit.size() && audit[j]["event"] == "run_resumed")
          << "a task_reset outside a resume: " << e.dump();
    }
  }
  // Every spawned task was submitted by the completion that spawned it, and
  // every task a completion asked for was either submitted or folded into
  // an existing task with the same <type, inputs> (task_deduplicated).
  std::map<int64_t, int> spawned_by;
  int deduplicated = 0;
  for (const Json& e : audit) {
    if (e["event"] == "task_deduplicated") deduplicated++;
    if (e["event"] != "task_completed") continue;
    for (const Json& c : e["spawned"]) spawned_by[c.get<int64_t>()]++;
    const int64_t id = e["id"];
    const Json& t = tasks[id];
    size_t asked = 0;
    if (t["origin"] != "Finally") {
      if (t["type"] == "Root") asked = n + n / 9;
      if (t["type"] == "Group") asked = 2;
      if (t["type"] == "Work" && t["inputs"]["i"].get<int>() % 3 == 0) {
        asked = 2;
      }
    }
    EXPECT_EQ(e["spawned"].size() + e["deduplicated"].size(), asked)
        << e.dump();
    for (const Json& d : e["deduplicated"]) {
      EXPECT_TRUE(tasks.count(d.get<int64_t>())) << e.dump();
    }
  }
  EXPECT_GT(deduplicated, 0) << "the run never exercised dedup";
  for (const auto& [id, t] : tasks) {
    const bool spawned = t["origin"] == "Spawned";
    EXPECT_EQ(spawned_by[id], spawned ? 1 : 0)
        << "task " << id << " is in the spawned list of " << spawned_by[id]
        << " completions: " << t.dump();
    EXPECT_GT(submitted_seq[id], 0) << "task " << id << " never submitted";
  }
  std::map<int64_t, int> final_attempt;
  for (const auto& [id, t] : tasks) {
    SCOPED_TRACE("task " + std::to_string(id) + " " + t.dump());
    const std::vector<const Json*>& events = timeline[id];
    int attempts = 0;
    std::string holder;
    bool completed = false;
    for (const Json* e : events) {
      const std::string ev = (*e)["event"];
      EXPECT_FALSE(completed) << "an event after its completion: " << e->dump();
      if (ev == "task_claimed") {
        EXPECT_TRUE(holder.empty()) << "claimed while claimed: " << e->dump();
        EXPECT_EQ((*e)["attempt"], ++attempts) << e->dump();
        holder = (*e)["worker"];
      } else if (ev == "task_reset") {
        EXPECT_EQ((*e)["worker"], holder) << e->dump();
        EXPECT_EQ((*e)["attempt"], attempts) << e->dump();
        EXPECT_EQ((*e)["reason"], "worker_lost") << e->dump();
        if (e->value("refund", false)) attempts--;
        const int64_t pid = PidOfWorker(holder, worker_pids);
        EXPECT_TRUE(killed.count(pid))
            << "put back although its worker (pid " << pid
            << ") was not killed: " << e->dump();
        holder.clear();
      } else if (ev == "task_completed") {
        EXPECT_FALSE(holder.empty()) << "completed unclaimed: " << e->dump();
        EXPECT_EQ((*e)["worker"], holder) << e->dump();
        completed = true;
      } else {
        ADD_FAILURE() << "unexpected failure: " << e->dump();
      }
    }
    EXPECT_TRUE(completed);
    EXPECT_EQ(t["attempts"], attempts);
    final_attempt[id] = attempts;
  }

  // --- the ledger: no attempt ran twice, attempts never overlapped, the
  // completed attempt ran exactly once, from start to end.
  const std::vector<LedgerLine> ledger = test::ReadLedger(dir);
  std::map<int64_t, std::vector<LedgerLine>> by_task;
  for (const LedgerLine& l : ledger) {
    EXPECT_NE(l.kind, "OVERLAP")
        << "task " << l.task << " attempt " << l.attempt << " (" << l.role
        << ") started while an earlier attempt still ran";
    EXPECT_TRUE(tasks.count(l.task))
        << "ledger line of unknown task " << l.task;
    by_task[l.task].push_back(l);
  }
  // A side effect belongs to one task: a task run before its submission
  // was durable would show up under an id that a resume gave to another.
  std::map<std::string, std::set<int64_t>> ids_of_role;
  for (const LedgerLine& l : ledger) ids_of_role[l.role].insert(l.task);
  for (const auto& [role, ids] : ids_of_role) {
    EXPECT_EQ(ids.size(), 1u)
        << role << " ran as " << ids.size() << " different tasks";
  }
  int extra_runs = 0;
  std::map<int64_t, std::pair<size_t, size_t>> span;  // first, last line
  for (const auto& [id, t] : tasks) {
    SCOPED_TRACE("task " + std::to_string(id) + " " + t.dump());
    const std::vector<LedgerLine>& lines = by_task[id];
    const int last = final_attempt[id];
    std::map<int, const LedgerLine*> starts, ends;
    for (const LedgerLine& l : lines) {
      EXPECT_EQ(l.role, FanoutRole(t)) << "line " << l.index;
      EXPECT_GE(l.attempt, 1);
      EXPECT_LE(l.attempt, last) << "an attempt that was never claimed ran";
      if (l.kind == "start") {
        EXPECT_TRUE(starts.emplace(l.attempt, &l).second)
            << "attempt " << l.attempt << " started twice";
      } else if (l.kind == "end") {
        EXPECT_TRUE(ends.emplace(l.attempt, &l).second)
            << "attempt " << l.attempt << " ended twice";
        EXPECT_TRUE(starts.count(l.attempt))
            << "attempt " << l.attempt << " ended before it started";
      }
    }
    EXPECT_TRUE(starts.count(last) && ends.count(last))
        << "the completed attempt " << last << " did not run to its end";
    extra_runs += static_cast<int>(starts.size()) - 1;
    // Attempts in order, each over before the next began.
    size_t prev_last_line = 0;
    bool first = true;
    for (const auto& [attempt, start] : starts) {
      if (!first) {
        EXPECT_GT(start->index, prev_last_line)
            << "attempt " << attempt << " started before the previous "
            << "attempt's end (ledger line " << start->index << ")";
      }
      first = false;
      prev_last_line = start->index;
      for (const LedgerLine& l : lines) {
        if (l.attempt == attempt)
          prev_last_line = std::max(prev_last_line, l.index);
      }
    }
    if (!lines.empty()) span[id] = {lines.front().index, lines.back().index};
  }
  ::testing::Test::RecordProperty("extra_runs", extra_runs);

  // --- finally hooks: submitted after everything below their owner
  // completed, and run (every attempt) after it all.
  std::function<void(int64_t, std::vector<int64_t>*)> subtree =
      [&](int64_t id, std::vector<int64_t>* out) {
        for (int64_t c : kids[id]) {
          out->push_back(c);
          subtree(c, out);
        }
      };
  for (const auto& [id, t] : tasks) {
    if (t["origin"] != "Finally") continue;
    const int64_t owner = t["finally_for"];
    SCOPED_TRACE("finally hook " + std::to_string(id) + " of task " +
                 std::to_string(owner));
    std::vector<int64_t> below = {owner};
    subtree(owner, &below);
    for (int64_t d : below) {
      EXPECT_GT(submitted_seq[id], finished_seq[d])
          << "submitted before task " << d << " completed";
      EXPECT_LT(span[d].second, span[id].first)
          << "ran before task " << d << " was over (ledger lines "
          << span[d].second << ", " << span[id].first << ")";
    }
  }

  // --- nothing of any attempt is still running.
  EXPECT_EQ(test::HeldLocks(dir + "/locks"), std::vector<std::string>{})
      << "task processes outlived the run";
}

// One process at a time: wizq is SIGKILLed after 10-400ms and started
// again, in fresh install directories until the kills add up.
TEST_F(WizqCrashTest, KillNineLoopCompletesEveryTaskExactlyOnce) {
  const int cycles = test::EnvInt("WIZQ_TORTURE_CYCLES", 30);
  const int n = test::EnvInt("WIZQ_TORTURE_FANOUT", 40);
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (WIZQ_TORTURE_SEED)");
  int kills = 0, rounds = 0;
  while (kills < cycles || rounds == 0) {
    rounds++;
    ScratchDir dir;
    std::set<int64_t> killed;
    bool finished = false;
    int runs = 0;
    while (!finished && (kills < cycles || runs == 0)) {
      runs++;
      WizqProcess p({"wizq", "run", FanoutWorkflow(), "--dir", dir.path(),
                     "--input", FanoutInput(n), "--quiet"});
      const auto kill_at =
          p.start_time() + test::milliseconds(Uniform(10, 400));
      while (!p.Poll() && test::Clock::now() < kill_at) {
        std::this_thread::sleep_for(test::milliseconds(1));
      }
      p.Kill(SIGKILL);
      const WizqResult& r = p.Wait();
      if (r.exited) {
        ASSERT_EQ(r.code, 0) << r.Describe();
        finished = true;
      } else {
        ASSERT_EQ(r.signal, SIGKILL) << r.Describe();
        killed.insert(p.pid());
        kills++;
      }
    }
    if (!finished) {
      const WizqResult r =
          test::RunWizq({"wizq", "run", FanoutWorkflow(), "--dir", dir.path(),
                         "--input", FanoutInput(n)});
      ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
    }
    VerifyFanoutRun(dir.path(), n, killed, /*one_process=*/true);
    if (HasFailure()) break;
  }
  RecordProperty("kills", kills);
  RecordProperty("rounds", rounds);
  EXPECT_GE(kills, cycles);
}

// Three processes share the install directory; one of them, at random, is
// SIGKILLed every 20-300ms and started again after 0-100ms.
TEST_F(WizqCrashTest, ThreeProcessesKilledAtRandomCompleteEveryTaskOnce) {
  const int target = test::EnvInt("WIZQ_TORTURE_MP_KILLS", 24);
  const int n = test::EnvInt("WIZQ_TORTURE_FANOUT", 40);
  constexpr int kProcs = 3;
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (WIZQ_TORTURE_SEED)");
  int kills = 0, rounds = 0;
  while (kills < target || rounds == 0) {
    rounds++;
    ScratchDir dir;
    const std::vector<std::string> cmd = {
        "wizq",    "run",          FanoutWorkflow(), "--dir",  dir.path(),
        "--input", FanoutInput(n), "--quiet",        "--jobs", "3"};
    std::vector<std::unique_ptr<WizqProcess>> procs;
    for (int i = 0; i < kProcs; i++) {
      procs.push_back(std::make_unique<WizqProcess>(cmd));
    }
    std::set<int64_t> killed;
    bool finished = false;
    // Returns true once one of them has finished the run (exit 0).
    auto poll = [&]() {
      for (auto& p : procs) {
        if (p && p->Poll()) {
          const WizqResult& r = p->result();
          EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
          if (r.exited && r.code == 0) finished = true;
        }
      }
      return finished;
    };
    while (!finished && kills < target) {
      const auto until =
          test::Clock::now() + test::milliseconds(Uniform(20, 300));
      while (!poll() && test::Clock::now() < until) {
        std::this_thread::sleep_for(test::milliseconds(1));
      }
      if (finished || HasFailure()) break;
      const int victim = Uniform(0, kProcs - 1);
      procs[victim]->Kill(SIGKILL);
      const WizqResult& r = procs[victim]->Wait();
      if (r.exited) {
        ASSERT_EQ(r.code, 0) << r.Describe();
        finished = true;
        break;
      }
      killed.insert(procs[victim]->pid());
      kills++;
      std::this_thread::sleep_for(test::milliseconds(Uniform(0, 100)));
      procs[victim] = std::make_unique<WizqProcess>(cmd);
    }
    ASSERT_FALSE(HasFailure());
    // No more kills: they all finish the run.
    for (auto& p : procs) {
      const WizqResult& r = p->Wait();
      ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
    }
    VerifyFanoutRun(dir.path(), n, killed, /*one_process=*/false);
    if (HasFailure()) break;
  }
  RecordProperty("kills", kills);
  RecordProperty("rounds", rounds);
  EXPECT_GE(kills, target);
}

// A task that SIGKILLs its own wizq every time: attempts are counted at
// claim, so after max_attempts (3) it ends failed with worker_lost and the
// rest of the run completes; exit 1.
TEST_F(WizqCrashTest, PoisonTaskFailsWithWorkerLostAfterMaxAttempts) {
  ScratchDir dir;
  const std::vector<std::string> cmd = {
      "wizq", "run", test::DataFile("poison.jsonc"), "--dir", dir.path()};
  int killed_runs = 0;
  WizqResult last;
  for (int i = 0; i < 10; i++) {
    last = test::RunWizq(cmd);
    ASSERT_FALSE(last.timed_out) << last.Describe();
    if (last.exited) break;
    ASSERT_EQ(last.signal, SIGKILL) << last.Describe();
    killed_runs++;
  }
  EXPECT_EQ(killed_runs, 3) << "one crash per attempt of the poison task";
  ASSERT_TRUE(last.exited) << last.Describe();
  EXPECT_EQ(last.code, 1) << last.Describe();
  EXPECT_TRUE(test::Contains(last.err, "worker_lost")) << last.err;

  const Json st = test::StatusJson(dir.path());
  ASSERT_TRUE(st.is_object());
  EXPECT_EQ(st["status"], "failed");
  const std::vector<Json> poison = test::FindTasks(st, "Poison");
  ASSERT_EQ(poison.size(), 1u);
  EXPECT_EQ(poison[0]["state"], "failed");
  EXPECT_EQ(poison[0]["attempts"], 3);
  EXPECT_EQ(poison[0]["max_attempts"], 3);
  EXPECT_EQ(poison[0]["error"]["reason"], "worker_lost");
  for (const Json& t : st["tasks"]) {
    if (t["type"] != "Poison") {
      EXPECT_EQ(t["state"], "done") << t.dump();
    }
  }
  EXPECT_EQ(test::FindTasks(st, "Ok").size(), 6u);

  // The poison ran once per attempt; the root's hook ran after it failed
  // for good.
  const std::vector<LedgerLine> ledger = test::ReadLedger(dir.path());
  const std::vector<LedgerLine> runs =
      test::LedgerFind(ledger, "start", "poison");
  ASSERT_EQ(runs.size(), 3u);
  for (int a = 1; a <= 3; a++) EXPECT_EQ(runs[a - 1].attempt, a);
  const std::vector<LedgerLine> hook =
      test::LedgerFind(ledger, "start", "hook");
  ASSERT_EQ(hook.size(), 1u);
  EXPECT_GT(hook[0].index, runs.back().index);
  for (const LedgerLine& l : ledger) {
    EXPECT_NE(l.kind, "OVERLAP") << l.task << " " << l.role;
  }
  int lost_event = 0;
  for (const Json& e : test::ReadAudit(dir.path())) {
    if (e["event"] == "task_failed" && e["id"] == poison[0]["id"]) {
      EXPECT_EQ(e["reason"], "worker_lost");
      EXPECT_EQ(e["will_retry"], false);
      lost_event++;
    }
  }
  EXPECT_EQ(lost_event, 1);

  // A finished run is not run again: exit 1, nothing runs.
  const WizqResult again = test::RunWizq(cmd);
  EXPECT_TRUE(again.exited && again.code == 1) << again.Describe();
  EXPECT_EQ(test::ReadLedger(dir.path()).size(), ledger.size());
}

}  // namespace
}  // namespace wizq
