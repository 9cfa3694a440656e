// Queue: the durable state of one run in `<install_dir>/.wizard/`.
//
// Open() takes the directory lock, loads queue.json, replays the audit
// events after it and, by QueueOptions::mode, decides (SPEC §5): start a
// fresh run, resume a matching one, join it if other workers are alive,
// archive a foreign or older one, or refuse (a newer format, a foreign run
// with live workers); or attach to whatever run is there; or only look.
//
// Every change is made inside Transact(): under the lock, the state is first
// caught up with what other processes appended, the claims of lost holders
// are put back (claim_holder.h), then the callback stages transitions
// through a Txn, and the batch is made durable (one write, one fdatasync)
// before Transact returns. Several processes may hold a Queue on
// the same directory at once; none ever loses another's transition or
// claims a task another holds.
//
// This header is free of file-format details so that another store (a
// database) can implement the same contract later.
//
// Thread-safety: a Queue may be used from several threads; calls are
// serialised. Each process should hold one Queue per directory.
#ifndef WIZQ_QUEUE_QUEUE_H_
#define WIZQ_QUEUE_QUEUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "queue/dir/dir_open.h"  // WizardDir
#include "queue/dir/dir_private.h"
#include "queue/dir/state.h"
#include "queue/store.h"
#include "queue/task.h"
#include "util/status.h"

namespace wizq {

class Env;
class Txn;
struct RunImport;

struct QueueOptions {
  Env* env = nullptr;       // nullptr: Env::Posix()
  std::string install_dir;  // absolute and canonical
  std::string run_id;
  std::string workflow_json;           // frozen into a fresh run
  std::string entry_input = "null";    // recorded with a fresh run
  std::vector<NewTask> initial_tasks;  // submitted with a fresh run
  // A fresh run starts as this import instead (queue/import.h); then
  // initial_tasks must be empty. Not owned; outlives Open().
  const RunImport* import = nullptr;
  OpenMode mode = OpenMode::kRun;
  std::string wizq_version;
  // The snapshot is rewritten once the log has grown by more than
  // max(size of the snapshot, this) since the last one.
  uint64_t checkpoint_min_bytes = 1 << 20;
  // Whether the current attempt of a claimed task ever started. A dead
  // worker's task whose attempt never started (it was claimed ahead) goes
  // back to pending without counting the attempt. Null: always true.
  std::function<bool(const Task&)> attempt_started;
  // `wizq run --retry-failed`: when the run is resumed (even a finished
  // one), its failed tasks go back to pending (task_retried) with a fresh
  // budget of retry_budget(task) attempts (null: the task's max_attempts).
  // A completed run is left as it is.
  // A fresh run (an import) starts with its failed tasks put back the same
  // way.
  bool retry_failed = false;
  std::function<int(const Task&)> retry_budget;
  // What a fresh run may reuse of the run it replaces (--no-reuse, --from):
  // recorded with queue_archived (RunInfo::no_reuse, from).
  bool no_reuse = false;
  std::vector<std::string> from;
  // With OpenMode::kAttach: hold nothing but leases (one `wizq agent`
  // call). No worker is registered (no worker_joined/worker_left), claims
  // must be ClaimLeased, and Close writes nothing.
  bool leases_only = false;
  // Whether this process puts back the claims of dead workers (a lapsed
  // lease is always put back). A process that cannot judge a worker's
  // attempt — adopt it, or tell whether it started (attempt_adoptable,
  // attempt_started) — such as a `wizq agent` call or `wizq answer`, sets
  // false and leaves them to the next `wizq run`, which adopts a tree that
  // finished on its own instead of charging and re-running it.
  bool reclaim_worker_claims = true;
  // Whether the current attempt of a dead worker's task can be adopted: its
  // process tree still runs, or finished on its own and left an exit record
  // (docs/PROTOCOL.md, "Orphans after a crash"). Such a task goes back to
  // pending without counting the attempt (Reclaimed::adopt), so that the
  // next claim has the same attempt number and adopts instead of running
  // it again. Null: never. Called under the lock; must be thread-safe.
  std::function<bool(const Task&)> attempt_adoptable;
  // Before a run is archived (--fresh, another run id or workflow), each
  // of its in_progress tasks (a dead worker's: archiving is refused while
  // workers live) is passed here to end what its attempt left running, so
  // that no attempt of the old run overlaps the new one. An error refuses
  // the archive, files untouched. Null: nothing is ended.
  std::function<Status(const Task&)> end_orphan;
  // This machine (queue/host.h), recorded with each claim (task_claimed's
  // `host`); empty: HostId::Current(install_dir). A dead worker's claim is
  // judged by the callbacks above only where they can see it: whether it
  // started, by a worker sharing its workspace (the attempt journal lives
  // there); whether it can be adopted or ended, by a worker on its host.
  HostId host;
};

class Queue {
 public:
  static Status Open(const QueueOptions& options, std::unique_ptr<Queue>* queue,
                     OpenReport* report);
  // Releases the locks without writing anything (like a crash would): call
  // Close() first for an orderly exit.
  virtual ~Queue() = default;

