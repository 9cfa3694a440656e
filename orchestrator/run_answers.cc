// --answer arguments, checked against the run before it is opened for
// writing (SPEC §10: a bad answer is exit 2 with nothing recorded).
#include <algorithm>

#include "orchestrator/run_loop.h"
#include "queue/import.h"

namespace wizq {
namespace {

// The tasks a fresh run that starts as an import begins with, before the
// run exists: what --answer is checked against then. GetTask and ListTasks
// (by state, step, hooks, parent and paging) on the import's data; none of
// the tasks is answered, leased or claimed yet.
class ImportedTasks : public StoreReads {
 public:
  explicit ImportedTasks(const RunImport& import) {
    for (const ImportedTask& it : import.tasks) {
      Task t;
      t.id = static_cast<int64_t>(tasks_.size()) + 1;
      t.type = it.task.type;
      t.inputs = it.task.inputs;
      t.state = it.state;
      t.parent_id = it.task.parent_id;
      t.origin = it.task.origin;
      t.finally_for = it.task.finally_for;
      tasks_.push_back(std::move(t));
    }
  }

  Status GetRun(RunInfo* run) override {
    *run = RunInfo();
    return Status::OK();
  }
  Status GetTask(int64_t id, Task* task) override {
    if (id < 1 || id > static_cast<int64_t>(tasks_.size())) {
      return Status::NotFound("the import has no task " + std::to_string(id));
    }
    *task = tasks_[id - 1];
    return Status::OK();
  }
  Status ListTasks(const TaskFilter& f, std::vector<Task>* out) override {
    out->clear();
    for (const Task& t : tasks_) {
      if (f.limit > 0 && static_cast<int64_t>(out->size()) >= f.limit) break;
      if (Matches(t, f)) out->push_back(t);
    }
    return Status::OK();
  }
  Status Counts(RunCounts* counts) override {
    *counts = RunCounts();
    for (const Task& t : tasks_) counts->by_state[static_cast<int>(t.state)]++;
    counts->total = static_cast<int64_t>(tasks_.size());
    return Status::OK();
  }

 private:
  static bool Matches(const Task& t, const TaskFilter& f) {
    auto has = [](const auto& v, const auto& x) {
      return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
    };
    const bool hook = t.origin == Origin::kFinally;
    return t.id > f.after_id && has(f.states, t.state) &&
           has(f.steps, t.type) &&
           !(f.hooks == TaskFilter::Hooks::kOnly && !hook) &&
           !(f.hooks == TaskFilter::Hooks::kNone && hook) &&
           (f.parent_id < 0 || t.parent_id == f.parent_id) &&
           f.error_reason.empty() && !f.leased;
  }

  std::vector<Task> tasks_;
};

}  // namespace

Status CheckFlagAnswers(const RunLoop::Config& config, const Workflow& workflow,
                        const std::vector<std::string>& args,
                        std::vector<FlagAnswer>* out) {
  std::unique_ptr<Store> store;
  StoreReads* run = nullptr;
  std::unique_ptr<Workflow> frozen;
  const Workflow* use = &workflow;
  if (!config.fresh) {
    StoreOptions so;
    so.env = config.env;
    so.install_dir = config.install_dir;
    so.location = config.location;
    so.schema = config.schema;
    so.run_id = config.run_id;
    so.mode = OpenMode::kReadOnly;
    OpenReport report;
    Status s = Store::Open(so, &store, &report);
    if (!s.ok() && !s.IsNotFound()) return s;  // NotFound: no run yet
    RunInfo info;
    if (s.ok()) WIZQ_RETURN_IF_ERROR(store->GetRun(&info));
    // A run this one resumes; any other would be archived (no task of it
    // can be answered).
    // (On a database a run is named by its id alone: its workers' dirs
    // differ.)
    if (s.ok() && info.run_id == config.run_id &&
        (!config.location.empty() || info.install_dir == config.install_dir)) {
      run = store.get();
      if (!info.workflow.empty() && info.workflow != workflow.frozen_json()) {
        WIZQ_RETURN_IF_ERROR(Workflow::Parse(
            info.workflow, "the run's frozen workflow", &frozen));
        use = frozen.get();
      }
    }
  }
  // A fresh run that starts as an import has its tasks from the start.
  std::unique_ptr<ImportedTasks> imported;
  if (run == nullptr && config.import != nullptr) {
    imported = std::make_unique<ImportedTasks>(*config.import);
    run = imported.get();
  }
  return ResolveAnswers(*use, run, args, /*allow_unbound=*/true, out);
}

}  // namespace wizq
