// PgWork: the changes of one transaction of the PostgreSQL store, made as
// the directory store's QueueState makes them (queue/dir/state.cc), on rows.
// Internal to queue/pg/.
//
// A transaction of a run has locked the run's row (PgRun); the task rows it
// touches are read FOR UPDATE into a cache (Find), changed in memory by the
// events staged (Stage applies each event's rule: counters, settling,
// hooks), and written back by Flush together with the staged events, whose
// seqs follow the run's next_seq. Every row write is fenced by the state,
// attempt and claim token the row had when it was read: a write that
// matches no row is a Conflict and the transaction is rolled back.
// Nothing ever loads the whole run: settling walks a task's ancestors.
#ifndef WIZQ_QUEUE_PG_PG_WORK_H_
#define WIZQ_QUEUE_PG_PG_WORK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include "queue/events.h"
#include "queue/pg/pg_conn.h"
#include "queue/run_info.h"
#include "queue/task.h"
#include "util/status.h"

namespace wizq {

class PgConn;
class PgResult;

// The advisory lock spaces of the store (two-int form): a worker's
// liveness lock (session, held while it lives) and a run's (shared while
// Store::WhileCurrent runs; an archive takes it exclusively).
inline constexpr int32_t kPgWorkerLockSpace = 0x77697a77;  // "wizw"
inline constexpr int32_t kPgRunLockSpace = 0x77697a72;     // "wizr"
// How long a worker's claim holds without a renewal (its worker renews it
// every third of that).
inline constexpr int64_t kPgDefaultWorkerLeaseMs = 30000;

// A run's row, as its transaction holds it locked.
struct PgRun {
  int64_t run = 0;  // the row's key (RunRef::key, as decimal text)
  RunInfo info;
  int64_t next_seq = 1, next_task = 1;
  int64_t by_state[4] = {0, 0, 0, 0};
  int64_t settled = 0, reused = 0, imported = 0, leased = 0;
  int64_t hooks_due = 0, hooks_reopened = 0;
  // No pending task's id is below it (kept by PgWork::Flush, raised by
  // PgWork::RaisePendingFloor; then only the row's is exact).
  int64_t pending_floor = 1;
  int64_t held_floor = 1;  // the same for in-progress tasks (Reclaim)
  bool archived = false;
};

// A task's row: the contract's Task and what the store keeps beside it.
struct PgTask {
  Task t;
  std::string claim_token;  // every claim's fencing token; "" unless held
  int64_t claim_until_ms = 0;
  bool hook_due = false;
  // As the row was last read or written: the fence of the next write.
  bool stored = false;
  TaskState stored_state = TaskState::kPending;
  int stored_attempts = 0;
  std::string stored_token;
  bool dirty = false;
};

// SQL text with `{s}` standing for the quoted schema.
std::string PgSchemaSql(std::string_view sql, const std::string& quoted);
// A PostgreSQL array literal of `items` (text[] or bigint[] by the cast).
std::string PgArray(const std::vector<std::string>& items);
std::string PgIntArray(const std::vector<int64_t>& items);
// The select list of a task row (table alias t), and its decoder.
extern const char kPgTaskColumns[];
// The same with Task::children left empty (TaskFilter::children false).
extern const char kPgTaskColumnsNoChildren[];
// The FROM ... of a claim (queue/pg/pg_claim.cc), after SELECT
// kPgTaskColumns: $1 run, $2 now (ms), $3 above this id, $4 steps, $5 of
// them only answered, $6 hook steps, $7 below this id (0: any), $8 ids to
// skip, $9 how many, $10 this worker's host, $11 its liveness lock's key (0:
// not asked).
extern const char kPgClaimable[];
void PgTaskFromRow(const PgResult& r, int row, PgTask* out);
extern const char kPgRunColumns[];
void PgRunFromRow(const PgResult& r, int row, PgRun* out);
// RunInfo::from as the run's row keeps it (a JSON array of strings).
std::string PgFromSteps(const std::vector<std::string>& from);
// The database's clock in ms since the Unix epoch, as SQL.
inline constexpr std::string_view kPgNowMsSql =
    "floor(extract(epoch from clock_timestamp()) * 1000)::bigint";
// Whether the liveness lock of the worker in row `w` (of workers) is held,
// as an SQL condition.
std::string PgWorkerAliveSql();
// Reads task rows `ids` of `run` FOR UPDATE, in id order (`quoted`: the
// schema), without their children (Task::children): a transaction's rules
// keep counts (open_children), never the list. With a `worker`, only the
// rows among them that worker still holds by its own claim (not an
// agent's lease, not a claim given out again): the others' renewals never
// wait behind this transaction.
PgStatement PgTaskRowsStatement(const std::string& quoted, int64_t run,
                                const std::vector<int64_t>& ids,
                                const std::string& worker = "");

// The write of `run`'s row (`quoted`: the schema). With `raise_floor`,
// its pending_floor is raised to the run's first pending task at or above
// it (the end of the ids if none), read by the statement itself, after the
// rows written before it in the transaction (PgWork::RaisePendingFloor).
PgStatement PgRunWrite(const std::string& quoted, const PgRun& run,
                       bool raise_floor);

class PgWork {
 public:
  // `quoted`: the schema as an SQL identifier. `run` is locked.
  PgWork(PgConn* conn, std::string quoted, PgRun* run, int64_t now_ms);