  // Logs worker_left, writes a snapshot and removes this worker's entry.
  virtual Status Close() = 0;

  // Runs `fn` under the lock on the caught-up state, after putting back
  // the tasks whose holder is lost (Txn::reclaimed() says which); what it
  // stages is committed as one durable batch, with that reclaim, before
  // this returns. If `fn` fails, what it staged is discarded, the reclaim
  // too, and its status returned. After an I/O error
  // every later call fails (the process should stop; a new Open resumes
  // from the last durable state).
  virtual Status Transact(const std::function<Status(Txn&)>& fn) = 0;
  // Catches up with other processes' events without writing.
  virtual Status Refresh() = 0;
  // The state as of the last Transact/Refresh/Open.
  virtual const QueueState& state() const = 0;
  virtual const std::string& worker_id() const = 0;
  virtual const std::string& wizard_dir() const = 0;
  // Writes queue.json now (under the lock).
  virtual Status Checkpoint() = 0;
};

// The transitions available inside Queue::Transact. Each one is applied to
// the state at once (later calls in the same Txn see it) and becomes durable
// when the Transact commits.
class Txn {
 public:
  virtual ~Txn() = default;
  virtual const QueueState& state() const = 0;
  virtual int64_t now_ms() const = 0;
  // The tasks this transaction put back before its callback ran, because
  // their holder was lost (a dead worker, a lapsed lease): pending if
  // attempts remain, else failed with worker_lost. The caller ends what the
  // lost attempts may have left running.
  virtual const Reclaimed& reclaimed() const = 0;

  // Submits a task unless one with the same <type, canonical inputs> exists
  // (a finally hook: unless its owner already has one), in which case the
  // existing id is returned with *deduplicated = true and the attempt is
  // logged as task_deduplicated. InvalidArgument if inputs are not JSON.
  virtual Status Submit(const NewTask& task, int64_t* id,
                        bool* deduplicated) = 0;
  // Claims the first pending task (lowest id) that is ready now, of a
  // type (step) that `step_open` takes, that `accept` takes (either may be
  // null: all); *id = 0 if there is none. `step_open(type)` is asked once
  // per type that has pending tasks, and the pending tasks of a type it
  // refuses are not looked at (they are indexed by type): a step at its
  // max_concurrency costs nothing however many of its tasks wait.
  virtual Status ClaimNextOfSteps(
      const std::function<bool(std::string_view type)>& step_open,
      const std::function<bool(const Task&)>& accept, int64_t* id) = 0;
  // Completes a task this worker holds, submitting `children` in the same
  // batch. Each child's parent_id is used as given: normally `id`; for a
  // finally hook's output, the parent of the hook's owner.
  virtual Status Complete(int64_t id, const std::vector<NewTask>& children,
                          std::vector<int64_t>* child_ids) = 0;
  // Fails a task this worker holds. It goes back to pending (not before
  // now + retry_delay_ms) if `retryable` and attempts remain.
  virtual Status Fail(int64_t id, std::string_view reason,
                      std::string_view message, bool retryable,
                      int64_t retry_delay_ms, bool* will_retry) = 0;
  // Gives back a task this worker holds but stopped before it finished
  // (wizq was interrupted), or whose lease UseLease accepted (an agent's
  // `release`): pending again, and the attempt does not count.
  virtual Status Release(int64_t id, std::string_view reason) = 0;
  // Records run_finished with the status and counts.
  virtual Status FinishRun(RunStatus status, int64_t duration_ms) = 0;

