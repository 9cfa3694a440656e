// In-process tests of the run loop (orchestrator/run_loop.h): RunLoop on a
// FaultInjectionEnv with a scripted FakeExecutor (tests/fake_executor.h),
// no processes. They check the guarantees of SPEC §6 where the loop keeps
// them: a task starts only once its claim, and so its parent's completion,
// is durable; a finally hook runs once its owner's whole subtree has
// settled; retries follow the step's policy; and a crash at any file
// operation, with a power loss, resumes to the same end with every durable
// completion's effect recorded once.
#include "orchestrator/run_loop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fs/fault_env.h"
#include "orchestrator/run.h"
#include "queue/dir/state.h"
#include "tests/fake_executor.h"
#include "tests/integration_util.h"
#include "tests/queue_test_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using test::ExitWith;
using test::FakeExecutor;
using test::Ledger;
using test::Respond;

// Root spawns Child 1 and 2, Child v spawns Leaf 10v and 10v+1; Root and
// Child have finally hooks: 10 tasks in all. Retries let a task whose
// worker died mid-attempt run again.
constexpr char kTreeWorkflow[] = R"({
  "entrypoint": "Root",
  "options": {"max_retries": 2},
  "steps": [
    {"name": "Root", "action": {"kind": "Command", "script": "true"},
     "next": ["Child"], "finally": {"kind": "Command", "script": "true"}},
    {"name": "Child", "action": {"kind": "Command", "script": "true"},
     "next": ["Leaf"], "finally": {"kind": "Command", "script": "true"}},
    {"name": "Leaf", "action": {"kind": "Command", "script": "true"},
     "next": []}
  ]})";
constexpr int kTreeTasks = 10;

void ScriptTree(FakeExecutor* ex) {
  ex->SetBody("Root", [](const Attempt&) {
    return Respond(
        R"([{"kind":"Child","value":1},{"kind":"Child","value":2}])");
  });
  ex->SetBody("Child", [](const Attempt& a) {
    const std::string v = a.value_json;
    return Respond(R"([{"kind":"Leaf","value":)" + v +
                   R"(0},{"kind":"Leaf","value":)" + v + "1}]");
  });
}

// One event of a run, in the order the loop's thread saw it.
struct Event {
  char kind;  // 's': started (executor), 'f': finished, durably
  int64_t id;
};

// Records what the loop reports; every task it saw finish, by id.
class Recorder : public RunObserver {
 public:
  explicit Recorder(std::vector<Event>* events) : events_(events) {}
  void OnOpened(const std::string&, const OpenReport&,
                const Progress&) override {}
  void OnTaskStarted(const Task&, int, const Progress&) override {}
  void OnTaskFinished(const Task& task, const std::string& reason,
                      const std::string&, bool, int, const Progress&) override {
    tasks[task.id] = task;
    if (reason.empty()) events_->push_back({'f', task.id});
  }
  void OnRunFinished(RunStatus status, const Progress&) override {
    run_status = status;
  }
  void OnNote(const std::string&) override {}

  std::map<int64_t, Task> tasks;
  RunStatus run_status = RunStatus::kRunning;

 private:
  std::vector<Event>* events_;
};

// A scratch install directory on a FaultInjectionEnv over an Env without
// real syncs (a power loss is simulated, so fdatasync buys nothing here).
class Scenario {
 public:
  Scenario() : env_(&nosync_) {}

  FaultInjectionEnv& env() { return env_; }
  const std::string& dir() const { return dir_.path(); }
  std::string wizard() const { return dir_.path() + "/.wizard"; }

  // Runs (or resumes) the workflow to its end or its first error.
  Status Run(const std::string& workflow, FakeExecutor* ex,
             RunObserver* observer, int* exit_code, int jobs = 2) {
    std::unique_ptr<Workflow> wf;
    Status s = Workflow::Parse(workflow, "wf.json", &wf);
    if (!s.ok()) return s;
    RunLoop::Config config;
    config.run_id = "r1";
    config.install_dir = dir_.path();
    config.input = "{}";
    config.wizq_version = "test";
    config.workflow_path = "wf.json";
    config.jobs = jobs;
    config.env = &env_;
    config.executor = ex;
    RunLoop loop(config, std::move(wf), observer);
    return loop.Run(exit_code);
  }