  PgConn* conn() const { return conn_; }
  std::string Sql(std::string_view sql) const;
  int64_t now_ms() const { return now_ms_; }
  PgRun& run() { return *run_; }
  const PgRun& run() const { return *run_; }
  // The first error a Stage met (the transaction must not commit).
  const Status& error() const { return error_; }
  int64_t events_staged() const { return events_; }
  const std::string& last_line() const { return last_line_; }

  // Task `id`, locked and cached; *task is null when there is none.
  Status Find(int64_t id, PgTask** task);
  // The rows PgTaskRowsStatement read, into the cache.
  void CacheRows(const PgResult& r);
  // Task `id`'s row if it is cached (nullptr: not read yet).
  const PgTask* Cached(int64_t id) const {
    auto it = cache_.find(id);
    return it == cache_.end() ? nullptr : it->second.get();
  }
  // The task with dedup key `key` (0: none).
  Status FindByDedupKey(const std::string& key, int64_t* id);
  // A row a query read FOR UPDATE, cached unless it already is; returns
  // the cached one.
  PgTask* Cache(const PgTask& row);
  // Writes the changed rows and the run's row, then runs `also` (its
  // results in *also_results), in one round trip; with `events`, the
  // staged events first. A transaction's reads see its rows, never its
  // events: these wait for the commit's flush, one statement for all.
  Status Flush(std::vector<PgStatement> also = {},
               std::vector<PgResult>* also_results = nullptr,
               bool events = false);
  // Raises the run's pending_floor to its first pending task, in each
  // later write of the run's row (after the rows written with it).
  void RaisePendingFloor();
  // Lowers the run's floors to the rows about to be written (a retry, a
  // put-back make a task pending again).
  void LowerFloors();
  // Sets the run's held_floor to `id`, the first in-progress task.
  void SetHeldFloor(int64_t id);

  // Stages one event: encodes its line (seq and ts of this transaction)
  // and applies its rule to the rows, as QueueState::Apply does.
  template <typename E>
  Status Stage(const E& e) {
    if (!error_.ok()) return error_;
    std::string line = EncodeEventLine(run_->next_seq, now_ms_, e);
    Status s = Apply(e, now_ms_);
    if (!s.ok()) {
      error_ = s.Annotate("internal error staging " + std::string(E::kName));
      return error_;
    }
    run_->next_seq++;
    events_++;
    last_line_ = line;
    kinds_.emplace_back(E::kName);
    lines_.push_back(std::move(line));
    return Status::OK();
  }

  // Stage() of whichever event `event` holds (an import's, queue/import.h).
  Status StageAny(const Event& event) {
    return StageEvent(event, [this](const auto& e) { return Stage(e); });
  }
  // StageAny as the sink of the shared rules (queue/txn_rules.h).
  EventSink Sink() {
    return [this](const Event& e) { return StageAny(e); };
  }

 private:
  // queue/pg/pg_apply.cc: one rule per event kind.
  Status Apply(const RunStarted& e, int64_t ts);
  Status Apply(const RunResumed& e, int64_t ts);
  Status Apply(const QueueArchived& e, int64_t ts);
  Status Apply(const WorkerJoined&, int64_t) { return Status::OK(); }
  Status Apply(const WorkerLeft&, int64_t) { return Status::OK(); }
  Status Apply(const TaskSubmitted& e, int64_t ts);
  Status Apply(const TaskDeduplicated&, int64_t) { return Status::OK(); }
  Status Apply(const TaskClaimed& e, int64_t ts);
  Status Apply(const TaskCompleted& e, int64_t ts);
  Status Apply(const TaskFailed& e, int64_t ts);
  Status Apply(const TaskReset& e, int64_t ts);
  Status Apply(const RunFinished& e, int64_t ts);
  Status Apply(const TaskRetried& e, int64_t ts);
  Status Apply(const RunImported&, int64_t) { return Status::OK(); }
  Status Apply(const TaskAnswered& e, int64_t ts);
  Status Apply(const RunPaused& e, int64_t ts);
  Status Apply(const LeaseRenewed& e, int64_t ts);
  Status Apply(const TaskAdopted& e, int64_t ts);
  Status Apply(const TaskStarted& e, int64_t ts);
  Status Require(int64_t id, TaskState s, std::string_view what, PgTask** task);
  Status AddTask(PgTask* t);
  void SetState(PgTask* t, TaskState s);
  Status Settle(PgTask* t);
  Status Unsettle(PgTask* t);
  void UpdateHookDue(PgTask* t);
  Status MarkHooksStale(int64_t from);
  PgStatement TaskWrite(const PgTask& t) const;
  Status Send(std::vector<PgStatement>* batch, size_t rows_from,
              std::vector<PgTask*>* written, std::vector<PgResult>* results);
  void LowerFloors(const Task& t);

  PgConn* conn_;
  std::string quoted_;
  PgRun* run_;
  int64_t now_ms_;
  Status error_;
  std::map<int64_t, std::unique_ptr<PgTask>> cache_;
  // The cached tasks by dedup key: a submit of 10^5 tasks in one
  // transaction looked each key up among all of them (50,000 took 43 s).
  std::unordered_map<std::string, int64_t> keys_;
  std::vector<std::string> kinds_, lines_;  // staged, not yet written
  int64_t events_ = 0;
  std::string last_line_;
  bool run_dirty_ = false;    // the run's row changed without an event
  bool raise_floor_ = false;  // RaisePendingFloor was asked for
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_PG_PG_WORK_H_
