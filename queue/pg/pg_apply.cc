// PgWork: what each event changes in the rows. The rules are the directory
// store's (QueueState::Apply, queue/dir/state.cc): the same event must leave a
// task and the run's counters as a fold of the log would, which the
// contract oracle (tests/store/contract_oracle_test.cc) checks. What
// QueueState derives by rebuilding (settledness, open children, due hooks)
// is kept here incrementally, walking a task's ancestors only.
#include <limits>

#include "queue/pg/pg_work.h"
#include "util/canonical_json.h"
#include "util/random.h"

namespace wizq {
namespace {

bool Finished(TaskState s) {
  return s == TaskState::kDone || s == TaskState::kFailed;
}

}  // namespace

Status PgWork::Require(int64_t id, TaskState s, std::string_view what,
                       PgTask** task) {
  WIZQ_RETURN_IF_ERROR(Find(id, task));
  if (*task == nullptr) {
    return Status::Corruption(std::string(what) + " of unknown task " +
                              std::to_string(id));
  }
  if ((*task)->t.state != s) {
    return Status::Corruption(std::string(what) + " of task " +
                              std::to_string(id) + " in state " +
                              TaskStateName((*task)->t.state));
  }
  (*task)->dirty = true;
  return Status::OK();
}

Status PgWork::Apply(const RunStarted&, int64_t) { return Status::OK(); }

Status PgWork::Apply(const RunResumed&, int64_t) {
  run_->info.resumes++;
  if (run_->info.status == RunStatus::kPaused) {
    run_->info.status = RunStatus::kRunning;
  }
  return Status::OK();
}

Status PgWork::Apply(const QueueArchived& e, int64_t) {
  run_->info.previous_run = e.path;
  run_->info.no_reuse = e.no_reuse;
  run_->info.from = e.from;
  return Status::OK();
}

Status PgWork::Apply(const RunFinished& e, int64_t ts) {
  if (!ParseRunStatus(e.status, &run_->info.status)) {
    return Status::Corruption("unknown run status '" + std::string(e.status) +
                              "'");
  }
  run_->info.finished_ms = ts;
  return Status::OK();
}

Status PgWork::Apply(const RunPaused&, int64_t) {
  const RunStatus s = run_->info.status;
  if (s != RunStatus::kRunning && s != RunStatus::kPaused) {
    return Status::Corruption(std::string("run_paused of a run that is ") +
                              RunStatusName(s));
  }
  run_->info.status = RunStatus::kPaused;
  return Status::OK();
}

Status PgWork::Apply(const TaskAdopted& e, int64_t) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(Require(e.id, TaskState::kInProgress, "adopted", &t));
  run_->info.adopted++;
  return Status::OK();
}

Status PgWork::Apply(const TaskStarted& e, int64_t) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(Require(e.id, TaskState::kInProgress, "start", &t));
  if (e.attempt != t->t.attempts) {
    return Status::Corruption("start of attempt " + std::to_string(e.attempt) +
                              " of task " + std::to_string(e.id) +
                              ", which is at attempt " +
                              std::to_string(t->t.attempts));
  }
  t->t.started = true;
  return Status::OK();
}

Status PgWork::Apply(const TaskSubmitted& e, int64_t ts) {
  if (e.type.empty() || e.inputs.empty() || !IsValidJson(e.inputs)) {
    return Status::Corruption("a task needs a type and JSON inputs");
  }
  if (e.id != run_->next_task) {
    return Status::Corruption("task id " + std::to_string(e.id) +
                              " submitted where " +
                              std::to_string(run_->next_task) + " was next");
  }
  PgTask row;
  Task& t = row.t;
  t.id = e.id;
  t.type = e.type;
  t.inputs = e.inputs;
  t.max_attempts = static_cast<int>(e.max_attempts);
  t.parent_id = e.parent_id;
  t.dedup_key = e.dedup_key;
  t.has_finally = e.has_finally;
  t.finally_for = e.finally_for;
  t.generation = static_cast<int>(e.generation);
  t.created_ms = t.updated_ms = ts;
  if (!ParseOrigin(e.origin, &t.origin)) {
    return Status::Corruption("unknown origin '" + std::string(e.origin) + "'");
  }
  row.dirty = true;
  run_->next_task++;
  return AddTask(Cache(row));
}

