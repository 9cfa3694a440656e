#include "queue/import.h"

#include <algorithm>
#include <map>
#include <set>

#include "queue/run_info.h"
#include "queue/store.h"  // DedupKey
#include "queue/txn_rules.h"
#include "util/canonical_json.h"

namespace wizq {

namespace {

std::string TaskName(size_t index) {
  return "imported task " + std::to_string(index + 1);
}

Status CheckTask(const RunImport& import, size_t i) {
  const ImportedTask& it = import.tasks[i];
  const NewTask& t = it.task;
  const int64_t id = static_cast<int64_t>(i) + 1;
  if (t.type.empty() || !IsValidJson(t.inputs)) {
    return Status::InvalidArgument(TaskName(i) +
                                   ": needs a type and JSON inputs");
  }
  if (t.parent_id < 0 || t.parent_id >= id || t.finally_for < 0 ||
      t.finally_for >= id) {
    return Status::InvalidArgument(
        TaskName(i) + ": refers to a task that does not precede it");
  }
  if ((t.origin == Origin::kFinally) != (t.finally_for != 0)) {
    return Status::InvalidArgument(TaskName(i) +
                                   ": a Finally task, and only one, names "
                                   "the task it is the hook of");
  }
  const int spent = static_cast<int>(it.failures.size()) +
                    (it.state == TaskState::kDone ? 1 : 0);
  const bool room = it.state != TaskState::kPending || spent < t.max_attempts;
  if (t.max_attempts < 1 || spent > t.max_attempts || !room) {
    return Status::InvalidArgument(TaskName(i) + ": " + std::to_string(spent) +
                                   " attempts spent of max_attempts " +
                                   std::to_string(t.max_attempts));
  }
  if (it.state == TaskState::kInProgress ||
      (it.state == TaskState::kFailed && it.failures.empty())) {
    return Status::InvalidArgument(TaskName(i) + ": state " +
                                   TaskStateName(it.state) +
                                   " cannot be imported as is");
  }
  for (int64_t c : it.spawned) {
    if (c < 1 || c > static_cast<int64_t>(import.tasks.size()) || c == id) {
      return Status::InvalidArgument(TaskName(i) + ": spawned task " +
                                     std::to_string(c) + " does not exist");
    }
  }
  if (!it.spawned.empty() && it.state != TaskState::kDone) {
    return Status::InvalidArgument(TaskName(i) +
                                   ": only a done task spawned tasks");
  }
  return Status::OK();
}

// The submission of task `id`, with its dedup key (none when another task
// of the import already has that key: the source did not deduplicate). A
// hook is its owner's next generation (`hooks`: per owner, so far).
Status StageImported(const EventSink& q, const NewTask& t, int64_t id,
                     std::set<std::string>* keys,
                     std::map<int64_t, int>* hooks) {
  std::string key;
  int generation = 1;
  if (t.origin == Origin::kFinally) {
    generation = ++(*hooks)[t.finally_for];
    key = FinallyDedupKey(t.finally_for, generation);
  } else {
    WIZQ_RETURN_IF_ERROR(DedupKey(t.type, t.inputs, &key));
  }
  if (!keys->insert(key).second) key.clear();
  return StageSubmit(t, key, generation, /*existing=*/0, id, q);  // txn_rules
}

// The attempts task `id` already had.
Status StageAttempts(const EventSink& q, const ImportedTask& it, int64_t id,
                     int64_t now_ms) {
  const std::string worker(kImportWorker);
  int64_t attempt = 0;
  // No host: no wizq worker ran these attempts.
  auto claim = [&] {
    TaskClaimed e;
    e.id = id;
    e.type = it.task.type;
    e.worker = worker;
    e.attempt = ++attempt;
    return q(e);
  };
  for (size_t k = 0; k < it.failures.size(); k++) {
    WIZQ_RETURN_IF_ERROR(claim());
    TaskFailed f;
    f.id = id;
    f.worker = worker;
    f.reason = it.failures[k].reason;
    f.message = it.failures[k].message;
    f.attempt = attempt;
    f.will_retry =
        !(it.state == TaskState::kFailed && k + 1 == it.failures.size());
    if (f.will_retry) f.retry_at = now_ms;
    WIZQ_RETURN_IF_ERROR(q(f));
  }
  if (it.state != TaskState::kDone) return Status::OK();
  WIZQ_RETURN_IF_ERROR(claim());
  TaskCompleted c;
  c.id = id;
  c.worker = worker;
  c.spawned = it.spawned;
  return q(c);
}

}  // namespace

Status ValidateImport(const RunImport& import) {
  for (size_t i = 0; i < import.tasks.size(); i++) {
    WIZQ_RETURN_IF_ERROR(CheckTask(import, i));
  }
  return Status::OK();
}

Status StageImport(const RunImport& import, int64_t now_ms,
                   const EventSink& q) {
  WIZQ_RETURN_IF_ERROR(ValidateImport(import));
  RunImported header;
  header.source = import.source;
  header.tasks_pending = import.tasks_pending;
  header.tasks_waiting = import.tasks_waiting;
  header.tasks_done = import.tasks_done;
  WIZQ_RETURN_IF_ERROR(q(header));
  // Every task first, so that no parent has settled when a child attaches.
  std::set<std::string> keys;
  std::map<int64_t, int> hooks;
  for (size_t i = 0; i < import.tasks.size(); i++) {
    WIZQ_RETURN_IF_ERROR(StageImported(
        q, import.tasks[i].task, static_cast<int64_t>(i) + 1, &keys, &hooks));
  }
  // Then what ran, in the order the source finished it.
  std::vector<size_t> by_order(import.tasks.size());
  for (size_t i = 0; i < by_order.size(); i++) by_order[i] = i;
  std::stable_sort(by_order.begin(), by_order.end(), [&](size_t a, size_t b) {
    return import.tasks[a].order < import.tasks[b].order;
  });
  for (size_t i : by_order) {
    WIZQ_RETURN_IF_ERROR(
        StageAttempts(q, import.tasks[i], static_cast<int64_t>(i) + 1, now_ms));
  }
  if (import.tasks.empty()) {
    // Nothing to run (a log that holds only its Config): the run is over.
    RunFinished finished;
    finished.status = RunStatusName(RunStatus::kCompleted);
    return q(finished);
  }
  return Status::OK();
}

}  // namespace wizq
