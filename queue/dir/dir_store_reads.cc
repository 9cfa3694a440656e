// DirStore: the contract's reads of a QueueState, the log's events, the
// runs of `.wizard/` (the current one and `archive/`) and the read-only
// store of an archived run.
#include <algorithm>

#include "audit/log.h"
#include "fs/env.h"
#include "queue/dir/dir_store.h"
#include "queue/dir/state.h"

namespace wizq {
namespace {

const char kLogFile[] = "audit.jsonl";

bool Matches(const Task& t, const TaskFilter& f) {
  if (t.id <= f.after_id) return false;
  if (!f.states.empty() &&
      std::find(f.states.begin(), f.states.end(), t.state) == f.states.end()) {
    return false;
  }
  if (!f.steps.empty() &&
      std::find(f.steps.begin(), f.steps.end(), t.type) == f.steps.end()) {
    return false;
  }
  const bool hook = t.origin == Origin::kFinally;
  if ((f.hooks == TaskFilter::Hooks::kOnly && !hook) ||
      (f.hooks == TaskFilter::Hooks::kNone && hook)) {
    return false;
  }
  if (f.parent_id >= 0 && t.parent_id != f.parent_id) return false;
  if (!f.error_reason.empty() && t.error_reason != f.error_reason) return false;
  if (f.unanswered && !t.answer.empty()) return false;
  if (f.leased &&
      (t.state != TaskState::kInProgress || t.lease_token.empty())) {
    return false;
  }
  return true;
}

// The pending or in_progress index when the filter asks for that state
// alone: scans of live work then cost what is live, not the whole run.
const std::set<int64_t>* IndexFor(const QueueState& s, const TaskFilter& f) {
  if (f.states.size() != 1) return nullptr;
  if (f.states[0] == TaskState::kPending) return &s.pending();
  if (f.states[0] == TaskState::kInProgress) return &s.in_progress();
  return nullptr;
}

// The state of the run whose files are in `run_dir` (an archived run in
// `.wizard/archive/<name>`), replayed from its log without a lock and
// without writing. NotFound if there is no log.
Status LoadStateFromLog(Env* env, const std::string& run_dir,
                        std::unique_ptr<QueueState>* state) {
  const std::string path = run_dir + "/" + kLogFile;
  std::string data;
  Status s = env->ReadFile(path, &data);
  if (s.IsNotFound()) {
    return Status::NotFound("no audit log in " + run_dir + " (" + path +
                            " does not exist)");
  }
  WIZQ_RETURN_IF_ERROR(s);
  LogParseResult parsed;
  WIZQ_RETURN_IF_ERROR(ParseLog(path, data, 0, 1, &parsed));
  auto st = std::make_unique<QueueState>();
  for (const LogRecord& rec : parsed.records) {
    Status a = st->ApplyEvent(rec.line);
    if (!a.ok()) {
      return a.Annotate(path + " at byte offset " + std::to_string(rec.offset));
    }
  }
  *state = std::move(st);
  return Status::OK();
}

// Stands for an archived run: its state as replayed from its log.
class FrozenDirStore : public Store {
 public:
  FrozenDirStore(Env* env, std::string run_dir,
                 std::unique_ptr<QueueState> state)
      : env_(env), dir_(std::move(run_dir)), state_(std::move(state)) {}

  Status Close() override { return Status::OK(); }
  Status Transact(const std::function<Status(StoreTxn&)>&) override {
    return Status::NotSupported(dir_ + " is an archived run: read-only");
  }
  Status GetRun(RunInfo* run) override {
    *run = state_->run();
    return Status::OK();
  }
  Status GetTask(int64_t id, Task* task) override {
    return GetTaskFrom(*state_, id, task);
  }
  Status ListTasks(const TaskFilter& f, std::vector<Task>* out) override {
    ListTasksFrom(*state_, f, out);
    return Status::OK();
  }
  Status Counts(RunCounts* counts) override {
    CountsFrom(*state_, counts);
    return Status::OK();
  }
  Status ReadEvents(int64_t after_seq, size_t max,
                    std::vector<EventRecord>* events) override {
    int64_t seq = 0;
    uint64_t offset = 0;
    return ReadDirEvents(env_, dir_, after_seq, max, 0, events, &seq, &offset);
  }
  Status WaitForChange(int64_t after_seq, int, int64_t* seq) override {
    *seq = std::max(after_seq, state_->last_seq());
    return Status::OK();
  }
  Status Workers(std::vector<WorkerInfo>*) override { return Status::OK(); }
  Status ListRuns(std::vector<RunRef>* runs) override {
    runs->clear();
    return Status::OK();
  }
  Status OpenRun(const RunRef& run, std::unique_ptr<Store>*) override {
    return Status::NotFound("no run " + run.key + " inside " + dir_);
  }
  Status WhileCurrent(const std::function<Status()>&) override {
    return Status::Conflict(dir_ + " is an archived run, not the current one");
  }
  const std::string& worker_id() const override { return none_; }
  std::string DisplayLocation() const override { return dir_; }