// QueueState::AddLiveTask: the new task is pending; its parent has one
// more open child (and waits again for its hook); a hook settles its owner.
Status PgWork::AddTask(PgTask* t) {
  run_->by_state[static_cast<int>(TaskState::kPending)]++;
  if (t->t.parent_id != 0) {
    PgTask* parent = nullptr;
    WIZQ_RETURN_IF_ERROR(Find(t->t.parent_id, &parent));
    if (parent == nullptr) {
      return Status::Corruption(
          "parent task " + std::to_string(t->t.parent_id) + " does not exist");
    }
    if (parent->t.settled_counted) {
      return Status::Corruption("task " + std::to_string(t->t.id) +
                                " attached to settled task " +
                                std::to_string(parent->t.id));
    }
    parent->dirty = true;
    parent->t.open_children++;
    UpdateHookDue(parent);
    WIZQ_RETURN_IF_ERROR(MarkHooksStale(parent->t.id));
  }
  if (t->t.finally_for == 0) return Status::OK();
  PgTask* owner = nullptr;
  WIZQ_RETURN_IF_ERROR(Find(t->t.finally_for, &owner));
  if (owner == nullptr) {
    return Status::Corruption("task " + std::to_string(t->t.finally_for) +
                              " (finally_for) does not exist");
  }
  PgTask* prev = nullptr;
  if (owner->t.finally_task != 0) {
    WIZQ_RETURN_IF_ERROR(Find(owner->t.finally_task, &prev));
  }
  const int next = prev != nullptr ? prev->t.generation + 1 : 1;
  if (t->t.generation != next) {
    return Status::Corruption("finally hook " + std::to_string(t->t.id) +
                              " has generation " +
                              std::to_string(t->t.generation) + " where " +
                              std::to_string(next) + " was next");
  }
  if (prev == nullptr && !owner->t.settled_counted) run_->hooks_reopened++;
  owner->dirty = true;
  owner->t.finally_task = t->t.id;
  owner->t.hook_stale = false;
  return Settle(owner);
}

Status PgWork::Apply(const TaskClaimed& e, int64_t ts) {
  PgTask* row = nullptr;
  WIZQ_RETURN_IF_ERROR(Require(e.id, TaskState::kPending, "claim", &row));
  if (e.attempt < 0 || e.attempt >= std::numeric_limits<int>::max()) {
    return Status::Corruption("attempt out of range");
  }
  Task& t = row->t;
  t.attempts = static_cast<int>(e.attempt);
  t.started = false;
  t.claimed_by = e.worker;
  t.claim_host = e.host;
  t.updated_ms = ts;
  SetState(row, TaskState::kInProgress);
  t.lease_token = e.lease;
  t.lease_expires_ms = e.lease.empty() ? 0 : e.lease_expires_ms;
  t.agent = e.agent;
  if (!e.lease.empty()) {
    run_->leased++;
    if (e.timeout_ms > 0) {
      t.timeout_ms = e.timeout_ms;
      t.deadline_ms =
          e.timeout_ms > INT64_MAX - ts ? INT64_MAX : ts + e.timeout_ms;
      t.retry_on_timeout = e.retry_on_timeout;
    }
  }
  // Every claim is fenced by a token: a lease's own, else a fresh one.
  row->claim_token = e.lease.empty() ? RandomHex128() : std::string(e.lease);
  return Status::OK();
}

Status PgWork::Apply(const LeaseRenewed& e, int64_t ts) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(
      Require(e.id, TaskState::kInProgress, "lease renewal", &t));
  if (t->t.lease_token.empty()) {
    return Status::Corruption("lease renewal of task " + std::to_string(e.id) +
                              ", which no lease holds");
  }
  t->t.lease_expires_ms = e.lease_expires_ms;
  t->claim_until_ms = e.lease_expires_ms;
  t->t.updated_ms = ts;
  return Status::OK();
}

Status PgWork::Apply(const TaskCompleted& e, int64_t ts) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(Require(
      e.id, e.reused_id != 0 ? TaskState::kPending : TaskState::kInProgress,
      "completion", &t));
  if (e.reused_id != 0) {
    if (t->t.attempts != 0) {
      return Status::Corruption("reuse of task " + std::to_string(e.id) +
                                ", which already ran");
    }
    t->t.reused_from = e.reused_id;
    run_->reused++;
  }
  t->t.updated_ms = ts;
  WIZQ_RETURN_IF_ERROR(MarkHooksStale(t->t.parent_id));
  SetState(t, TaskState::kDone);
  return Settle(t);
}

Status PgWork::Apply(const TaskFailed& e, int64_t ts) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(Require(e.id, TaskState::kInProgress, "failure", &t));
  if (e.reason.empty()) return Status::Corruption("a failure needs a reason");
  t->t.error_reason = e.reason;
  t->t.error_message = e.message;
  t->t.updated_ms = ts;
  t->t.retry_at_ms = e.will_retry ? e.retry_at : 0;
  SetState(t, e.will_retry ? TaskState::kPending : TaskState::kFailed);
  return e.will_retry ? Status::OK() : Settle(t);
}

Status PgWork::Apply(const TaskReset& e, int64_t ts) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(Require(e.id, TaskState::kInProgress, "reset", &t));
  if (e.reason.empty()) return Status::Corruption("a reset needs a reason");
  t->t.error_reason = e.reason;
  t->t.error_message = e.message;
  t->t.updated_ms = ts;
  if (e.refund && t->t.attempts > 0) t->t.attempts--;
  SetState(t, TaskState::kPending);
  return Status::OK();
}

