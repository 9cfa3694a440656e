// The events of the StoreTxn verbs, made the same way by every store
// (queue/store.h): a store finds the rows (the directory store in its
// in-memory state, PostgreSQL in locked rows) and decides *whether* a
// transition applies (held? lost?); these functions decide *what* it
// records — the event, its fields and its message — so both stores say
// and do the same. Each event then goes through the store's own Stage,
// which applies the state rules (queue/dir/state.cc, queue/pg/pg_apply.cc).
#ifndef WIZQ_QUEUE_TXN_RULES_H_
#define WIZQ_QUEUE_TXN_RULES_H_

#include <string>
#include <string_view>

#include "queue/events.h"
#include "queue/store.h"
#include "queue/task.h"

namespace wizq {

// Each function stages its event through `stage` (the store's own Stage,
// which applies it to the state and encodes it before returning: events
// hold views of strings that live only during the call).

// --- Submit.

// The dedup key and generation of `task` (StoreTxn::Submit): <type,
// canonical inputs> (DedupKey), or for a finally hook its owner's key at a
// generation: 1 for the owner's first hook, else its current hook's
// (`hook_generation`, 0 if none) plus one if that hook is stale.
Status SubmitKey(const NewTask& task, int hook_generation, bool hook_stale,
                 std::string* key, int* generation);

// Stages task_deduplicated of task `existing` (non-zero), else
// task_submitted of `task` as task `id`.
Status StageSubmit(const NewTask& task, const std::string& key, int generation,
                   int64_t existing, int64_t id, const EventSink& stage);

// --- Fail and Release of a held task `t`, by `actor` (the worker or lease
// holder the transaction acts for).

// task_failed: retried after f.retry_delay_ms if retryable and attempts
// remain (*will_retry, if not null).
Status StageFail(const Task& t, std::string_view actor, const Failure& f,
                 int64_t now_ms, bool* will_retry, const EventSink& stage);

// task_reset, the attempt refunded: given back by an agent (`by_lease`) or
// stopped by its worker before it finished.
Status StageRelease(const Task& t, std::string_view actor,
                    std::string_view reason, bool by_lease,
                    const EventSink& stage);

// --- Reclaim (StoreTxn::reclaimed()): what becomes of a claim whose holder
// is lost, or of a leased attempt past its time limit.

// Where the lost claim was made, as the store judges it from
// Task::claim_host (queue/host.h).
struct LostClaimPlace {
  bool on_this_host = true;      // its processes can be seen here
  bool shares_workspace = true;  // its attempt journal can be read here
};

// What a put-back of held task `t` whose holder is lost finds: whether its
// attempt ran (it may still run, or have run, somewhere) and whether it is
// to be adopted here (see StagePutBack).
struct PutBackFate {
  bool ran = false;
  bool adoptable = false;
};
PutBackFate FateOfPutBack(const Task& t, const LostClaimPlace& place,
                          const LocalAttempts& local);

// The put-back of held task `t` whose holder is lost: task_reset (pending
// again: the attempt counted if it started, refunded if it never started
// or is to be adopted) or, with no attempt left, task_failed worker_lost.
// A lost attempt started if the store says so (task_started), if it was
// leased (its payload was handed out), or if `local.started` says so —
// asked only where the journal can be read; it is adopted (not charged)
// when it still runs or finished on its own on this host
// (`local.adoptable`). Records the task in *out (reset/adopt or lost).
Status StagePutBack(const Task& t, const LostClaimPlace& place,
                    const LocalAttempts& local, Reclaimed* out,
                    const EventSink& stage);

// A leased attempt past its time limit: task_failed timeout at once (no
// backoff), retried at `now_ms` if its step allows it and attempts remain.
// Records the task in *out (reset or lost, and timed_out).
Status StageTimeOut(const Task& t, int64_t now_ms, Reclaimed* out,
                    const EventSink& stage);

}  // namespace wizq

#endif  // WIZQ_QUEUE_TXN_RULES_H_