  // The durable state, as a reopen after a power loss would find it. ""
  // on success, else what failed.
  std::string DurableState(QueueState* state) {
    return test::ReplayFromDisk(wizard(), /*use_snapshot=*/true, state);
  }
  bool HasRun() { return nosync_.FileExists(wizard() + "/queue.json"); }

 private:
  test::ScratchDir dir_;
  test::NoSyncEnv nosync_;
  FaultInjectionEnv env_;
};

// Whether `id` is `ancestor` or hangs below it in `tasks`.
bool Below(const QueueState& s, int64_t id, int64_t ancestor) {
  for (int64_t p = id; p != 0;) {
    if (p == ancestor) return true;
    const Task* t = s.Find(p);
    if (t == nullptr) return false;
    p = t->parent_id;
  }
  return false;
}

bool Settled(const Task& t) {
  return t.state == TaskState::kDone || t.state == TaskState::kFailed;
}

TEST(RunLoopTest, RunsATreeToCompletion) {
  Scenario sc;
  Ledger ledger;
  FakeExecutor ex(&ledger);
  ScriptTree(&ex);
  std::vector<Event> events;
  Recorder rec(&events);
  int code = -1;
  ASSERT_TRUE(sc.Run(kTreeWorkflow, &ex, &rec, &code).ok());
  EXPECT_EQ(code, kExitCompleted);
  EXPECT_EQ(rec.run_status, RunStatus::kCompleted);
  EXPECT_EQ(ledger.runs().size(), static_cast<size_t>(kTreeTasks));
  QueueState state;
  ASSERT_EQ(sc.DurableState(&state), "");
  EXPECT_EQ(state.count(TaskState::kDone), kTreeTasks);
  EXPECT_EQ(state.run().status, RunStatus::kCompleted);
}

// Every attempt the executor began is a fact of the store: task_started
// (StoreTxn::MarkStarted, with the next commit), after its claim and
// before its result, once per attempt.
TEST(RunLoopTest, EveryAttemptThatBeganIsRecordedAsStarted) {
  Scenario sc;
  Ledger ledger;
  FakeExecutor ex(&ledger);
  ScriptTree(&ex);
  std::vector<Event> events;
  Recorder rec(&events);
  int code = -1;
  ASSERT_TRUE(sc.Run(kTreeWorkflow, &ex, &rec, &code).ok());
  ASSERT_EQ(code, kExitCompleted);
  const std::string log = test::ReadAll(sc.wizard() + "/audit.jsonl");
  std::map<int64_t, std::string> seen;  // per task: its events, in order
  size_t at = 0;
  while ((at = log.find("\"event\":\"task_", at)) != std::string::npos) {
    const size_t name = at + 9;
    const std::string event =
        log.substr(name, log.find('"', name) - name);  // task_...
    const size_t id_at = log.find("\"id\":", at);
    const int64_t id = std::stoll(log.substr(id_at + 5));
    if (event == "task_claimed") seen[id] += "c";
    if (event == "task_started") seen[id] += "s";
    if (event == "task_completed") seen[id] += "d";
    at = name;
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(kTreeTasks));
  for (const auto& [id, order] : seen) EXPECT_EQ(order, "csd") << "task " << id;
}

// A task starts only once its claim and its parent's completion are durable
// (SPEC §6): a crash, with a power loss, at the very moment the n-th task
// starts must find on disk that task claimed for this attempt and its
// parent done, or for a finally hook, its owner's whole subtree settled.
TEST(RunLoopTest, TaskStartsOnlyAfterItsParentsCompletionIsDurable) {
  for (int victim = 2; victim <= kTreeTasks; ++victim) {
    SCOPED_TRACE("crash as task start #" + std::to_string(victim) + " begins");
    Scenario sc;
    Ledger ledger;
    FakeExecutor ex(&ledger);
    ScriptTree(&ex);
    int starts = 0;
    Attempt crashed;
    ex.SetOnStart([&](const Attempt& a) {
      if (++starts != victim) return;
      crashed = a;
      sc.env().CrashAtOp(sc.env().op_count() + 1);  // every op from now on
    });
    std::vector<Event> events;
    Recorder rec(&events);
    int code = -1;
    Status s = sc.Run(kTreeWorkflow, &ex, &rec, &code);
    ASSERT_TRUE(sc.env().crashed()) << s.ToString();
    ASSERT_FALSE(s.ok());
    ASSERT_TRUE(sc.env().DropUnsyncedData().ok());
    QueueState st;
    ASSERT_EQ(sc.DurableState(&st), "");
    const Task* t = st.Find(crashed.task_id);
    ASSERT_NE(t, nullptr) << "task " << crashed.task_id
                          << " started but is not on disk";
    EXPECT_EQ(t->state, TaskState::kInProgress);
    EXPECT_EQ(t->attempts, crashed.number);
    if (t->origin == Origin::kFinally) {
      for (const Task& d : st.tasks()) {
        if (d.id != t->finally_for && Below(st, d.id, t->finally_for)) {
          EXPECT_TRUE(Settled(d))
              << "hook " << t->id << " began while task " << d.id
              << " of its owner's subtree was " << TaskStateName(d.state);
        }
      }
    } else if (t->parent_id != 0) {
      EXPECT_EQ(st.Find(t->parent_id)->state, TaskState::kDone)
          << "task " << t->id << " began before its parent's completion "
          << "was durable";
    }
  }
}