  // What a completion records besides the children (task_completed).
  struct CompletionInfo {
    std::string def_hash;  // tasks/workflow/def_hash.h; "" if unknown
    // Non-zero: the task completes from the recorded result of task
    // `reused_id` of run `reused_run_id` (orchestrator/reuse.h). The task
    // must then be pending and never attempted; it needs no claim.
    std::string reused_run_id;
    int64_t reused_id = 0;
  };
  // Complete() with what `info` says. Complete(id, c, ids) is
  // CompleteWith(id, c, CompletionInfo(), ids).
  virtual Status CompleteWith(int64_t id, const std::vector<NewTask>& children,
                              const CompletionInfo& info,
                              std::vector<int64_t>* child_ids) = 0;
  // The human gate (SPEC §10; queue/dir/txn_gate.cc). Records `answer_json`
  // (canonical JSON) as the answer of task `id` (task_answered), which must
  // be pending, or held by this worker, and not answered yet: Conflict
  // otherwise (an answer is never replaced). The caller has checked that
  // the answer fits the task's prompt.
  virtual Status Answer(int64_t id, std::string_view answer_json,
                        std::string_view source) = 0;
  // Records run_paused with `waiting_json` (a JSON array describing the
  // tasks that wait for an answer); the run's status becomes paused.
  virtual Status Pause(std::string_view waiting_json) = 0;
  // --- Leases (SPEC §9): claims held by a token with an expiry, for agents
  // that cannot hold a worker lock. A lapsed lease is a lost holder: the
  // next transaction of any process puts its task back (task_reset
  // lease_expired) or fails it (worker_lost), as for a dead worker.

  // A leased attempt's terms: the lease lapses `lease_ms` after the claim
  // or a renewal; `agent` (may be empty) names the taker for status and
  // the log. With `timeout_ms` > 0 the attempt times out that long after
  // the claim, heartbeats or not: the next transaction of any process
  // fails it (task_failed timeout), retried if `retry_on_timeout` and
  // attempts remain (Reclaimed::timed_out).
  struct LeaseTerms {
    int64_t lease_ms = 0;
    std::string_view agent;
    int64_t timeout_ms = 0;
    bool retry_on_timeout = true;
  };
  // As ClaimNextOfSteps with no step filter, but the claim is held by a
  // new random lease on `terms`;
  // *token receives it.
  virtual Status ClaimLeased(const std::function<bool(const Task&)>& accept,
                             const LeaseTerms& terms, int64_t* id,
                             std::string* token) = 0;
  // Extends the lease on `id` to now + lease_ms (lease_renewed). Conflict
  // when the task is no longer held by that lease, with a message that
  // says what became of it: never taken, put back after its lease lapsed,
  // timed out, given back, attempt N failed (reason), completed, held by
  // another holder. InvalidArgument when there is no task `id`.
  virtual Status RenewLease(int64_t id, std::string_view token,
                            int64_t lease_ms, int64_t* expires_ms) = 0;
  // Lets this transaction act for the holder of the lease on `id`: after
  // it, Complete, Fail and Release accept `id`. Conflict as for
  // RenewLease; the check and the action are under the same lock.
  virtual Status UseLease(int64_t id, std::string_view token) = 0;
  // Records task_adopted: the result about to be committed for task `id`
  // (held by this worker) is that of attempt `attempt`, started by a worker
  // that died, waited for `waited_ms`. Call it just before Complete/Fail.
  virtual Status NoteAdopted(int64_t id, int attempt, int64_t waited_ms) = 0;
  // Records that the current attempts of these held tasks started
  // (task_started), once each; a task no longer held is skipped.
  virtual Status MarkStarted(const std::vector<int64_t>& ids) = 0;
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_QUEUE_H_
