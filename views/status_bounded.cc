// `wizq status`'s default view (views/status_view.h, RunView::bounded): a
// run of any size read in a bounded number of statements, each of a bounded
// size. The tree is walked from its roots, a node's children read with the
// store's parent filter (PostgreSQL: the tasks_children index), as far as
// the lines shown; in-progress tasks (bounded by the workers' room), the
// first failed ones and the waiting Prompt tasks are read by state.
#include <algorithm>
#include <memory>
#include <vector>

#include "queue/store.h"
#include "tasks/workflow/workflow.h"
#include "views/status_view.h"

namespace wizq {
namespace {

void Keep(const Task& t, RunView* v) {
  if (v->at.count(t.id)) return;
  v->at[t.id] = v->tasks.size();
  v->tasks.push_back(t);
}

// The subtree under `parent` (0: the roots), depth first and in id order as
// the full tree prints it, until `max` lines.
Status Walk(Store& store, int64_t parent, int depth, size_t max, RunView* v) {
  if (v->lines.size() >= max) return Status::OK();
  TaskFilter f;
  f.parent_id = parent;
  f.children = false;  // walked by parent instead
  f.limit = static_cast<int64_t>(max - v->lines.size());
  std::vector<Task> children;
  WIZQ_RETURN_IF_ERROR(store.ListTasks(f, &children));
  for (const Task& t : children) {
    if (v->lines.size() >= max) break;
    Keep(t, v);
    v->lines.push_back({t.id, depth});
    WIZQ_RETURN_IF_ERROR(Walk(store, t.id, depth + 1, max, v));
  }
  return Status::OK();
}

// Tasks that `filter` selects, kept; their ids in *ids (may be null).
Status Read(Store& store, const TaskFilter& filter, RunView* v,
            std::vector<int64_t>* ids) {
  std::vector<Task> tasks;
  WIZQ_RETURN_IF_ERROR(store.ListTasks(filter, &tasks));
  for (const Task& t : tasks) {
    Keep(t, v);
    if (ids != nullptr) ids->push_back(t.id);
  }
  return Status::OK();
}

}  // namespace

Status LoadBoundedRunView(Store& store, size_t max_lines, RunView* v) {
  v->store = &store;
  v->bounded = true;
  WIZQ_RETURN_IF_ERROR(store.GetRun(&v->run));
  WIZQ_RETURN_IF_ERROR(store.Counts(&v->counts));
  WIZQ_RETURN_IF_ERROR(Walk(store, 0, 0, max_lines, v));
  TaskFilter f;
  f.children = false;
  if (v->counts.of(TaskState::kInProgress) > 0) {
    f.states = {TaskState::kInProgress};
    WIZQ_RETURN_IF_ERROR(Read(store, f, v, nullptr));
  }
  if (v->counts.of(TaskState::kFailed) > 0) {
    f.states = {TaskState::kFailed};
    f.limit = static_cast<int64_t>(max_lines);
    WIZQ_RETURN_IF_ERROR(Read(store, f, v, &v->failed));
  }
  std::unique_ptr<Workflow> wf;
  if (v->counts.of(TaskState::kPending) > 0 &&
      Workflow::Parse(v->run.workflow, "the run's workflow", &wf).ok()) {
    TaskFilter waiting;  // as PrintWaitingPrompts reads them
    waiting.children = false;
    waiting.states = {TaskState::kPending};
    waiting.unanswered = true;
    for (const Step& step : wf->steps()) {
      if (step.action.kind == Action::Kind::kPrompt)
        waiting.steps.push_back(step.name);
    }
    if (!waiting.steps.empty()) {
      WIZQ_RETURN_IF_ERROR(Read(store, waiting, v, nullptr));
    }
  }
  std::sort(v->tasks.begin(), v->tasks.end(),
            [](const Task& a, const Task& b) { return a.id < b.id; });
  for (size_t i = 0; i < v->tasks.size(); i++) v->at[v->tasks[i].id] = i;
  return Status::OK();
}

}  // namespace wizq
