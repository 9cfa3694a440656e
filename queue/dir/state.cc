#include "queue/dir/state.h"

#include <limits>
#include <variant>

#include "queue/events.h"
#include "util/canonical_json.h"

namespace wizq {

namespace {

// A task's inputs, kept as text. RawJson checks only the structure of an
// object or array (simdjson's On-Demand API skips over its values), so the
// text is checked with the rule dedup keys use, as the snapshot decoder
// does (queue/dir/snapshot_decode.cc).
bool IsJson(std::string_view json) { return IsValidJson(json); }

// Attempt counts are ints with room for one more attempt (a claim adds 1).
bool AttemptsInRange(int64_t n) {
  return n >= 0 && n < std::numeric_limits<int>::max();
}

}  // namespace

Status QueueState::ApplyEvent(std::string_view line) {
  static thread_local EventDecoder decoder;
  EventHeader h;
  Event e;
  WIZQ_RETURN_IF_ERROR(decoder.Decode(line, &h, &e));
  if (h.seq < 1 || h.seq == std::numeric_limits<int64_t>::max()) {
    return Status::Corruption("audit event seq " + std::to_string(h.seq) +
                              " is out of range");
  }
  if (h.seq != last_seq_ + 1 && last_seq_ != 0) {
    return Status::Corruption("audit event seq " + std::to_string(h.seq) +
                              " does not follow " + std::to_string(last_seq_));
  }
  Status s = std::visit(
      [&](const auto& ev) {
        using E = std::decay_t<decltype(ev)>;
        if constexpr (IsInformational<E>::value) {
          return Status::OK();  // unknown (newer) kinds too
        } else {
          return Apply(ev, h.ts);
        }
      },
      e);
  if (!s.ok()) {
    return s.Annotate("audit event seq " + std::to_string(h.seq) + " (" +
                      std::string(h.name) + ")");
  }
  last_seq_ = h.seq;
  return Status::OK();
}

Status QueueState::Apply(const QueueArchived& e, int64_t) {
  run_.previous_run = e.path;
  run_.no_reuse = e.no_reuse;
  run_.from = e.from;
  return Status::OK();
}

Status QueueState::Apply(const RunStarted& e, int64_t ts) {
  if (started()) return Status::Corruption("a second run_started");
  run_.format_version = static_cast<int>(e.format);
  run_.run_id = e.run_id;
  run_.install_dir = e.install_dir;
  run_.workflow = e.workflow;
  run_.entry_input = e.input;
  run_.wizq_version = e.wizq_version;
  run_.started_ms = ts;
  run_.status = RunStatus::kRunning;
  return Status::OK();
}

Status QueueState::Apply(const RunFinished& e, int64_t ts) {
  if (!ParseRunStatus(e.status, &run_.status)) {
    return Status::Corruption("unknown run status '" + std::string(e.status) +
                              "'");
  }
  run_.finished_ms = ts;
  return Status::OK();
}

// Informational but for the count: the task_completed or task_failed that
// follows makes the transition.
Status QueueState::Apply(const TaskAdopted& e, int64_t) {
  const Task* t = Find(e.id);
  WIZQ_RETURN_IF_ERROR(
      RequireState(t, e.id, TaskState::kInProgress, "adopted"));
  run_.adopted++;
  return Status::OK();
}

Status QueueState::Apply(const TaskStarted& e, int64_t) {
  Task* t = MutableFind(e.id);
  WIZQ_RETURN_IF_ERROR(RequireState(t, e.id, TaskState::kInProgress, "start"));
  if (e.attempt != t->attempts) {
    return Status::Corruption("start of attempt " + std::to_string(e.attempt) +
                              " of task " + std::to_string(e.id) +
                              ", which is at attempt " +
                              std::to_string(t->attempts));
  }
  t->started = true;
  return Status::OK();
}

Status QueueState::Apply(const TaskSubmitted& e, int64_t ts) {
  // What the snapshot decoder requires of a task (a state that cannot be
  // checkpointed and read back must not be accepted).
  if (e.type.empty() || e.inputs.empty()) {
    return Status::Corruption("a task needs a type and inputs");
  }
  if (!IsJson(e.inputs)) {
    return Status::Corruption("inputs are not valid JSON");
  }
  if (e.id != next_task_id()) {
    return Status::Corruption("task id " + std::to_string(e.id) +
                              " submitted where " +
                              std::to_string(next_task_id()) + " was next");
  }
  if (!AttemptsInRange(e.max_attempts)) {
    return Status::Corruption("max_attempts " + std::to_string(e.max_attempts) +
                              " is out of range");
  }
  Task t;
  t.id = e.id;
  t.type = e.type;
  t.inputs = e.inputs;
  t.max_attempts = static_cast<int>(e.max_attempts);
  t.parent_id = e.parent_id;
  t.dedup_key = e.dedup_key;
  t.has_finally = e.has_finally;
  t.finally_for = e.finally_for;
  if (e.generation < 1 || !AttemptsInRange(e.generation) ||
      (e.generation > 1 && e.finally_for == 0)) {
    return Status::Corruption("generation " + std::to_string(e.generation) +
                              " is out of range or not of a finally hook");
  }
  t.generation = static_cast<int>(e.generation);
  t.created_ms = t.updated_ms = ts;
  if (!ParseOrigin(e.origin, &t.origin)) {
    return Status::Corruption("unknown origin '" + std::string(e.origin) + "'");
  }
  if (t.parent_id != 0 && MutableFind(t.parent_id) == nullptr) {
    return Status::Corruption("parent task " + std::to_string(t.parent_id) +
                              " does not exist");
  }
  if (t.finally_for != 0 && MutableFind(t.finally_for) == nullptr) {
    return Status::Corruption("task " + std::to_string(t.finally_for) +
                              " (finally_for) does not exist");
  }
  return AddLiveTask(std::move(t));
}

Status QueueState::RequireState(const Task* t, int64_t id, TaskState s,
                                std::string_view event) const {
  if (t == nullptr) {
    return Status::Corruption(std::string(event) + " of unknown task " +
                              std::to_string(id));
  }
  if (t->state != s) {
    return Status::Corruption(std::string(event) + " of task " +
                              std::to_string(id) + " in state " +
                              TaskStateName(t->state));
  }
  return Status::OK();
}

Status QueueState::Apply(const TaskClaimed& e, int64_t ts) {
  Task* t = MutableFind(e.id);
  WIZQ_RETURN_IF_ERROR(RequireState(t, e.id, TaskState::kPending, "claim"));
  if (!AttemptsInRange(e.attempt)) {
    return Status::Corruption("attempt " + std::to_string(e.attempt) +
                              " is out of range");
  }
  if (!e.lease.empty() && e.lease_expires_ms <= 0) {
    return Status::Corruption("a lease needs lease_expires_ms");
  }
  t->attempts = static_cast<int>(e.attempt);
  t->started = false;
  t->claimed_by = e.worker;
  t->claim_host = e.host;
  t->updated_ms = ts;
  SetState(t, TaskState::kInProgress);
  t->lease_token = e.lease;
  t->lease_expires_ms = e.lease.empty() ? 0 : e.lease_expires_ms;
  t->agent = e.agent;
  if (!e.lease.empty() && e.timeout_ms > 0) {
    t->timeout_ms = e.timeout_ms;
    t->deadline_ms =
        ts > 0 && e.timeout_ms > INT64_MAX - ts ? INT64_MAX : ts + e.timeout_ms;
    t->retry_on_timeout = e.retry_on_timeout;
  }
  return Status::OK();
}

Status QueueState::Apply(const LeaseRenewed& e, int64_t ts) {
  Task* t = MutableFind(e.id);
  WIZQ_RETURN_IF_ERROR(
      RequireState(t, e.id, TaskState::kInProgress, "lease renewal"));
  if (t->lease_token.empty()) {
    return Status::Corruption("lease renewal of task " + std::to_string(e.id) +
                              ", which no lease holds");
  }
  t->lease_expires_ms = e.lease_expires_ms;
  t->updated_ms = ts;
  return Status::OK();
}

Status QueueState::Apply(const TaskCompleted& e, int64_t ts) {
  Task* t = MutableFind(e.id);
  // A reused task completes straight from pending, never having run.
  WIZQ_RETURN_IF_ERROR(RequireState(
      t, e.id, e.reused_id != 0 ? TaskState::kPending : TaskState::kInProgress,
      "completion"));
  if (e.reused_id != 0) {
    if (t->attempts != 0) {
      return Status::Corruption("reuse of task " + std::to_string(e.id) +
                                ", which already ran");
    }
    t->reused_from = e.reused_id;
    reused_count_++;
  }
  t->updated_ms = ts;
  MarkHooksStale(t->parent_id);
  SetState(t, TaskState::kDone);
  Settle(t);
  return Status::OK();
}

Status QueueState::Apply(const TaskFailed& e, int64_t ts) {
  Task* t = MutableFind(e.id);
  WIZQ_RETURN_IF_ERROR(
      RequireState(t, e.id, TaskState::kInProgress, "failure"));
  if (e.reason.empty()) return Status::Corruption("a failure needs a reason");
  t->error_reason = e.reason;
  t->error_message = e.message;
  t->updated_ms = ts;
  t->retry_at_ms = e.will_retry ? e.retry_at : 0;
  SetState(t, e.will_retry ? TaskState::kPending : TaskState::kFailed);
  if (!e.will_retry) Settle(t);
  return Status::OK();
}

Status QueueState::Apply(const TaskReset& e, int64_t ts) {
  Task* t = MutableFind(e.id);
  WIZQ_RETURN_IF_ERROR(RequireState(t, e.id, TaskState::kInProgress, "reset"));
  if (e.reason.empty()) return Status::Corruption("a reset needs a reason");
  t->error_reason = e.reason;
  t->error_message = e.message;
  t->updated_ms = ts;
  if (e.refund && t->attempts > 0) t->attempts--;
  SetState(t, TaskState::kPending);
  return Status::OK();
}

Status QueueState::AddLiveTask(Task t) {
  const int64_t id = t.id;
  if (!t.dedup_key.empty()) by_dedup_key_.emplace(t.dedup_key, id);
  counts_[static_cast<int>(TaskState::kPending)]++;
  pending_.insert(id);
  pending_by_type_[t.type].insert(id);
  tasks_.push_back(std::move(t));
  Task& task = tasks_.back();
  if (task.parent_id != 0) {
    Task* parent = MutableFind(task.parent_id);
    if (parent->settled_counted) {
      return Status::Corruption("task " + std::to_string(id) +
                                " attached to settled task " +
                                std::to_string(parent->id));
    }
    parent->children.push_back(id);
    parent->open_children++;
    UpdateHookDue(*parent);  // a task due for its hook now waits again
    MarkHooksStale(parent->id);
  }
  if (task.finally_for != 0) {
    Task* owner = MutableFind(task.finally_for);
    const Task* prev =
        owner->finally_task != 0 ? Find(owner->finally_task) : nullptr;
    const int next = prev != nullptr ? prev->generation + 1 : 1;
    if (task.generation != next) {
      return Status::Corruption("finally hook " + std::to_string(id) +
                                " of task " + std::to_string(owner->id) +
                                " has generation " +
                                std::to_string(task.generation) + " where " +
                                std::to_string(next) + " was next");
    }
    if (prev == nullptr && !owner->settled_counted) hooks_reopened_++;
    owner->finally_task = id;
    owner->hook_stale = false;
    Settle(owner);
  }
  return Status::OK();
}

Task* QueueState::MutableFind(int64_t id) {
  if (id < 1 || id > static_cast<int64_t>(tasks_.size())) return nullptr;
  return &tasks_[id - 1];
}

const Task* QueueState::Find(int64_t id) const {
  if (id < 1 || id > static_cast<int64_t>(tasks_.size())) return nullptr;
  return &tasks_[id - 1];
}

int64_t QueueState::FindByDedupKey(const std::string& key) const {
  auto it = by_dedup_key_.find(key);
  return it == by_dedup_key_.end() ? 0 : it->second;
}

bool QueueState::AllSettled() const {
  return !tasks_.empty() &&
         settled_count_ == static_cast<int64_t>(tasks_.size());
}

namespace {

bool Finished(TaskState s) {
  return s == TaskState::kDone || s == TaskState::kFailed;
}

}  // namespace

void QueueState::SetState(Task* t, TaskState s) {
  if (t->claimed_by == kImportWorker) {  // finished, or retried, as imported
    imported_count_ += Finished(s) - Finished(t->state);
  }
  counts_[static_cast<int>(t->state)]--;
  counts_[static_cast<int>(s)]++;
  if (t->state == TaskState::kPending) RemovePending(*t);
  if (t->state == TaskState::kInProgress) {
    in_progress_.erase(t->id);
    t->lease_token.clear();  // a lease ends with its claim
    t->lease_expires_ms = 0;
    t->timeout_ms = t->deadline_ms = 0;  // so does its time limit
    t->retry_on_timeout = true;
  }
  if (s == TaskState::kPending) AddPending(*t);
  if (s == TaskState::kInProgress) in_progress_.insert(t->id);
  t->state = s;
}

void QueueState::AddPending(const Task& t) {
  pending_.insert(t.id);
  pending_by_type_[t.type].insert(t.id);
}

void QueueState::RemovePending(const Task& t) {
  pending_.erase(t.id);
  auto it = pending_by_type_.find(t.type);
  if (it == pending_by_type_.end()) return;
  it->second.erase(t.id);
  if (it->second.empty()) pending_by_type_.erase(it);
}

bool QueueState::HookWaits(const Task& t) const {
  if (t.origin != Origin::kFinally || t.state != TaskState::kPending) {
    return false;
  }
  const Task* owner = Find(t.finally_for);
  return owner != nullptr && owner->open_children > 0;
}

// A task was attached beneath `from` or completed beneath it: every hook
// above that ran or runs (is not pending) no longer saw the whole subtree.
// Only a run with a hook over an unsettled subtree can have one (after
// --retry-failed, or in an import), so other runs skip the walk.
void QueueState::MarkHooksStale(int64_t from) {
  if (hooks_reopened_ == 0) return;
  for (Task* a = MutableFind(from); a != nullptr;
       a = MutableFind(a->parent_id)) {
    if (a->finally_task == 0 || a->hook_stale ||
        Find(a->finally_task)->state == TaskState::kPending) {
      continue;
    }
    a->hook_stale = true;
    UpdateHookDue(*a);
  }
}

void QueueState::UpdateHookDue(const Task& t) {
  bool due = t.state == TaskState::kDone && t.has_finally &&
             (t.finally_task == 0 || t.hook_stale) && t.open_children == 0;
  if (due) {
    hooks_due_.insert(t.id);
  } else {
    hooks_due_.erase(t.id);
  }
}

void QueueState::Settle(Task* t) {
  while (t != nullptr) {
    UpdateHookDue(*t);
    if (t->settled_counted || !t->settled()) return;
    t->settled_counted = true;
    settled_count_++;
    if (t->finally_task != 0) hooks_reopened_--;
    t = t->parent_id != 0 ? MutableFind(t->parent_id) : nullptr;
    if (t != nullptr) t->open_children--;
  }
}

Status QueueState::Apply(const RunResumed&, int64_t) {
  // The count stays within what a snapshot may hold (0 .. 2^31-2).
  if (run_.resumes >= std::numeric_limits<int>::max() - 1) {
    return Status::Corruption("run_resumed after " +
                              std::to_string(run_.resumes) +
                              " resumes: the count is out of range");
  }
  run_.resumes++;
  // A paused run that is taken up again runs (SPEC §10).
  if (run_.status == RunStatus::kPaused) run_.status = RunStatus::kRunning;
  return Status::OK();
}

Status QueueState::AddStoredTask(Task task) {
  if (task.id != next_task_id()) {
    return Status::Corruption("task id " + std::to_string(task.id) + " where " +
                              std::to_string(next_task_id()) +
                              " was expected (ids must be 1, 2, 3, ...)");
  }
  if (task.parent_id < 0 || task.parent_id >= task.id || task.finally_for < 0 ||
      task.finally_for >= task.id) {
    return Status::Corruption("task " + std::to_string(task.id) +
                              " refers to a task that does not precede it");
  }
  tasks_.push_back(std::move(task));
  return Status::OK();
}

void QueueState::Rebuild() {
  by_dedup_key_.clear();
  by_dedup_key_.reserve(tasks_.size());
  pending_.clear();
  pending_by_type_.clear();
  in_progress_.clear();
  hooks_due_.clear();
  counts_.fill(0);
  settled_count_ = 0;
  reused_count_ = 0;
  imported_count_ = 0;
  hooks_reopened_ = 0;
  // children and finally_task are derived from parent_id and finally_for.
  for (Task& t : tasks_) {
    t.children.clear();
    t.finally_task = 0;
  }
  for (Task& t : tasks_) {
    if (t.parent_id != 0) tasks_[t.parent_id - 1].children.push_back(t.id);
    if (t.finally_for != 0) tasks_[t.finally_for - 1].finally_task = t.id;
  }
  for (Task& t : tasks_) {
    t.open_children = static_cast<int64_t>(t.children.size());
    t.settled_counted = false;
    if (!t.dedup_key.empty()) by_dedup_key_.emplace(t.dedup_key, t.id);
    counts_[static_cast<int>(t.state)]++;
    if (t.reused_from != 0 && t.state == TaskState::kDone) reused_count_++;
    if (t.claimed_by == kImportWorker && Finished(t.state)) imported_count_++;
    if (t.state == TaskState::kPending) AddPending(t);
    if (t.state == TaskState::kInProgress) in_progress_.insert(t.id);
  }
  // Children have larger ids than their parents: settle bottom-up.
  for (auto it = tasks_.rbegin(); it != tasks_.rend(); ++it) {
    UpdateHookDue(*it);
    if (it->settled()) {
      it->settled_counted = true;
      settled_count_++;
      if (it->parent_id != 0) tasks_[it->parent_id - 1].open_children--;
    } else if (it->finally_task != 0) {
      hooks_reopened_++;
    }
  }
}

}  // namespace wizq

namespace wizq {

// failed -> pending, with a fresh budget. The task's ancestors had counted
// it as settled (their hooks may even have run): the derived fields are
// rebuilt from scratch, which is O(tasks) per retried task.
Status QueueState::Apply(const TaskRetried& e, int64_t ts) {
  Task* t = MutableFind(e.id);
  WIZQ_RETURN_IF_ERROR(RequireState(t, e.id, TaskState::kFailed, "retry"));
  if (e.max_attempts <= t->attempts || !AttemptsInRange(e.max_attempts)) {
    return Status::Corruption("retry of task " + std::to_string(e.id) +
                              " with max_attempts " +
                              std::to_string(e.max_attempts) + " after " +
                              std::to_string(t->attempts) + " attempt(s)");
  }
  t->max_attempts = static_cast<int>(e.max_attempts);
  t->state = TaskState::kPending;
  t->retry_at_ms = 0;
  t->updated_ms = ts;
  run_.status = RunStatus::kRunning;
  run_.finished_ms = 0;
  Rebuild();
  return Status::OK();
}

}  // namespace wizq
