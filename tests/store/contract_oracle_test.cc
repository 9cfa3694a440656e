// Contract oracle: after a random sequence of operations, the run's events
// (ReadEvents), folded by a reference fold written here from docs/FORMAT.md
// and sharing no code with any store, equal what the store's queries say
// (ListTasks, Counts), field by field. A store that keeps rows and events
// apart (PostgreSQL) could let them drift; this catches it. Two mutant
// stores (one drops an event, one miscounts an attempt) must fail it.
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "tests/store/store_contract.h"

namespace wizq::store_test {
namespace {

using Json = nlohmann::json;

// A task as the events say it is.
struct Folded {
  std::string type;
  Json inputs;
  int64_t parent_id = 0;
  std::string origin;
  std::string state = "pending";
  int64_t attempts = 0, max_attempts = 0;
  std::string error_reason;
  bool leased = false, started = false;
  std::string claim_host;  // the last claim's
  Json answer;             // null: none
};

struct Fold {
  std::map<int64_t, Folded> tasks;
  std::string run_status = "running";
  int64_t last_seq = 0;
  std::vector<std::string> problems;
};

void Apply(const Json& e, Fold* f) {
  const std::string name = e.at("event");
  const int64_t seq = e.at("seq");
  if (seq != f->last_seq + 1) {
    f->problems.push_back("seq " + std::to_string(seq) + " after " +
                          std::to_string(f->last_seq));
  }
  f->last_seq = seq;
  if (name == "task_submitted") {
    Folded t;
    t.type = e.at("type");
    t.inputs = e.at("inputs");
    t.parent_id =
        e.at("parent_id").is_null() ? 0 : e.at("parent_id").get<int64_t>();
    t.origin = e.at("origin");
    t.max_attempts = e.at("max_attempts");
    f->tasks[e.at("id")] = t;
    return;
  }
  if (name == "run_finished") f->run_status = e.at("status");
  if (name == "run_paused") f->run_status = "paused";
  if (name == "run_resumed" && f->run_status == "paused") {
    f->run_status = "running";
  }
  if (!e.contains("id") || !e.at("id").is_number_integer()) return;
  Folded& t = f->tasks[e.at("id")];
  if (name == "task_claimed") {
    t.state = "in_progress";
    t.attempts = e.at("attempt");
    t.leased = e.contains("lease");
    t.started = false;
    t.claim_host = e.value("host", "");
  } else if (name == "task_started") {
    t.started = true;
  } else if (name == "task_completed") {
    t.state = "done";
    t.leased = false;
  } else if (name == "task_failed") {
    t.state = e.at("will_retry").get<bool>() ? "pending" : "failed";
    t.error_reason = e.at("reason");
    t.leased = false;
  } else if (name == "task_reset") {
    t.state = "pending";
    t.error_reason = e.at("reason");
    if (e.value("refund", false) && t.attempts > 0) t.attempts--;
    t.leased = false;
  } else if (name == "task_retried") {
    t.state = "pending";
    t.max_attempts = e.at("max_attempts");
    f->run_status = "running";
  } else if (name == "task_answered") {
    t.answer = e.at("answer");
  }
}

const char* StateName(TaskState s) {
  switch (s) {
    case TaskState::kPending:
      return "pending";
    case TaskState::kInProgress:
      return "in_progress";
    case TaskState::kDone:
      return "done";
    case TaskState::kFailed:
      return "failed";
  }
  return "?";
}

const char* OriginText(Origin o) {
  switch (o) {
    case Origin::kInitial:
      return "Initial";
    case Origin::kSpawned:
      return "Spawned";
    case Origin::kRetry:
      return "Retry";
    case Origin::kFinally:
      return "Finally";
  }
  return "?";
}

// Every difference between the folded events and the store's queries.
std::vector<std::string> Check(Store* s) {
  Fold f;
  std::vector<EventRecord> events;
  Status st = s->ReadEvents(0, SIZE_MAX, &events);
  if (!st.ok()) return {"ReadEvents: " + st.ToString()};
  for (const EventRecord& r : events) Apply(Json::parse(r.line), &f);
  std::vector<Task> tasks;
  st = s->ListTasks(TaskFilter(), &tasks);
  if (!st.ok()) return {"ListTasks: " + st.ToString()};
  std::vector<std::string> p = f.problems;
  auto differ = [&](int64_t id, const std::string& field, const auto& want,
                    const auto& got) {
    if (want == got) return;
    std::ostringstream m;
    m << "task " << id << " " << field << ": events say " << want
      << ", the store says " << got;
    p.push_back(m.str());
  };
  if (tasks.size() != f.tasks.size()) {
    p.push_back("the events hold " + std::to_string(f.tasks.size()) +
                " tasks, ListTasks " + std::to_string(tasks.size()));
  }
  int64_t by_state[4] = {0, 0, 0, 0}, leased = 0;
  for (const Task& t : tasks) {
    auto it = f.tasks.find(t.id);
    if (it == f.tasks.end()) {
      p.push_back("task " + std::to_string(t.id) + " has no task_submitted");
      continue;
    }
    const Folded& w = it->second;
    differ(t.id, "type", w.type, t.type);
    differ(t.id, "inputs", w.inputs.dump(), Json::parse(t.inputs).dump());
    differ(t.id, "parent_id", w.parent_id, t.parent_id);
    differ(t.id, "origin", w.origin, std::string(OriginText(t.origin)));
    differ(t.id, "state", w.state, std::string(StateName(t.state)));
    differ(t.id, "attempts", w.attempts, static_cast<int64_t>(t.attempts));
    differ(t.id, "max_attempts", w.max_attempts,
           static_cast<int64_t>(t.max_attempts));
    differ(t.id, "error_reason", w.error_reason, t.error_reason);
    differ(t.id, "leased", w.leased,
           t.state == TaskState::kInProgress && !t.lease_token.empty());
    differ(t.id, "started", w.started && w.state == "in_progress",
           t.started && t.state == TaskState::kInProgress);
    differ(t.id, "claim_host", w.claim_host, t.claim_host);
    differ(
        t.id, "answer", w.answer.dump(),
        t.answer.empty() ? std::string("null") : Json::parse(t.answer).dump());
    by_state[static_cast<int>(t.state)]++;
    if (t.state == TaskState::kInProgress && !t.lease_token.empty()) leased++;
  }
  RunCounts c;
  st = s->Counts(&c);
  if (!st.ok()) return {"Counts: " + st.ToString()};
  int64_t folded[4] = {0, 0, 0, 0};
  for (const auto& [id, t] : f.tasks) {
    for (TaskState s2 : {TaskState::kPending, TaskState::kInProgress,
                         TaskState::kDone, TaskState::kFailed}) {
      if (t.state == StateName(s2)) folded[static_cast<int>(s2)]++;
    }
  }
  for (int i = 0; i < 4; i++) {
    differ(0, std::string("count ") + StateName(static_cast<TaskState>(i)),
           folded[i], c.by_state[i]);
  }
  differ(0, "total", static_cast<int64_t>(f.tasks.size()), c.total);
  differ(0, "leased", leased, c.leased);
  RunInfo run;
  st = s->GetRun(&run);
  if (!st.ok()) return {"GetRun: " + st.ToString()};
  differ(0, "run status", f.run_status, std::string(RunStatusName(run.status)));
  return p;
}

// Random operations on one run through the contract; two workers, leases.
void RandomRun(Store* a, Store* b, uint32_t seed, int ops) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const std::vector<std::string> steps = {"A", "B", "C"};
  std::map<int64_t, std::string> leases;  // held by a lease: its token
  for (int i = 0; i < ops; i++) {
    Store* s = pick(2) ? a : b;
    Status st = s->Transact([&](StoreTxn& txn) -> Status {
      const int op = pick(9);
      std::vector<Task> held;
      TaskFilter f;
      f.states = {TaskState::kInProgress};
      WIZQ_RETURN_IF_ERROR(txn.ListTasks(f, &held));
      if (op <= 1) {  // claim, by a worker or a short lease
        ClaimFilter c = AnyOf(steps, 1 + pick(3));
        if (pick(3) == 0) {
          c.lease = true;
          c.lease_ms = 40 + pick(80);
        }
        std::vector<Task> got;
        WIZQ_RETURN_IF_ERROR(txn.Claim(c, &got));
        for (const Task& t : got) {
          if (c.lease) leases[t.id] = t.lease_token;
        }
        return Status::OK();
      }
      if (held.empty()) return Status::OK();
      const Task& t = held[pick(static_cast<int>(held.size()))];
      if (!t.lease_token.empty()) {
        auto it = leases.find(t.id);
        if (it == leases.end() || !txn.ActAs(t.id, it->second).ok()) {
          return Status::OK();
        }
      }
      Status r;
      if (op <= 4) {  // complete, with children (some equal: dedup)
        Completion c;
        for (int k = pick(3); k > 0; k--) {
          c.children.push_back(MakeTask(
              steps[pick(3)], "{\"v\":" + std::to_string(pick(12)) + "}", t.id,
              1 + pick(3)));
        }
        std::vector<int64_t> ids;
        r = txn.Complete(t.id, c, &ids);
      } else if (op <= 6) {
        Failure fl;
        fl.reason = "exit_code";
        fl.retryable = pick(2) == 0;
        bool again = false;
        r = txn.Fail(t.id, fl, &again);
      } else if (op == 7) {
        r = txn.MarkStarted({t.id});
      } else {
        r = t.lease_token.empty() ? txn.Release(t.id, "interrupted")
                                  : Status::OK();
      }
      if (r.IsConflict()) return Status::OK();  // held by the other worker
      return r;
    });
    ASSERT_TRUE(st.ok()) << st.ToString();
    if (pick(10) == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  RunStatus status;
  ASSERT_TRUE(a->Transact([&](StoreTxn& txn) {
                 return txn.FinishIfSettled(1, &status);
               }).ok());
}

TEST_P(StoreContractTest, EventsFoldedIndependentlyEqualTheQueries) {
  std::vector<NewTask> roots;
  for (int i = 0; i < 6; i++) {
    roots.push_back(MakeTask(i % 2 ? "A" : "B",
                             "{\"r\":" + std::to_string(i) + "}", 0, 2,
                             Origin::kInitial));
  }
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    StoreOptions o = Options(roots);
    o.run_id = "oracle" + std::to_string(seed);
    o.mode = OpenMode::kFresh;
    auto a = OpenOk(o);
    o.mode = OpenMode::kRun;
    auto b = OpenOk(o);
    RandomRun(a.get(), b.get(), seed, 150);
    const std::vector<std::string> p = Check(a.get());
    EXPECT_TRUE(p.empty()) << p.front();
    ASSERT_TRUE(b->Close().ok());
    ASSERT_TRUE(a->Close().ok());
  }
}

// --- mutants: a Store that lies in one way each -------------------------

class Mutant : public Store {
 public:
  enum class Lie { kDropAnEvent, kMiscountAnAttempt };
  Mutant(Store* real, Lie lie) : r_(real), lie_(lie) {}
  Status Close() override { return r_->Close(); }
  Status Transact(const std::function<Status(StoreTxn&)>& fn) override {
    return r_->Transact(fn);
  }
  Status GetRun(RunInfo* run) override { return r_->GetRun(run); }
  Status GetTask(int64_t id, Task* t) override { return r_->GetTask(id, t); }
  Status ListTasks(const TaskFilter& f, std::vector<Task>* out) override {
    WIZQ_RETURN_IF_ERROR(r_->ListTasks(f, out));
    if (lie_ == Lie::kMiscountAnAttempt) {
      for (Task& t : *out) {
        if (t.attempts > 0) {
          t.attempts++;
          break;
        }
      }
    }
    return Status::OK();
  }
  Status Counts(RunCounts* c) override { return r_->Counts(c); }
  Status ReadEvents(int64_t after, size_t max,
                    std::vector<EventRecord>* out) override {
    WIZQ_RETURN_IF_ERROR(r_->ReadEvents(after, max, out));
    if (lie_ == Lie::kDropAnEvent) {
      for (size_t i = 0; i < out->size(); i++) {
        if (EventName((*out)[i].line) == "task_failed") {
          out->erase(out->begin() + static_cast<long>(i));
          break;
        }
      }
    }
    return Status::OK();
  }
  Status WaitForChange(int64_t after, int ms, int64_t* seq) override {
    return r_->WaitForChange(after, ms, seq);
  }
  Status Workers(std::vector<WorkerInfo>* w) override { return r_->Workers(w); }
  Status ListRuns(std::vector<RunRef>* runs) override {
    return r_->ListRuns(runs);
  }
  Status OpenRun(const RunRef& run, std::unique_ptr<Store>* out) override {
    return r_->OpenRun(run, out);
  }
  Status WhileCurrent(const std::function<Status()>& fn) override {
    return r_->WhileCurrent(fn);
  }
  const std::string& worker_id() const override { return r_->worker_id(); }
  std::string DisplayLocation() const override { return r_->DisplayLocation(); }

 private:
  Store* r_;
  Lie lie_;
};

TEST_P(StoreContractTest, TheOracleCatchesAStoreThatDropsOrMiscounts) {
  auto s = OpenOk(Options({MakeTask("A", "{}", 0, 3, Origin::kInitial)}));
  ASSERT_EQ(ClaimAny(s.get()), 1);
  ASSERT_TRUE(Fail(s.get(), 1, true));
  ASSERT_EQ(ClaimAny(s.get()), 1);
  ASSERT_TRUE(Check(s.get()).empty());
  Mutant drops(s.get(), Mutant::Lie::kDropAnEvent);
  EXPECT_FALSE(Check(&drops).empty()) << "a dropped event went unseen";
  Mutant miscounts(s.get(), Mutant::Lie::kMiscountAnAttempt);
  EXPECT_FALSE(Check(&miscounts).empty()) << "a wrong attempt went unseen";
}

}  // namespace
}  // namespace wizq::store_test
