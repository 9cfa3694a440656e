// The rules of a run that both its drivers apply, the run loop
// (orchestrator/) and the agent service (agent/), so that they cannot
// drift apart: how long a failed task waits before its retry, what its
// attempts' idempotency key is, and what a transaction does once results
// are recorded (due finally hooks submitted, a settled run finished).
#ifndef WIZQ_TASKS_RUN_RULES_H_
#define WIZQ_TASKS_RUN_RULES_H_

#include <cstdint>
#include <functional>
#include <string>

#include "queue/store.h"
#include "queue/task.h"
#include "tasks/workflow/workflow.h"
#include "util/status.h"

namespace wizq {

// How long a task that failed its attempt number `attempts` waits before
// it may be claimed again: 100 ms, doubled per attempt after the first,
// capped at 5 s.
int64_t RetryDelayMs(int attempts);

// The idempotency key of every attempt of `task` in the run `run_id`
// started at `run_started_ms` (SPEC §3, docs/PROTOCOL.md):
// "<run id>-<run start ms>-<task id>", and "-g<N>" after it for a re-run
// finally hook of generation N > 1. Stable across attempts and resumes; a
// --fresh run of the same run id gets new keys (its start time differs).
std::string IdempotencyKey(const std::string& run_id, int64_t run_started_ms,
                           const Task& task);

// Submits the finally hook (tasks/workflow/response.h) of every task whose hook
// is due, whatever the run's status.
Status SubmitDueHooks(StoreTxn& txn, const Workflow& wf);

// What a transaction does after recording results, when the run is
// running: submits the due finally hooks, then, if every task has settled,
// finishes the run (failed if any task failed, else completed) with
// `duration_ms`; `before_finish`, if given, is called just before
// run_finished is recorded (the run loop's crash point). Nothing when the
// run is not running.
Status SettleRun(StoreTxn& txn, const Workflow& wf, int64_t duration_ms,
                 const std::function<void()>& before_finish = nullptr);

}  // namespace wizq

#endif  // WIZQ_TASKS_RUN_RULES_H_
