#include "tests/store/store_contract.h"

#include <nlohmann/json.hpp>

namespace wizq::store_test {

std::vector<Registered>& Factories() {
  static std::vector<Registered> all;
  return all;
}

Register::Register(std::string name, FactoryMaker make) {
  Factories().push_back({std::move(name), std::move(make)});
}

NewTask MakeTask(const std::string& type, const std::string& inputs,
                 int64_t parent, int max_attempts, Origin origin,
                 bool has_finally, int64_t finally_for) {
  NewTask t;
  t.type = type;
  t.inputs = inputs;
  t.parent_id = parent;
  t.max_attempts = max_attempts;
  t.origin = origin;
  t.has_finally = has_finally;
  t.finally_for = finally_for;
  return t;
}

ClaimFilter AnyOf(std::vector<std::string> steps, int max) {
  ClaimFilter f;
  for (const std::string& s : steps) {
    f.steps.insert(s);
    f.hook_steps.insert(s);
  }
  f.max = max;
  return f;
}

void StoreContractTest::SetUp() {
  factory_ = GetParam().make();
  place_ = factory_->NewPlace();
}

void StoreContractTest::TearDown() { factory_->Cleanup(); }

StoreOptions StoreContractTest::Options(std::vector<NewTask> roots) {
  StoreOptions o = place_;
  o.run_id = "r1";
  o.workflow_json = "{}";
  o.wizq_version = "test";
  o.initial_tasks = std::move(roots);
  return o;
}

std::unique_ptr<Store> StoreContractTest::OpenOk(const StoreOptions& o,
                                                 OpenReport* report) {
  std::unique_ptr<Store> s;
  Status st = Store::Open(o, &s, report);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return s;
}

int64_t StoreContractTest::Submit(Store* s, const NewTask& t, bool* dup) {
  int64_t id = 0;
  bool d = false;
  Status st =
      s->Transact([&](StoreTxn& txn) { return txn.Submit(t, &id, &d); });
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (dup) *dup = d;
  return id;
}

std::vector<Task> StoreContractTest::Claim(Store* s, const ClaimFilter& f) {
  std::vector<Task> out;
  Status st = s->Transact([&](StoreTxn& txn) {
    out.clear();
    return txn.Claim(f, &out);
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

int64_t StoreContractTest::ClaimAny(Store* s) {
  std::vector<Task> got =
      Claim(s, AnyOf({"Root", "S", "T", "C", "Step", "P", "A", "B"}));
  return got.empty() ? 0 : got[0].id;
}

std::vector<int64_t> StoreContractTest::Complete(
    Store* s, int64_t id, std::vector<NewTask> children) {
  std::vector<int64_t> ids;
  Completion c;
  c.children = std::move(children);
  Status st =
      s->Transact([&](StoreTxn& txn) { return txn.Complete(id, c, &ids); });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return ids;
}

bool StoreContractTest::Fail(Store* s, int64_t id, bool retryable,
                             int64_t delay_ms) {
  bool again = false;
  Failure f;
  f.reason = "exit_code";
  f.message = "exit 1";
  f.retryable = retryable;
  f.retry_delay_ms = delay_ms;
  Status st =
      s->Transact([&](StoreTxn& txn) { return txn.Fail(id, f, &again); });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return again;
}

Task StoreContractTest::Get(Store* s, int64_t id) {
  Task t;
  Status st = s->GetTask(id, &t);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return t;
}

RunCounts StoreContractTest::CountsOf(Store* s) {
  RunCounts c;
  Status st = s->Counts(&c);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return c;
}

std::vector<std::string> StoreContractTest::EventsNamed(
    Store* s, const std::string& name) {
  std::vector<EventRecord> events;
  Status st = s->ReadEvents(0, SIZE_MAX, &events);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<std::string> out;
  for (const EventRecord& e : events) {
    if (EventName(e.line) == name) out.push_back(e.line);
  }
  return out;
}

std::string EventName(const std::string& line) {
  return nlohmann::json::parse(line).value("event", "");
}

int64_t IntField(const std::string& line, const std::string& key) {
  nlohmann::json j = nlohmann::json::parse(line);
  return j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>()
                                                       : -1;
}

}  // namespace wizq::store_test
