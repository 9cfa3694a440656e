// PgStoreTxn: submitting, completing, failing and giving back tasks, the
// human gate, hooks and finishing (the claims and leases are in
// pg_claim.cc). Each mirrors the directory store's Txn (queue/dir/txn_impl.cc)
// and stages the same events.
#include "queue/pg/pg_txn.h"

#include <cstdint>

#include "queue/pg/pg_conn.h"
#include "queue/txn_rules.h"

namespace wizq {

Status PgStoreTxn::GetRun(RunInfo* run) {
  *run = w_->run().info;
  return Status::OK();
}

Status PgStoreTxn::GetTask(int64_t id, Task* task) {
  WIZQ_RETURN_IF_ERROR(w_->Flush());
  return PgReadTask(w_->conn(), quoted_, w_->run().run, id, task);
}

Status PgStoreTxn::ListTasks(const TaskFilter& f, std::vector<Task>* out) {
  WIZQ_RETURN_IF_ERROR(w_->Flush());
  return PgListTasks(w_->conn(), quoted_, w_->run().run, f, out);
}

Status PgStoreTxn::Counts(RunCounts* counts) {
  PgCountsOf(w_->run(), counts);
  return Status::OK();
}

// This worker, or "agent" for a store that holds leases only.
std::string_view PgStoreTxn::Actor() const {
  const std::string& w = store_->worker_id();
  return w.empty() ? std::string_view("agent") : std::string_view(w);
}

Status PgStoreTxn::Submit(const NewTask& task, int64_t* id,
                          bool* deduplicated) {
  int hook_generation = 0;
  bool hook_stale = false;
  if (task.origin == Origin::kFinally) {
    PgTask* owner = nullptr;
    WIZQ_RETURN_IF_ERROR(w_->Find(task.finally_for, &owner));
    if (owner != nullptr && owner->t.finally_task != 0) {
      PgTask* hook = nullptr;
      WIZQ_RETURN_IF_ERROR(w_->Find(owner->t.finally_task, &hook));
      if (hook != nullptr) hook_generation = hook->t.generation;
      hook_stale = owner->t.hook_stale;
    }
  }
  std::string key;
  int generation = 1;
  WIZQ_RETURN_IF_ERROR(
      SubmitKey(task, hook_generation, hook_stale, &key, &generation));
  int64_t existing = 0;
  WIZQ_RETURN_IF_ERROR(w_->FindByDedupKey(key, &existing));
  *deduplicated = existing != 0;
  *id = existing != 0 ? existing : w_->run().next_task;
  return StageSubmit(task, key, generation, existing, *id, w_->Sink());
}

// Held by this worker in the attempt and with the token it claimed, or by
// the lease ActAs accepted.
Status PgStoreTxn::RequireHeld(int64_t id, PgTask** task) {
  PgTask* row = nullptr;
  WIZQ_RETURN_IF_ERROR(w_->Find(id, &row));
  if (row == nullptr) {
    return Status::InvalidArgument("no task " + std::to_string(id));
  }
  const Task& t = row->t;
  bool held = false;
  if (acting_.count(id) != 0) {
    held = !t.lease_token.empty();
  } else if (t.lease_token.empty() && t.claimed_by == store_->worker_id()) {
    auto mine = claimed_.find(id);
    held = mine != claimed_.end() ? mine->second.attempt == t.attempts &&
                                        mine->second.token == row->claim_token
                                  : store_->HeldByMe(*row);
  }
#ifdef WIZQ_MUTANT_NO_FENCE
  // Mutant (tests/machines/torture, make torture-mutants): no claim fence.
  held = true;
#endif
  if (t.state != TaskState::kInProgress || !held) {
    return Status::Conflict("task " + std::to_string(id) +
                            " is no longer held by this worker (state " +
                            TaskStateName(t.state) + ", claimed by " +
                            t.claimed_by + ")");
  }
  *task = row;
  return Status::OK();
}

void PgStoreTxn::End(int64_t id) {
  claimed_.erase(id);
  ended_.insert(id);
}

Status PgStoreTxn::NoteAdopted(int64_t id, int attempt, int64_t waited_ms) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  TaskAdopted e;
  e.id = id;
  e.worker = Actor();
  e.attempt = attempt;
  e.waited_ms = waited_ms;
  return w_->Stage(e);
}

Status PgStoreTxn::Complete(int64_t id, const Completion& c,
                            std::vector<int64_t>* child_ids) {
  if (c.adopted_attempt > 0) {
    WIZQ_RETURN_IF_ERROR(NoteAdopted(id, c.adopted_attempt, c.waited_ms));
  }
  PgTask* t = nullptr;
  if (c.reused_id != 0) {
    WIZQ_RETURN_IF_ERROR(w_->Find(id, &t));
    if (t == nullptr || t->t.state != TaskState::kPending ||
        t->t.attempts != 0) {
      return Status::Conflict(
          "task " + std::to_string(id) + " can no longer be reused (it is " +
          (t ? TaskStateName(t->t.state) : "unknown") + " or already ran)");
    }
  } else {
    WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  }
  TaskCompleted e;
  e.id = id;
  e.worker = Actor();
  e.def_hash = c.def_hash;
  e.reused_run_id = c.reused.run_id;
  e.reused_id = c.reused_id;
  for (const NewTask& child : c.children) {
    int64_t cid = 0;
    bool dup = false;
    WIZQ_RETURN_IF_ERROR(Submit(child, &cid, &dup));
    (dup ? e.deduplicated : e.spawned).push_back(cid);
    if (child_ids) child_ids->push_back(cid);
  }
  End(id);
  return w_->Stage(e);
}

