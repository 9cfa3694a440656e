// Store: the contract between a run's state and everything that works on
// it. Two implementations: the directory store (`<dir>/.wizard/`,
// queue/dir/) and the PostgreSQL store (queue/pg/). orchestrator/, agent/,
// mcp/, cli/, embed/, interop/ and the views hold a run only through this
// header; docs/ARCHITECTURE.md ("The store contract") says what each verb
// means on each store, and tests/store/ is the one suite both pass.
//
// A Store is one open run. Reads (GetRun, GetTask, ListTasks, Counts,
// ReadEvents) see a consistent committed state and take no lock. Every
// change is a Transact(): the store first puts back the claims whose holder
// is lost (StoreTxn::reclaimed), then the callback stages transitions through a
// Txn, and the batch is made durable as one unit before Transact returns
// (the directory store: one write + one fdatasync; PostgreSQL: one
// transaction). Each transition appends its events (queue/events.h) with a
// gap-free per-run `seq` in commit order: a reader that has seen seq n
// never later finds an event below n.
//
// The rules that must be atomic live behind the contract: a claim counts
// the attempt; dedup of <type, canonical inputs>; retry or fail by the
// attempt budget; reclaim of lost claims; settling (a parent's open
// children, finally hooks becoming due); finishing. What only the caller
// knows is passed in as data: which steps this process can run and how
// much room each has (ClaimFilter), the retry delay, the validated
// children of a response, how a hook's task is built.
//
// Thread-safety: a Store may be used from several threads; calls are
// serialised. A StoreTxn is used only inside its Transact callback.
#ifndef WIZQ_QUEUE_STORE_H_
#define WIZQ_QUEUE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "queue/host.h"
#include "queue/run_info.h"
#include "queue/task.h"
#include "util/status.h"