// A finally hook runs once its owner and everything below it (their own
// hooks included) have finished durably; so hooks fire innermost first
// and the root's hook last (SPEC §2).
TEST(RunLoopTest, FinallyHookRunsAfterItsOwnersSubtreeSettled) {
  Scenario sc;
  Ledger ledger;
  FakeExecutor ex(&ledger);
  ScriptTree(&ex);
  std::vector<Event> events;
  ex.SetOnStart([&](const Attempt& a) { events.push_back({'s', a.task_id}); });
  Recorder rec(&events);
  int code = -1;
  ASSERT_TRUE(sc.Run(kTreeWorkflow, &ex, &rec, &code, /*jobs=*/4).ok());
  ASSERT_EQ(code, kExitCompleted);
  QueueState st;
  ASSERT_EQ(sc.DurableState(&st), "");
  ASSERT_EQ(st.tasks().size(), static_cast<size_t>(kTreeTasks));
  auto index = [&](char kind, int64_t id) {
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].kind == kind && events[i].id == id) return i;
    }
    ADD_FAILURE() << kind << " of task " << id << " never seen";
    return events.size();
  };
  int hooks = 0;
  for (const Task& h : st.tasks()) {
    if (h.origin != Origin::kFinally) continue;
    ++hooks;
    const size_t start = index('s', h.id);
    for (const Task& d : st.tasks()) {
      if (Below(st, d.id, h.finally_for)) {
        EXPECT_LT(index('f', d.id), start)
            << "hook " << h.id << " of task " << h.finally_for
            << " started before task " << d.id << " finished";
      }
    }
  }
  EXPECT_EQ(hooks, 3);
  // The root's hook is the last task to start.
  const Task* root_hook = st.Find(st.Find(1)->finally_task);
  ASSERT_NE(root_hook, nullptr);
  EXPECT_EQ(events.back().kind, 'f');
  EXPECT_EQ(index('s', root_hook->id), events.size() - 2);
}

constexpr char kRetryWorkflow[] = R"({
  "entrypoint": "Root",
  "steps": [
    {"name": "Root", "action": {"kind": "Command", "script": "true"},
     "next": ["Flaky", "Broken", "Picky"]},
    {"name": "Flaky", "action": {"kind": "Command", "script": "true"},
     "next": [], "options": {"max_retries": 2}},
    {"name": "Broken", "action": {"kind": "Command", "script": "true"},
     "next": [], "options": {"max_retries": 1}},
    {"name": "Picky", "action": {"kind": "Command", "script": "true"},
     "next": [], "options": {"max_retries": 3,
                             "retry_on_invalid_response": false}}
  ]})";