Status PgWork::Apply(const TaskAnswered& e, int64_t ts) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(Find(e.id, &t));
  if (t == nullptr || t->t.terminal() || !t->t.answer.empty()) {
    return Status::Corruption("answer of task " + std::to_string(e.id) +
                              ", which is unknown, finished or answered");
  }
  if (e.answer.empty() || !IsValidJson(e.answer) || e.source.empty()) {
    return Status::Corruption("an answer needs JSON and a source");
  }
  t->dirty = true;
  t->t.answer = e.answer;
  t->t.answer_source = e.source;
  t->t.updated_ms = ts;
  return Status::OK();
}

// failed -> pending with a fresh budget. The task and the ancestors that
// counted it settled are unsettled again (QueueState rebuilds instead).
Status PgWork::Apply(const TaskRetried& e, int64_t ts) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(Require(e.id, TaskState::kFailed, "retry", &t));
  if (e.max_attempts <= t->t.attempts ||
      e.max_attempts >= std::numeric_limits<int>::max()) {
    return Status::Corruption("retry of task " + std::to_string(e.id) +
                              " with max_attempts " +
                              std::to_string(e.max_attempts));
  }
  t->t.max_attempts = static_cast<int>(e.max_attempts);
  SetState(t, TaskState::kPending);
  t->t.retry_at_ms = 0;
  t->t.updated_ms = ts;
  run_->info.status = RunStatus::kRunning;
  run_->info.finished_ms = 0;
  return Unsettle(t);
}

// QueueState::SetState: counters, and a claim's lease and token end with it.
void PgWork::SetState(PgTask* row, TaskState s) {
  Task& t = row->t;
  if (t.claimed_by == kImportWorker) {
    run_->imported += Finished(s) - Finished(t.state);
  }
  run_->by_state[static_cast<int>(t.state)]--;
  run_->by_state[static_cast<int>(s)]++;
  if (t.state == TaskState::kInProgress) {
    if (!t.lease_token.empty()) run_->leased--;
    t.lease_token.clear();
    t.lease_expires_ms = 0;
    t.timeout_ms = t.deadline_ms = 0;
    t.retry_on_timeout = true;
    row->claim_token.clear();
    row->claim_until_ms = 0;
  }
  t.state = s;
  row->dirty = true;
}

void PgWork::UpdateHookDue(PgTask* row) {
  const Task& t = row->t;
  const bool due = t.state == TaskState::kDone && t.has_finally &&
                   (t.finally_task == 0 || t.hook_stale) &&
                   t.open_children == 0;
  if (due == row->hook_due) return;
  row->hook_due = due;
  run_->hooks_due += due ? 1 : -1;
  row->dirty = true;
}

// QueueState::Settle: once a task settles, its parent has one open child
// less, and may settle in turn.
Status PgWork::Settle(PgTask* t) {
  while (t != nullptr) {
    UpdateHookDue(t);
    if (t->t.settled_counted || !t->t.settled()) return Status::OK();
    t->dirty = true;
    t->t.settled_counted = true;
    run_->settled++;
    if (t->t.finally_task != 0) run_->hooks_reopened--;
    const int64_t parent = t->t.parent_id;
    t = nullptr;
    if (parent != 0) {
      WIZQ_RETURN_IF_ERROR(Find(parent, &t));
      if (t != nullptr) {
        t->dirty = true;
        t->t.open_children--;
      }
    }
  }
  return Status::OK();
}

// The reverse, for a task that was settled and is open again: each
// ancestor that counted it settled has one open child more and is open
// again itself.
Status PgWork::Unsettle(PgTask* t) {
  UpdateHookDue(t);
  if (!t->t.settled_counted) return Status::OK();
  t->t.settled_counted = false;
  run_->settled--;
  if (t->t.finally_task != 0) run_->hooks_reopened++;
  while (t->t.parent_id != 0) {
    PgTask* p = nullptr;
    WIZQ_RETURN_IF_ERROR(Find(t->t.parent_id, &p));
    if (p == nullptr) break;
    p->dirty = true;
    p->t.open_children++;
    UpdateHookDue(p);
    if (!p->t.settled_counted) break;
    p->t.settled_counted = false;
    run_->settled--;
    if (p->t.finally_task != 0) run_->hooks_reopened++;
    t = p;
  }
  return Status::OK();
}

// QueueState::MarkHooksStale: a task attached or completed beneath `from`
// makes every hook above it that ran (or runs) stale. Only a run with a
// hook over an unsettled subtree can have one.
Status PgWork::MarkHooksStale(int64_t from) {
  if (run_->hooks_reopened == 0) return Status::OK();
  PgTask* a = nullptr;
  WIZQ_RETURN_IF_ERROR(Find(from, &a));
  while (a != nullptr) {
    PgTask* hook = nullptr;
    if (a->t.finally_task != 0 && !a->t.hook_stale) {
      WIZQ_RETURN_IF_ERROR(Find(a->t.finally_task, &hook));
    }
    if (hook != nullptr && hook->t.state != TaskState::kPending) {
      a->dirty = true;
      a->t.hook_stale = true;
      UpdateHookDue(a);
    }
    const int64_t parent = a->t.parent_id;
    a = nullptr;
    if (parent != 0) WIZQ_RETURN_IF_ERROR(Find(parent, &a));
  }
  return Status::OK();
}

}  // namespace wizq