namespace wizq {

class Env;
class StoreTxn;
struct RunImport;

// How Open() treats the run it finds (SPEC §5).
enum class OpenMode {
  // `wizq run`: start a fresh run if there is none; resume (or join, when
  // other workers are alive) a run of the same run_id; archive a foreign or
  // older one (refused while it has live workers).
  kRun,
  // `wizq run --fresh`: as kRun, but archive even a matching run.
  kFresh,
  // `wizq agent`, `wizq answer`, `wizq mcp`: work on the run that is there
  // as one more worker, without starting, resuming or archiving it.
  // NotFound when there is none; NotSupported for another format version.
  // A finished run opens as OpenAction::kFinished and Transact is refused.
  kAttach,
  // Look only: no worker, no writes (`status`, `log`, `report`, `export`).
  kReadOnly,
};

// What only the machine that ran an attempt can tell about it (its local
// workspace: the attempt journal and process trees). Every claim records
// its host (Task::claim_host); the store asks `started` only about claims
// whose workspace is this one's (the journal lives there) and `adoptable`
// and `end_orphan` only about claims of this very host (its processes can
// be seen). Elsewhere a claim is judged by its lease and the store's facts
// (task_started). A claim recorded without a host counts as this host's.
struct LocalAttempts {
  // Whether the task's current attempt ever started (null: always). A lost
  // attempt that never started is given back without counting it.
  std::function<bool(const Task&)> started;
  // Whether it still runs or finished on its own and can be adopted (null:
  // never): it goes back without counting, to be adopted by the next claim.
  std::function<bool(const Task&)> adoptable;
  // Whether its processes may still run on this host (null: nothing the
  // caller starts outlives it). A dead worker's claim of this host is put
  // back within its lease only to be adopted, or when they do not run.
  std::function<bool(const Task&)> may_run;
  // Ends what the attempt left running before its run is archived (null:
  // nothing). An error refuses the archive.
  std::function<Status(const Task&)> end_orphan;
};

struct StoreOptions {
  // Where the run lives: "" (the directory store in install_dir) or a
  // PostgreSQL location (postgresql://..., postgres://..., or a libpq
  // keyword string) — see IsDatabaseLocation.
  std::string location;
  Env* env = nullptr;       // nullptr: Env::Posix()
  std::string install_dir;  // absolute and canonical
  std::string run_id;
  std::string workflow_json;           // frozen into a fresh run
  std::string def_files;               // RunInfo::def_files of a fresh run
  std::string entry_input = "null";    // recorded with a fresh run
  std::vector<NewTask> initial_tasks;  // submitted with a fresh run
  // A fresh run starts as this import instead (queue/import.h); then
  // initial_tasks is empty. Not owned; outlives Open().
  const RunImport* import = nullptr;
  OpenMode mode = OpenMode::kRun;
  std::string wizq_version;
  // `--retry-failed`: when the run is resumed (even a finished one), its
  // failed tasks go back to pending with a fresh budget of
  // retry_budget(task) attempts (null: the task's max_attempts).
  bool retry_failed = false;
  std::function<int(const Task&)> retry_budget;
  // What a fresh run that replaces a previous one may reuse of it (SPEC
  // §11: --no-reuse, --from STEP|ID), recorded with it (RunInfo::no_reuse,
  // RunInfo::from) so that a resumed run keeps it.
  bool no_reuse = false;
  std::vector<std::string> from;
  // Hold nothing but leases (one `wizq agent` call): no worker is
  // registered and Close writes nothing.
  bool leases_only = false;
  // Whether this process judges dead workers' claims (a lapsed lease is
  // always put back). A process that cannot adopt (`wizq agent`, `wizq
  // answer`) leaves them to the next `wizq run` of their host.
  bool reclaim_worker_claims = true;
  LocalAttempts local;
  // A store that workers on several machines share (PostgreSQL) asks it
  // before this process resumes or joins a current run, with nothing
  // written yet: a non-OK status refuses the run with it (SPEC §14: a
  // worker whose workflow or step files differ from the run's). Unset:
  // every worker is admitted, and a resumed run keeps its frozen workflow.
  // Not asked under OpenMode::kFresh, which archives the run instead.
  std::function<Status(const RunInfo& run)> admit;
  // This machine (queue/host.h); empty: HostId::Current(install_dir).
  HostId host;
  // The PostgreSQL store: the schema that holds its tables ("": wizq), and
  // how long a worker's claim holds without its worker renewing it (0:
  // 30 s; the worker renews every third of it). Past it, a worker on
  // another host may take the claim over (SPEC §14).
  std::string schema;
  int64_t worker_lease_ms = 0;
};

enum class OpenAction {
  kStartedFresh,  // no run was there (or it was archived): a new run
  kResumed,       // the same run, no other live worker: resumed
  kJoined,        // the same run, other workers alive: joined as one more
  kFinished,      // the same run, already completed or failed
  kReadOnly,      // OpenMode::kReadOnly
  kAttached,      // OpenMode::kAttach on a run that is not finished
};

struct OpenReport {
  OpenAction action = OpenAction::kStartedFresh;
  // The key (RunRef::key) of the previous run, when this open archived it.
  std::string archived_to;
  std::string archive_reason;
  bool archived_unfinished = false;  // it had not finished
  std::string torn_tail_path;        // the directory store's torn tail
  // kReadOnly: bytes an unfinished write left at the end of the directory
  // store's log, which no read returns (the next writer sets them aside).
  uint64_t torn_tail_bytes = 0;
  int64_t tasks_pending = 0;
  int64_t tasks_done = 0;
  int64_t tasks_reset = 0;    // stale in_progress tasks put back
  int64_t tasks_lost = 0;     // stale tasks failed with worker_lost
  int64_t tasks_retried = 0;  // failed tasks put back (retry_failed)
  int64_t tasks_adopted = 0;  // of tasks_reset: attempts to be adopted
};

// What the reclaim at the start of a transaction did.
struct Reclaimed {
  std::vector<int64_t> reset;  // put back to pending (task_reset)
  std::vector<int64_t> lost;   // no attempt left: failed (worker_lost)
  std::vector<int64_t> adopt;  // of `reset`: refunded, to be adopted
  // Of `reset` and `lost`: leased attempts past their step's timeout,
  // failed with reason timeout instead (task_failed; pending again for a
  // retry, or failed for good).
  std::vector<int64_t> timed_out;
};

// Tasks by a filter given as data (a store evaluates it in its own query
// language). Every set field narrows; the result is in id order.
struct TaskFilter {
  std::vector<TaskState> states;   // empty: any
  std::vector<std::string> steps;  // empty: any (Task::type)
  enum class Hooks { kAny, kOnly, kNone } hooks = Hooks::kAny;
  int64_t parent_id = -1;    // -1: any; 0: roots only
  std::string error_reason;  // non-empty: tasks whose last failure is this
  bool unanswered = false;   // tasks with no recorded answer
  bool leased = false;       // in_progress tasks held by a lease
  int64_t after_id = 0;      // ids above this (paging)
  int64_t limit = 0;         // 0: no limit
  // Fill Task::children; false: a store may leave it empty (on a database
  // a task's children are a read of their own).
  bool children = true;
};

// Counters a store keeps incrementally (never recomputed from the tree).
struct RunCounts {
  int64_t by_state[4] = {0, 0, 0, 0};  // indexed by TaskState
  int64_t total = 0;
  int64_t reused = 0;  // done from a previous run's result (SPEC §11)
  // Done or failed before an import, in the tool whose run this one
  // continues (claimed by kImportWorker): not run here.
  int64_t imported = 0;
  int64_t adopted = 0;  // task_adopted events
  int64_t leased = 0;   // in_progress tasks held by a lease
  int64_t hooks_due = 0;
  bool all_settled = false;  // every task settled, and there is one
  int64_t of(TaskState s) const { return by_state[static_cast<int>(s)]; }
};

// What to claim. A task is eligible when it is pending, ready (its retry
// time has come), of a step in `steps` (its own task) or `hook_steps` (a
// finally hook of a task of that step), answered if its step is in
// `answered_only`, and its step has room left. The lowest ids go first.
struct ClaimFilter {
  std::set<std::string> steps;
  std::set<std::string> hook_steps;
  std::set<std::string> answered_only;  // Prompt steps nobody here can ask
  // How many more tasks of a step (its tasks and hooks together) may be
  // claimed; a step without an entry has no limit.
  std::map<std::string, int> room;
  int max = 1;
  // Non-zero: only tasks with an id below this (the run loop claims ahead
  // no task that would overtake another step's first claimable one).
  int64_t below_id = 0;
  // Tasks this worker declines whatever their step (its executor gave up on
  // them here: a gate nobody answered, a Function body still running).
  std::set<int64_t> skip_ids;
  // Held by this worker (its lock or session proves it alive), or by a new
  // lease of lease_ms (an agent; the token is returned in Task::lease).
  bool lease = false;
  int64_t lease_ms = 0;
  // A step's own lease, where it differs from lease_ms (an agent's Pool
  // steps each have their `lease` option): a claimed task of that step
  // lapses that long after its claim.
  std::map<std::string, int64_t> step_lease_ms;
  std::string agent;  // the agent's name, for status; may be empty
  // A leased attempt's timeout by step (SPEC §9: it fails with reason
  // timeout that long after its claim, heart-beating or not; `retry` is
  // the step's retry_on_timeout). A step without an entry has none.
  struct Timeout {
    int64_t ms = 0;
    bool retry = true;
  };
  std::map<std::string, Timeout> timeouts;
};

// What a completion records besides the state change.
struct Completion {
  std::vector<NewTask> children;  // validated; parent_id as given
  std::string def_hash;           // tasks/workflow/def_hash.h; "" if unknown
  // Non-empty: completed from task `reused.id` of run `reused.run_id`
  // without running (SPEC §11); the task is pending and unclaimed.
  RunRef reused;
  int64_t reused_id = 0;
  // The result is a dead worker's attempt's, adopted (task_adopted).
  int adopted_attempt = 0;
  int64_t waited_ms = 0;
};

struct Failure {
  std::string reason;  // task.h kReason*
  std::string message;
  bool retryable = false;      // retried if attempts remain
  int64_t retry_delay_ms = 0;  // not claimed again before now + this
  int adopted_attempt = 0;     // as Completion
  int64_t waited_ms = 0;
};

// One event line as the log holds it (queue/events.h decodes it).
struct EventRecord {
  int64_t seq = 0;
  std::string line;  // the JSON object, without its newline
};

struct WorkerInfo {
  std::string id;
  std::string run_id;
  HostId host;
  int64_t pid = 0;
  int64_t started_ms = 0;
  bool alive = false;
};

// The reads a Store and a StoreTxn share: a Store answers from the
// committed state, a StoreTxn from the state as its transaction changed it.
// Code that only looks (a view, a check of --answer flags) takes this.
class StoreReads {
 public:
  virtual ~StoreReads() = default;
  virtual Status GetRun(RunInfo* run) = 0;
  // NotFound if there is no such task.
  virtual Status GetTask(int64_t id, Task* task) = 0;
  virtual Status ListTasks(const TaskFilter& filter,
                           std::vector<Task>* tasks) = 0;
  virtual Status Counts(RunCounts* counts) = 0;
};

// A run of a location as `wizq runs` lists it (Store::ListAll).
struct RunSummary {
  RunRef ref;
  RunCounts counts;
  int64_t live_workers = 0;
};

class Store : public StoreReads {
 public:
  // Opens the run options.location names, by options.mode. The directory
  // store and the PostgreSQL store (queue/open_store.cc picks one).
  static Status Open(const StoreOptions& options, std::unique_ptr<Store>* out,
                     OpenReport* report);
  // The runs of the location options.location names (on the directory
  // store, the one in options.install_dir) without opening any as a
  // worker: the current runs, newest first, then with `archived` the
  // archived ones, newest first. NotFound when the location holds no run.
  static Status ListAll(const StoreOptions& options, bool archived,
                        std::vector<RunSummary>* runs);
  // Releases everything without writing (as a crash would); call Close()
  // first for an orderly exit.
  virtual ~Store() = default;
  // Logs worker_left and lets go of this worker's liveness.
  virtual Status Close() = 0;