 private:
  Env* const env_;
  const std::string dir_;
  std::unique_ptr<QueueState> state_;
  const std::string none_;
};

RunRef RefOf(const RunInfo& r, std::string key, bool archived) {
  RunRef ref;
  ref.run_id = r.run_id;
  ref.key = std::move(key);
  ref.archived = archived;
  ref.status = r.status;
  ref.started_ms = r.started_ms;
  ref.finished_ms = r.finished_ms;
  return ref;
}

}  // namespace

std::unique_ptr<Store> NewFrozenDirStore(Env* env, std::string run_dir,
                                         std::unique_ptr<QueueState> state) {
  return std::make_unique<FrozenDirStore>(env, std::move(run_dir),
                                          std::move(state));
}

Status GetTaskFrom(const QueueState& s, int64_t id, Task* task) {
  const Task* t = s.Find(id);
  if (t == nullptr) {
    return Status::NotFound("the run has no task " + std::to_string(id));
  }
  *task = *t;
  return Status::OK();
}

// Pending tasks of some steps, from each step's pending index, merged in
// id order: what a claimer looks for costs the steps' pending tasks, not
// every pending one.
static void ListPendingOfSteps(const QueueState& s, const TaskFilter& f,
                               std::vector<Task>* out) {
  std::vector<int64_t> ids;
  for (const std::string& step : f.steps) {
    auto it = s.pending_by_type().find(step);
    if (it == s.pending_by_type().end()) continue;
    int64_t n = 0;
    for (auto j = it->second.upper_bound(f.after_id);
         j != it->second.end() && (f.limit == 0 || n < f.limit); ++j) {
      if (!Matches(*s.Find(*j), f)) continue;
      ids.push_back(*j);
      n++;
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (f.limit > 0 && static_cast<int64_t>(ids.size()) > f.limit) {
    ids.resize(static_cast<size_t>(f.limit));
  }
  for (int64_t id : ids) out->push_back(*s.Find(id));
}

void ListTasksFrom(const QueueState& s, const TaskFilter& f,
                   std::vector<Task>* out) {
  out->clear();
  if (f.states.size() == 1 && f.states[0] == TaskState::kPending &&
      !f.steps.empty()) {
    ListPendingOfSteps(s, f, out);
    return;
  }
  auto add = [&](const Task& t) {
    if (!Matches(t, f)) return true;
    out->push_back(t);
    return f.limit == 0 || static_cast<int64_t>(out->size()) < f.limit;
  };
  if (const std::set<int64_t>* index = IndexFor(s, f)) {
    for (auto it = index->upper_bound(f.after_id); it != index->end(); ++it) {
      if (!add(*s.Find(*it))) return;
    }
    return;
  }
  const std::vector<Task>& tasks = s.tasks();
  const size_t first = static_cast<size_t>(
      std::clamp<int64_t>(f.after_id, 0, static_cast<int64_t>(tasks.size())));
  for (size_t i = first; i < tasks.size(); i++) {
    if (!add(tasks[i])) return;
  }
}

void CountsFrom(const QueueState& s, RunCounts* c) {
  *c = RunCounts();
  for (TaskState st : {TaskState::kPending, TaskState::kInProgress,
                       TaskState::kDone, TaskState::kFailed}) {
    c->by_state[static_cast<int>(st)] = s.count(st);
  }
  c->total = s.total();
  c->reused = s.reused();
  c->imported = s.imported();
  c->adopted = s.run().adopted;
  for (int64_t id : s.in_progress()) {
    if (!s.Find(id)->lease_token.empty()) c->leased++;
  }
  c->hooks_due = static_cast<int64_t>(s.hooks_due().size());
  c->all_settled = s.AllSettled();
}

Status ReadDirEvents(Env* env, const std::string& run_dir, int64_t after_seq,
                     size_t max, uint64_t offset,
                     std::vector<EventRecord>* events, int64_t* end_seq,
                     uint64_t* end_offset) {
  events->clear();
  *end_seq = 0;
  *end_offset = offset;
  const std::string path = run_dir + "/" + kLogFile;
  std::string data;
  Status s = env->ReadFileFrom(path, offset, &data);
  if (s.IsNotFound()) {
    return Status::NotFound("no audit log in " + run_dir);
  }
  WIZQ_RETURN_IF_ERROR(s);
  LogParseResult parsed;
  WIZQ_RETURN_IF_ERROR(ParseLog(path, data, offset, 0, &parsed));
  for (const LogRecord& rec : parsed.records) {
    if (rec.seq <= after_seq) continue;
    if (events->size() >= max) break;
    events->push_back(EventRecord{rec.seq, std::string(rec.line)});
    *end_seq = rec.seq;
    *end_offset = rec.offset + rec.line.size() + 1;
  }
  return Status::OK();
}

Status ListDirRuns(Env* env, const std::string& wizard_dir,
                   const RunInfo* current, std::vector<RunRef>* runs) {
  runs->clear();
  if (current != nullptr) runs->push_back(RefOf(*current, "", false));
  const std::string archive = wizard_dir + "/archive";
  std::vector<std::string> names;
  Status s = env->ListDir(archive, &names);
  if (s.IsNotFound()) return Status::OK();
  WIZQ_RETURN_IF_ERROR(s);
  std::sort(names.rbegin(), names.rend());  // named by UTC time: newest first
  for (const std::string& name : names) {
    std::unique_ptr<QueueState> st;
    const std::string path = archive + "/" + name;
    if (!LoadStateFromLog(env, path, &st).ok()) {
      RunRef ref;  // unreadable: listed by its name, opening it says why
      ref.key = path;
      ref.archived = true;
      runs->push_back(std::move(ref));
      continue;
    }
    runs->push_back(RefOf(st->run(), path, true));
  }
  return Status::OK();
}

Status OpenDirRun(Env* env, const std::string& wizard_dir, const RunRef& run,
                  std::unique_ptr<Store>* out) {
  const std::string archive = wizard_dir + "/archive/";
  if (run.key.rfind(archive, 0) != 0 ||
      run.key.find("/..") != std::string::npos) {
    return Status::InvalidArgument(run.key + " is not an archived run of " +
                                   wizard_dir);
  }
  std::unique_ptr<QueueState> st;
  WIZQ_RETURN_IF_ERROR(LoadStateFromLog(env, run.key, &st));
  *out = NewFrozenDirStore(env, run.key, std::move(st));
  return Status::OK();
}

}  // namespace wizq