Status PgStoreTxn::Fail(int64_t id, const Failure& f, bool* will_retry) {
  if (f.adopted_attempt > 0) {
    WIZQ_RETURN_IF_ERROR(NoteAdopted(id, f.adopted_attempt, f.waited_ms));
  }
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  End(id);
  return StageFail(t->t, Actor(), f, now_ms(), will_retry, w_->Sink());
}

Status PgStoreTxn::Release(int64_t id, std::string_view reason) {
  PgTask* t = nullptr;
  WIZQ_RETURN_IF_ERROR(RequireHeld(id, &t));
  End(id);
  return StageRelease(t->t, Actor(), reason, acting_.count(id) != 0,
                      w_->Sink());
}

Status PgStoreTxn::MarkStarted(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    PgTask* t = nullptr;
    if (!RequireHeld(id, &t).ok() || t->t.started) continue;
    TaskStarted e;
    e.id = id;
    e.worker = Actor();
    e.attempt = t->t.attempts;
    WIZQ_RETURN_IF_ERROR(w_->Stage(e));
  }
  return Status::OK();
}

Status PgStoreTxn::Answer(int64_t id, std::string_view answer_json,
                          std::string_view source) {
  PgTask* row = nullptr;
  WIZQ_RETURN_IF_ERROR(w_->Find(id, &row));
  if (row == nullptr) {
    return Status::InvalidArgument("no task " + std::to_string(id));
  }
  const Task& t = row->t;
  const bool held =
      t.state == TaskState::kInProgress && t.claimed_by == store_->worker_id();
  if (t.state != TaskState::kPending && !held) {
    return Status::Conflict("task " + std::to_string(id) +
                            " does not wait for an answer (state " +
                            TaskStateName(t.state) + ")");
  }
  if (!t.answer.empty()) {
    return Status::Conflict("task " + std::to_string(id) +
                            " was already answered " + t.answer + " (" +
                            t.answer_source + ")");
  }
  TaskAnswered e;
  e.id = id;
  e.answer = answer_json;
  e.source = source;
  e.worker = store_->worker_id();
  return w_->Stage(e);
}

Status PgStoreTxn::Pause(std::string_view waiting_json) {
  RunPaused e;
  e.waiting = waiting_json;
  return w_->Stage(e);
}

Status PgStoreTxn::DueHooks(size_t max, std::vector<Task>* owners) {
  WIZQ_RETURN_IF_ERROR(w_->Flush());
  PgResult r;
  WIZQ_RETURN_IF_ERROR(w_->conn()->Exec(
      w_->Sql(std::string("SELECT ") + kPgTaskColumns +
              " FROM {s}.tasks t WHERE t.run = $1 AND t.hook_due ORDER BY "
              "t.task_id LIMIT $2"),
      {w_->run().run, max > static_cast<size_t>(INT64_MAX)
                          ? INT64_MAX
                          : static_cast<int64_t>(max)},
      &r));
  for (int i = 0; i < r.rows(); i++) {
    PgTask row;
    PgTaskFromRow(r, i, &row);
    owners->push_back(std::move(row.t));
  }
  return Status::OK();
}

Status PgStoreTxn::FinishIfSettled(int64_t duration_ms, RunStatus* status) {
  const PgRun& run = w_->run();
  const int64_t total = run.next_task - 1;
  if (run.info.status == RunStatus::kRunning && total > 0 &&
      run.settled == total) {
    const int64_t failed = run.by_state[static_cast<int>(TaskState::kFailed)];
    RunFinished e;
    e.status =
        RunStatusName(failed > 0 ? RunStatus::kFailed : RunStatus::kCompleted);
    e.resumed = run.info.resumes > 0;
    e.tasks_total = total;
    e.tasks_done = run.by_state[static_cast<int>(TaskState::kDone)];
    e.tasks_failed = failed;
    e.duration_ms = duration_ms;
    e.has_reuse_counts = true;
    e.tasks_reused = run.reused;
    e.tasks_imported = run.imported;
    e.tasks_live =
        e.tasks_done + e.tasks_failed - e.tasks_reused - e.tasks_imported;
    e.tasks_adopted = run.info.adopted;
    WIZQ_RETURN_IF_ERROR(w_->Stage(e));
  }
  *status = w_->run().info.status;
  return Status::OK();
}

void PgStoreTxn::Merge(std::map<int64_t, PgStore::Held>* held) const {
  for (int64_t id : ended_) held->erase(id);
  for (const auto& [id, h] : claimed_) (*held)[id] = h;
}

}  // namespace wizq