  // Runs `fn` as one durable batch (see the top of this file). If `fn`
  // fails, nothing it staged is kept (nor the reclaim) and its status is
  // returned. After an I/O error every later call fails. `fn` may run more
  // than once: a store whose try was lost with nothing kept (the
  // PostgreSQL store: a session lost before or during COMMIT, the COMMIT
  // read back as absent) runs it again, so `fn` first resets whatever it
  // writes outside the transaction.
  virtual Status Transact(const std::function<Status(StoreTxn&)>& fn) = 0;

  // --- Reads of the committed state (no lock): StoreReads, and these.
  // Events with seq > after_seq, in seq order, at most `max`.
  virtual Status ReadEvents(int64_t after_seq, size_t max,
                            std::vector<EventRecord>* events) = 0;
  // Returns once an event above after_seq is committed (*seq: the last
  // one), or at timeout_ms with *seq == after_seq. Never before either.
  virtual Status WaitForChange(int64_t after_seq, int timeout_ms,
                               int64_t* seq) = 0;
  // The run's workers, alive or lately gone, as the store knows them.
  virtual Status Workers(std::vector<WorkerInfo>* workers) = 0;
  // The runs of this location: the current one first, then archived ones,
  // newest first.
  virtual Status ListRuns(std::vector<RunRef>* runs) = 0;
  // A read-only Store on another run of this location (ListRuns).
  virtual Status OpenRun(const RunRef& run, std::unique_ptr<Store>* out) = 0;
  // Runs `fn` while the run this Store opened stays the location's current
  // run: nothing archives or replaces it until `fn` returns (`wizq prune`
  // removes the task files of its tasks under it). Conflict, without
  // calling `fn`, when it was archived or replaced since Open. Not inside
  // Transact.
  virtual Status WhileCurrent(const std::function<Status()>& fn) = 0;
  // An agent's heartbeat outside a transaction: extends the lease `token`
  // holds on `id` to now + lease_ms on the task alone, without waiting for
  // the run's transactions and without a lease_renewed event (the
  // PostgreSQL store, docs/POSTGRES.md). *from_mono_ms: as StoreTxn::
  // lease_from_mono_ms. Conflict where StoreTxn::ActAs would refuse the
  // lease (a transaction then says why and puts back what lapsed);
  // NotSupported where the store has no such path (the directory store,
  // whose transactions wait for no other machine): use RenewLease.
  virtual Status RenewHeldLease(int64_t id, std::string_view token,
                                int64_t lease_ms, int64_t* expires_ms,
                                int64_t* from_mono_ms) {
    (void)id, (void)token, (void)lease_ms, (void)expires_ms, (void)from_mono_ms;
    return Status::NotSupported("renewing a lease outside a transaction");
  }

