#include "queue/txn_rules.h"

#include <cstdio>
#include <string>

namespace wizq {
namespace {

std::string Holder(const Task& t) {
  return t.agent.empty() ? std::string("its agent") : "agent " + t.agent;
}

std::string PutBackMessage(const Task& t, const LostClaimPlace& place,
                           bool leased, bool adoptable, bool ran) {
  const std::string of = " (attempt " + std::to_string(t.attempts) + " of " +
                         std::to_string(t.max_attempts) + ")";
  const std::string worker = "worker " + t.claimed_by;
  if (leased)
    return "the lease of " + Holder(t) + " lapsed without a heartbeat" + of;
  if (adoptable) {
    return worker + " died while the task was in progress; its attempt " +
           std::to_string(t.attempts) +
           " still runs or finished on its own and is adopted, not charged "
           "again";
  }
  if (ran && !place.on_this_host) {
    return worker + " on another host was lost while the task was in progress" +
           of;
  }
  if (ran) return worker + " died while the task was in progress" + of;
  return worker +
         " died after claiming the task but before starting it; the attempt "
         "does not count";
}

}  // namespace

Status SubmitKey(const NewTask& task, int hook_generation, bool hook_stale,
                 std::string* key, int* generation) {
  *generation = 1;
  if (task.origin == Origin::kFinally) {
    // A hook that is not stale has the key of the hook it has, and is
    // deduplicated.
    if (hook_generation > 0) {
      *generation = hook_generation + (hook_stale ? 1 : 0);
    }
    *key = FinallyDedupKey(task.finally_for, *generation);
    return Status::OK();
  }
  Status s = DedupKey(task.type, task.inputs, key);
  return s.ok() ? s : s.Annotate("inputs of a " + task.type + " task");
}

Status StageSubmit(const NewTask& task, const std::string& key, int generation,
                   int64_t existing, int64_t id, const EventSink& stage) {
  if (existing != 0) {
    TaskDeduplicated e;
    e.type = task.type;
    e.dedup_key = key;
    e.existing_id = existing;
    e.parent_id = task.parent_id;
    return stage(e);
  }
  TaskSubmitted e;
  e.id = id;
  e.type = task.type;
  e.inputs = task.inputs;
  e.parent_id = task.parent_id;
  e.origin = OriginName(task.origin);
  e.dedup_key = key;
  e.max_attempts = task.max_attempts;
  e.has_finally = task.has_finally;
  e.finally_for = task.finally_for;
  e.generation = generation;
  return stage(e);
}

Status StageFail(const Task& t, std::string_view actor, const Failure& f,
                 int64_t now_ms, bool* will_retry, const EventSink& stage) {
  TaskFailed e;
  e.id = t.id;
  e.worker = actor;
  e.reason = f.reason;
  e.message = f.message;
  e.attempt = t.attempts;
  e.will_retry = f.retryable && t.attempts < t.max_attempts;
  if (e.will_retry) e.retry_at = now_ms + f.retry_delay_ms;
  if (will_retry != nullptr) *will_retry = e.will_retry;
  return stage(e);
}

Status StageRelease(const Task& t, std::string_view actor,
                    std::string_view reason, bool by_lease,
                    const EventSink& stage) {
  const std::string message =
      by_lease ? Holder(t) + " gave the task back; the attempt does not count"
               : "stopped before it finished; the attempt does not count";
  TaskReset e;
  e.id = t.id;
  e.worker = actor;
  e.reason = reason;
  e.message = message;
  e.attempt = t.attempts;
  e.refund = true;
  return stage(e);
}

PutBackFate FateOfPutBack(const Task& t, const LostClaimPlace& place,
                          const LocalAttempts& local) {
  PutBackFate f;
  const bool leased = !t.lease_token.empty();
  f.ran = leased || t.started ||
          (place.shares_workspace && (!local.started || local.started(t)));
  f.adoptable = !leased && f.ran && place.on_this_host && local.adoptable &&
                local.adoptable(t);
  return f;
}

Status StagePutBack(const Task& t, const LostClaimPlace& place,
                    const LocalAttempts& local, Reclaimed* out,
                    const EventSink& stage) {
  const bool leased = !t.lease_token.empty();
  const PutBackFate fate = FateOfPutBack(t, place, local);
  const bool ran = fate.ran;
  const bool adoptable = fate.adoptable;
  const bool again = !ran || adoptable || t.attempts < t.max_attempts;
  const std::string message = PutBackMessage(t, place, leased, adoptable, ran);
  // task_reset and task_failed share these fields.
  auto fill = [&](auto* e) {
    e->id = t.id;
    e->worker = t.claimed_by;
    e->reason = kReasonWorkerLost;
    e->message = message;
    e->attempt = t.attempts;
  };
  if (again) {
    out->reset.push_back(t.id);
    if (adoptable) out->adopt.push_back(t.id);
    TaskReset e;
    fill(&e);
    if (leased) e.reason = kReasonLeaseExpired;
    e.refund = !ran || adoptable;
    e.never_started = !ran;
    return stage(e);
  }
  out->lost.push_back(t.id);
  TaskFailed e;
  fill(&e);
  e.will_retry = false;
  return stage(e);
}

Status StageTimeOut(const Task& t, int64_t now_ms, Reclaimed* out,
                    const EventSink& stage) {
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%gs", t.timeout_ms / 1000.0);
  const std::string message =
      std::string("timed out after ") + limit + " (the step's timeout) while " +
      Holder(t) + " held it (attempt " + std::to_string(t.attempts) + " of " +
      std::to_string(t.max_attempts) + ")";
  TaskFailed e;
  e.id = t.id;
  e.worker = t.claimed_by;
  e.reason = kReasonTimeout;
  e.message = message;
  e.attempt = t.attempts;
  e.will_retry = t.retry_on_timeout && t.attempts < t.max_attempts;
  if (e.will_retry) e.retry_at = now_ms;
  (e.will_retry ? out->reset : out->lost).push_back(t.id);
  out->timed_out.push_back(t.id);
  return stage(e);
}

}  // namespace wizq