// Failures are retried up to max_retries (attempts counted at each start),
// then the task fails for good and the run fails; a failure the step does
// not retry ends the task at once.
TEST(RunLoopTest, RetriesFollowTheStepsPolicy) {
  Scenario sc;
  Ledger ledger;
  FakeExecutor ex(&ledger);
  ex.SetBody("Root", [](const Attempt&) {
    return Respond(R"([{"kind":"Flaky","value":1},{"kind":"Broken","value":2},)"
                   R"({"kind":"Picky","value":3}])");
  });
  ex.SetBody("Flaky", [](const Attempt& a) {
    return a.number < 3 ? ExitWith(1) : Respond("[]");
  });
  ex.SetBody("Broken",
             [](const Attempt&) { return ExitWith(3, "disk on fire"); });
  ex.SetBody("Picky", [](const Attempt&) { return Respond("not json"); });
  std::vector<Event> events;
  Recorder rec(&events);
  int code = -1;
  ASSERT_TRUE(sc.Run(kRetryWorkflow, &ex, &rec, &code).ok());
  EXPECT_EQ(code, kExitTaskFailed);
  std::map<std::string, std::vector<int>> attempts;
  for (const test::Execution& e : ledger.runs()) {
    attempts[e.step].push_back(e.attempt);
  }
  EXPECT_EQ(attempts["Flaky"], (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(attempts["Broken"], (std::vector<int>{1, 2}));
  EXPECT_EQ(attempts["Picky"], (std::vector<int>{1}));
  QueueState st;
  ASSERT_EQ(sc.DurableState(&st), "");
  EXPECT_EQ(st.run().status, RunStatus::kFailed);
  for (const Task& t : st.tasks()) {
    SCOPED_TRACE(t.type);
    if (t.type == "Flaky" || t.type == "Root") {
      EXPECT_EQ(t.state, TaskState::kDone);
    } else if (t.type == "Broken") {
      EXPECT_EQ(t.state, TaskState::kFailed);
      EXPECT_EQ(t.attempts, 2);
      EXPECT_EQ(t.error_reason, kReasonExitCode);
      EXPECT_EQ(t.error_message, "exit code 3; stderr: disk on fire");
    } else {
      EXPECT_EQ(t.state, TaskState::kFailed);
      EXPECT_EQ(t.attempts, 1);
      EXPECT_EQ(t.error_reason, kReasonInvalidResponse);
    }
  }
}

// A crash at every file operation of a small run, with a power loss, then a
// resume by a fresh RunLoop on what survived: the run completes with the
// whole tree done, every completion the loop reported before the crash is
// still there, a task whose completion was durable before the crash never
// runs again (its effect is recorded once), and the others run exactly once
// after the resume.
TEST(RunLoopTest, CrashAtEveryEnvOperationThenResume) {
  bool finished_without_crash = false;
  int64_t ops = 0;
  for (int64_t k = 1; !finished_without_crash; ++k) {
    ops = k;
    SCOPED_TRACE("crash at op " + std::to_string(k));
    ASSERT_LT(k, 2000) << "the run never gets to its end";
    Scenario sc;
    Ledger ledger;
    std::vector<Event> events;
    int code = -1;
    {
      FakeExecutor ex(&ledger);
      ScriptTree(&ex);
      Recorder rec(&events);
      sc.env().CrashAtOp(k);
      Status s = sc.Run(kTreeWorkflow, &ex, &rec, &code);
      if (!sc.env().crashed()) {
        ASSERT_TRUE(s.ok()) << s.ToString();
        finished_without_crash = true;
        continue;
      }
    }
    ASSERT_TRUE(sc.env().DropUnsyncedData().ok());
    std::map<int64_t, bool> durably_done;  // by task id
    if (sc.HasRun()) {
      QueueState st;
      ASSERT_EQ(sc.DurableState(&st), "");
      for (const Task& t : st.tasks()) {
        durably_done[t.id] = t.state == TaskState::kDone;
      }
    }
    // What the loop reported done was durable: it survived the power loss.
    for (const Event& e : events) {
      if (e.kind == 'f') {
        EXPECT_TRUE(durably_done[e.id])
            << "task " << e.id << " was reported done, then lost";
      }
    }
    ledger.set_phase(1);
    FakeExecutor ex(&ledger);
    ScriptTree(&ex);
    Recorder rec(&events);
    Status s = sc.Run(kTreeWorkflow, &ex, &rec, &code);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(code, kExitCompleted);
    QueueState end;
    ASSERT_EQ(sc.DurableState(&end), "");
    ASSERT_EQ(end.tasks().size(), static_cast<size_t>(kTreeTasks));
    EXPECT_EQ(end.count(TaskState::kDone), kTreeTasks);
    std::map<int64_t, int> runs_before, runs_after;
    for (const test::Execution& e : ledger.runs()) {
      (e.phase == 0 ? runs_before : runs_after)[e.task_id]++;
    }
    for (const Task& t : end.tasks()) {
      SCOPED_TRACE("task " + std::to_string(t.id) + " " + t.type);
      if (durably_done[t.id]) {
        EXPECT_EQ(runs_before[t.id], 1);
        EXPECT_EQ(runs_after[t.id], 0) << "done before the crash, ran again";
      } else {
        EXPECT_LE(runs_before[t.id], 1);
        EXPECT_EQ(runs_after[t.id], 1);
      }
    }
    if (HasFailure()) return;
  }
  EXPECT_GT(ops, 20) << "the run should take more file operations";
}

// A FakeExecutor that queues like the CommandExecutor (Executor::Queues):
// it counts the attempts handed to it and not yet taken back by Wait, and
// each attempt reports `seconds` as its duration.
class QueueingFake : public FakeExecutor {
 public:
  QueueingFake(Ledger* ledger, double seconds) : FakeExecutor(ledger) {
    SetBody("Item", [seconds](const Attempt&) {
      AttemptResult r = Respond("[]");
      r.seconds = seconds;
      return r;
    });
    SetBody("Root", [](const Attempt&) {
      std::string next = "[";
      for (int i = 0; i < 40; i++) {
        next += (i ? "," : "") + std::string(R"({"kind":"Item","value":)") +
                std::to_string(i) + "}";
      }
      AttemptResult r = Respond(next + "]");
      r.seconds = 0.002;  // one short attempt: not history enough
      return r;
    });
  }
  bool Queues(const Action&) const override { return true; }
  Status Start(const Attempt& a) override {
    // Handed over beyond the slots, after how many Items had ended.
    if (static_cast<int>(running()) >= 2) queued_after.push_back(items_ended);
    return FakeExecutor::Start(a);
  }
  Status Wait(int timeout_ms, Done* done) override {
    const size_t before = done->size();
    Status s = FakeExecutor::Wait(timeout_ms, done);
    for (size_t i = before; i < done->size(); i++) {
      items_ended += (*done)[i].first > 1;
    }
    return s;
  }

  int items_ended = 0;
  std::vector<int> queued_after;
};

// The most tasks claimed and not yet finished at once, by the audit log.
int MostHeld(const std::string& dir) {
  std::set<int64_t> held;
  size_t most = 0;
  for (const test::Json& e : test::ReadAudit(dir)) {
    const std::string ev = e["event"];
    if (ev == "task_claimed") held.insert(e["id"].get<int64_t>());
    if (ev == "task_completed" || ev == "task_failed" || ev == "task_reset") {
      held.erase(e["id"].get<int64_t>());
    }
    most = std::max(most, held.size());
  }
  return static_cast<int>(most);
}

constexpr char kFanOutWorkflow[] = R"({
  "entrypoint": "Root",
  "steps": [
    {"name": "Root", "action": {"kind": "Command", "script": "true"},
     "next": ["Item"]},
    {"name": "Item", "action": {"kind": "Command", "script": "true"},
     "next": []}
  ]})";