  // The local deadline (SPEC §14), in CLOCK_MONOTONIC ms: until then every
  // claim this worker holds is sure to hold on the store's clock (its last
  // renewal that reached the store, plus the lease, less a margin); past
  // it, another host may be given them, so their attempts must have ended
  // (Executor::SetLocalDeadline). 0: claims never lapse by time (the
  // directory store, where only a worker's death frees them).
  virtual int64_t LocalDeadlineMs() const { return 0; }
  // Appends the ids of this worker's claims found lost since the last call:
  // they lapsed (the worker was frozen or cut off past its local deadline)
  // and were given to another. An attempt of one must never start here, and
  // one that ran was ended at the local deadline; its result is refused.
  // The local deadline does not move on while one is not taken, so a
  // caller holding claims calls this before each LocalDeadlineMs; nor is
  // its task claimed again by this worker until taken (the caller may
  // still hold the old attempt under the same id). After that, a caller
  // that still holds an attempt of it (running, being cancelled) passes
  // its id in ClaimFilter::skip_ids. Default:
  // none (a claim of the directory store is lost only with its worker).
  virtual void TakeLostClaims(std::vector<int64_t>* ids) { (void)ids; }
  // An IOError once this worker's liveness is lost for good (another worker
  // may act on its death): it claims nothing more, and its local deadline
  // never moves on again, so an attempt that has not begun never will.
  // Default: OK (the directory store's worker lives as long as its lock).
  virtual Status Liveness() const { return Status::OK(); }
  virtual const std::string& worker_id() const = 0;
  // How the location is shown to people (a database password removed).
  virtual std::string DisplayLocation() const = 0;
};

// The transitions of one Transact. Each applies at once (later calls in the
// same Txn see it) and becomes durable when the Transact commits. Reads see
// the state as the transaction changed it.
class StoreTxn : public StoreReads {
 public:
  virtual int64_t now_ms() const = 0;  // the store's clock
  // CLOCK_MONOTONIC ms of this machine no later than now_ms(): a lease
  // this transaction grants or renews runs from no earlier here (an agent's
  // local deadline). 0: the store does not say.
  virtual int64_t lease_from_mono_ms() const { return 0; }
  // The tasks this transaction put back before its callback ran; the
  // caller ends what the lost attempts of its host may have left running.
  virtual const Reclaimed& reclaimed() const = 0;

  // Submits a task unless one with the same <type, canonical inputs>
  // exists (a finally hook: unless its owner has one of that generation),
  // in which case *deduplicated and the existing id (task_deduplicated).
  // InvalidArgument if inputs are not JSON.
  virtual Status Submit(const NewTask& task, int64_t* id,
                        bool* deduplicated) = 0;
  // Claims up to filter.max eligible tasks (their attempt counted);
  // copies of them, as claimed, are appended to *claimed.
  virtual Status Claim(const ClaimFilter& filter,
                       std::vector<Task>* claimed) = 0;
  // Completes a task this worker (or an ActAs lease) holds, or, with
  // c.reused, a pending one; submits its children in the same batch.
  // Conflict when the claim was lost: nothing is written.
  virtual Status Complete(int64_t id, const Completion& c,
                          std::vector<int64_t>* child_ids) = 0;
  // Fails a held task: pending again (after retry_delay_ms) if retryable
  // and attempts remain, else failed. Conflict when the claim was lost.
  virtual Status Fail(int64_t id, const Failure& f, bool* will_retry) = 0;
  // Gives back a held task unfinished: pending, the attempt not counted.
  virtual Status Release(int64_t id, std::string_view reason) = 0;
  // Lets this transaction act for the holder of lease `token` on `id`.
  // Conflict "lease lost: ..." (WhyNotHeld) when that lease no longer holds
  // it; InvalidArgument when there is no task `id`.
  virtual Status ActAs(int64_t id, std::string_view token) = 0;
  // Extends the lease on `id` to now + lease_ms (lease_renewed).
  virtual Status RenewLease(int64_t id, std::string_view token,
                            int64_t lease_ms, int64_t* expires_ms) = 0;
  // Records that these held attempts started (their payload was handed to
  // a process or a handler), so that a later reclaim charges them
  // wherever it runs.
  virtual Status MarkStarted(const std::vector<int64_t>& ids) = 0;
  // The human gate (SPEC §10): records the answer of a pending or held
  // Prompt task once (Conflict if it has one).
  virtual Status Answer(int64_t id, std::string_view answer_json,
                        std::string_view source) = 0;
  // Records run_paused; the run's status becomes paused.
  virtual Status Pause(std::string_view waiting_json) = 0;
  // The tasks whose finally hook is due (succeeded, subtree settled, hook
  // not yet submitted at its generation), at most `max`, lowest id first.
  virtual Status DueHooks(size_t max, std::vector<Task>* owners) = 0;
  // Finishes the run (run_finished) if it is running and every task has
  // settled: failed if any task failed, else completed. *status: the run's
  // status after the call.
  virtual Status FinishIfSettled(int64_t duration_ms, RunStatus* status) = 0;
};

// Why a lease on `t` is not (or no longer) valid, the message of a refused
// lease (StoreTxn::ActAs, RenewLease): what became of the task — never
// taken, put back after its lease lapsed ("lease lost: ..."), timed out,
// given back, attempt N failed (reason), completed, held by another holder.
std::string WhyNotHeld(const Task& t);

// Whether `location` names a database rather than a directory.
bool IsDatabaseLocation(std::string_view location);

// The key <type, inputs> dedup compares (a hash of the step and the
// canonical inputs). InvalidArgument if `inputs` is not JSON.
Status DedupKey(std::string_view type, std::string_view inputs,
                std::string* key);

}  // namespace wizq

#endif  // WIZQ_QUEUE_STORE_H_