// A step queues ahead (tasks handed to the executor, and claimed, beyond
// the slots) only once 8 of its attempts ended here with a mean under
// 50 ms: not before (Root's one fast attempt does not make Item fast), and
// never for slower tasks.
TEST(RunLoopTest, OnlyAStepWithEightShortAttemptsQueuesAhead) {
  for (const double seconds : {0.001, 0.06}) {
    SCOPED_TRACE("tasks of " + std::to_string(seconds) + " s");
    Scenario sc;
    Ledger ledger;
    QueueingFake ex(&ledger, seconds);
    std::vector<Event> events;
    Recorder rec(&events);
    int code = -1;
    ASSERT_TRUE(sc.Run(kFanOutWorkflow, &ex, &rec, &code, /*jobs=*/2).ok());
    ASSERT_EQ(code, kExitCompleted);
    EXPECT_EQ(ledger.runs().size(), 41u);
    if (seconds < 0.05) {
      ASSERT_FALSE(ex.queued_after.empty()) << "short tasks never queued";
      EXPECT_GE(
          *std::min_element(ex.queued_after.begin(), ex.queued_after.end()), 8);
      EXPECT_GT(MostHeld(sc.dir()), 2);
    } else {
      EXPECT_TRUE(ex.queued_after.empty())
          << ex.queued_after.size() << " slow tasks queued";
      EXPECT_LE(MostHeld(sc.dir()), 2);
    }
  }
}

}  // namespace
}  // namespace wizq
