// PgWork: reading task rows into the transaction's cache, and writing the
// staged events and the changed rows back (fenced).
#include "queue/pg/pg_work.h"

#include "queue/pg/pg_conn.h"

namespace wizq {

PgWork::PgWork(PgConn* conn, std::string quoted, PgRun* run, int64_t now_ms)
    : conn_(conn), quoted_(std::move(quoted)), run_(run), now_ms_(now_ms) {}

std::string PgWork::Sql(std::string_view sql) const {
  return PgSchemaSql(sql, quoted_);
}

Status PgWork::Find(int64_t id, PgTask** task) {
  *task = nullptr;
  auto it = cache_.find(id);
  if (it != cache_.end()) {
    *task = it->second.get();
    return Status::OK();
  }
  if (id < 1 || id >= run_->next_task) return Status::OK();
  PgResult r;
  const PgStatement read = PgTaskRowsStatement(quoted_, run_->run, {id});
  // Planned for its one id (a generic plan of `= ANY` may scan the run).
  WIZQ_RETURN_IF_ERROR(conn_->ExecPlanned(read.sql, read.params, &r));
  CacheRows(r);
  auto found = cache_.find(id);
  if (found != cache_.end()) *task = found->second.get();
  return Status::OK();
}

PgStatement PgTaskRowsStatement(const std::string& quoted, int64_t run,
                                const std::vector<int64_t>& ids,
                                const std::string& worker) {
  std::string sql = std::string("SELECT ") + kPgTaskColumnsNoChildren +
                    " FROM {s}.tasks t WHERE t.run = $1 AND t.task_id = "
                    "ANY($2::bigint[])";
  std::vector<PgParam> params = {run, PgIntArray(ids)};
  if (!worker.empty()) {
    sql += " AND t.state = 1 AND t.claimed_by = $3 AND t.lease_token IS NULL";
    params.push_back(worker);
  }
  sql += " ORDER BY t.task_id FOR UPDATE OF t";
  return {PgSchemaSql(sql, quoted), std::move(params), true};
}

void PgWork::CacheRows(const PgResult& r) {
  for (int i = 0; i < r.rows(); i++) {
    PgTask row;
    PgTaskFromRow(r, i, &row);
    Cache(row);
  }
}

Status PgWork::FindByDedupKey(const std::string& key, int64_t* id) {
  auto cached = keys_.find(key);
  if (cached != keys_.end()) {
    *id = cached->second;
    return Status::OK();
  }
  *id = 0;
  PgResult r;
  WIZQ_RETURN_IF_ERROR(
      conn_->ExecPlanned(Sql("SELECT task_id FROM {s}.tasks WHERE run = $1 "
                             "AND dedup_key = $2"),
                         {run_->run, key}, &r));
  if (r.rows() > 0) *id = r.GetInt(0, "task_id");
  return Status::OK();
}

PgTask* PgWork::Cache(const PgTask& row) {
  auto& slot = cache_[row.t.id];
  if (!slot) {
    slot = std::make_unique<PgTask>(row);
    // The first cached task of a key (a key never changes; none, an
    // import's duplicate, is never deduplicated).
    if (!row.t.dedup_key.empty()) {
      auto [it, fresh] = keys_.emplace(row.t.dedup_key, row.t.id);
      if (!fresh && row.t.id < it->second) it->second = row.t.id;
    }
  }
  return slot.get();
}

// The events and the run's row (at commit), the rows, then `also` (a
// claim query; a notification at commit), in one round trip for up to
// kPgPipelineChunk statements. Each chunk is sent once made: built first,
// the 10^5 rows of a fan-out's submits left the session idle in its
// transaction long enough (2 s under TSan) for the server to end it.
Status PgWork::Flush(std::vector<PgStatement> also,
                     std::vector<PgResult>* also_results, bool events) {
  if (!error_.ok()) return error_;
  std::vector<PgStatement> batch;
  const bool changed = events && !lines_.empty();
  if (changed) {
    const int64_t first = run_->next_seq - static_cast<int64_t>(lines_.size());
    batch.push_back(
        {Sql("INSERT INTO {s}.events (run, seq, kind, body) SELECT $1, $2 + "
             "x.i - 1, x.k, x.b FROM unnest($3::text[], $4::text[]) WITH "
             "ORDINALITY AS x(k, b, i)"),
         {run_->run, first, PgArray(kinds_), PgArray(lines_)}});
    kinds_.clear();
    lines_.clear();
  }
  size_t rows_from = batch.size();
  std::vector<PgTask*> written;  // batch[rows_from...]
  for (auto& [id, t] : cache_) {
    if (!t->dirty) continue;
    batch.push_back(TaskWrite(*t));
    written.push_back(t.get());
    LowerFloors(t->t);
    if (batch.size() == kPgPipelineChunk) {
      WIZQ_RETURN_IF_ERROR(Send(&batch, rows_from, &written, nullptr));
      rows_from = 0;
    }
  }
  // The run's row once, at commit: no statement of the transaction reads
  // it back (its counters and floors are in run_ meanwhile).
  if (events && (changed || run_dirty_)) {
    batch.push_back(PgRunWrite(quoted_, *run_, raise_floor_));
    run_dirty_ = false;
  }
  const size_t also_from = batch.size();
  for (PgStatement& s : also) batch.push_back(std::move(s));
  std::vector<PgResult> results;
  WIZQ_RETURN_IF_ERROR(Send(&batch, rows_from, &written, &results));
  if (also_results != nullptr) {
    also_results->clear();
    for (size_t i = also_from; i < results.size(); i++) {
      also_results->push_back(std::move(results[i]));
    }
  }
  return Status::OK();
}

// Sends *batch, whose statements from `rows_from` write the rows
// *written, and empties both. An update's fence: the row is as this
// transaction read or last wrote it (an insert of a row already there
// failed the pipeline instead).
Status PgWork::Send(std::vector<PgStatement>* batch, size_t rows_from,
                    std::vector<PgTask*>* written,
                    std::vector<PgResult>* results) {
  if (batch->empty()) return Status::OK();
  std::vector<PgResult> answers;
  WIZQ_RETURN_IF_ERROR(conn_->ExecPipeline(*batch, &answers));
  batch->clear();
  for (size_t i = 0; i < written->size(); i++) {
    PgTask* row = (*written)[i];
    if (answers[rows_from + i].affected_rows() != 1) {
      return Status::Conflict("task " + std::to_string(row->t.id) +
                              " changed under this transaction (its claim "
                              "was lost): nothing was written");
    }
    row->stored = true;
    row->stored_state = row->t.state;
    row->stored_attempts = row->t.attempts;
    row->stored_token = row->claim_token;
    row->dirty = false;
  }
  written->clear();
  if (results != nullptr) *results = std::move(answers);
  return Status::OK();
}

namespace {

PgParam OrNull(const std::string& s) {
  return s.empty() ? PgParam(nullptr) : PgParam(s);
}

// The columns a transition may change, $3 on ($1, $2: run and task id).
std::vector<PgParam> MutableColumns(const PgTask& row, int64_t run) {
  const Task& t = row.t;
  return {run,
          t.id,
          static_cast<int>(t.state),
          t.attempts,
          t.max_attempts,
          t.started,
          t.claimed_by,
          t.claim_host,
          OrNull(row.claim_token),
          row.claim_until_ms,
          OrNull(t.lease_token),
          t.lease_expires_ms,
          t.agent,
          t.timeout_ms,
          t.deadline_ms,
          t.retry_on_timeout,
          t.retry_at_ms,
          t.error_reason,
          t.error_message,
          t.updated_ms,
          t.finally_task,
          t.hook_stale,
          t.reused_from,
          OrNull(t.answer),
          t.answer_source,
          t.open_children,
          t.settled_counted,
          row.hook_due};
}

constexpr char kMutableNames[] =
    "state, attempt, max_attempts, started, claimed_by, claim_host, "
    "claim_token, claim_until_ms, lease_token, lease_expires_ms, agent, "
    "timeout_ms, deadline_ms, retry_on_timeout, retry_at_ms, error_reason, "
    "error_message, updated_ms, finally_task, hook_stale, reused_from, "
    "answer, answer_source, open_children, settled_counted, hook_due";

}  // namespace

PgStatement PgWork::TaskWrite(const PgTask& row) const {
  std::vector<PgParam> p = MutableColumns(row, run_->run);
  const Task& t = row.t;
  if (!row.stored) {
    for (PgParam v : std::vector<PgParam>{
             t.parent_id, t.type, t.inputs, static_cast<int>(t.origin),
             OrNull(t.dedup_key), t.created_ms, t.has_finally, t.finally_for,
             t.generation}) {
      p.push_back(std::move(v));
    }
    std::string values;
    for (size_t i = 1; i <= p.size(); i++) {
      values += (i > 1 ? ", $" : "$") + std::to_string(i);
    }
    return {Sql(std::string("INSERT INTO {s}.tasks (run, task_id, ") +
                kMutableNames +
                ", parent, step, inputs, origin, dedup_key, created_ms, "
                "has_finally, finally_for, generation) VALUES (" +
                values + ")"),
            std::move(p)};
  }
  // The fence: the row is as this transaction read or last wrote it.
  p.push_back(static_cast<int>(row.stored_state));
  p.push_back(row.stored_attempts);
  p.push_back(OrNull(row.stored_token));
  const size_t fence = p.size() - 2;
  std::string set;
  size_t n = 3;
  const std::string names = kMutableNames;
  for (size_t pos = 0; pos < names.size();) {
    size_t end = names.find(", ", pos);
    if (end == std::string::npos) end = names.size();
    if (!set.empty()) set += ", ";
    set += names.substr(pos, end - pos) + " = $" + std::to_string(n++);
    pos = end + 2;
  }
  return {Sql("UPDATE {s}.tasks SET " + set +
              " WHERE run = $1 AND task_id = $2 AND state = $" +
              std::to_string(fence) + " AND attempt = $" +
              std::to_string(fence + 1) +
              " AND claim_token IS NOT DISTINCT FROM $" +
              std::to_string(fence + 2)),
          std::move(p)};
}

void PgWork::LowerFloors() {
  for (auto& [id, t] : cache_) {
    if (t->dirty) LowerFloors(t->t);
  }
}

// A task written pending or in progress below the run's floors lowers
// them (a reclaim, a retry).
void PgWork::LowerFloors(const Task& t) {
  if (t.state == TaskState::kPending && t.id < run_->pending_floor) {
    run_->pending_floor = t.id;
    run_dirty_ = true;
  }
  if (t.state == TaskState::kInProgress && t.id < run_->held_floor) {
    run_->held_floor = t.id;
    run_dirty_ = true;
  }
}

PgStatement PgRunWrite(const std::string& quoted, const PgRun& r,
                       bool raise_floor) {
  const RunInfo& i = r.info;
  // Its generic plan reads tasks_ready from the floor (pg_plan_test).
  const std::string floor =
      raise_floor ? "COALESCE((SELECT t.task_id FROM {s}.tasks t WHERE t.run "
                    "= $1 AND t.state = 0 AND t.task_id >= $21 ORDER BY "
                    "t.task_id LIMIT 1), $9)"
                  : "$21";
  return {
      PgSchemaSql(
          "UPDATE {s}.runs SET status = $2, finished_ms = $3, resumes = $4, "
          "previous_run = $5, no_reuse = $6, from_steps = $7, next_seq = $8, "
          "next_task = $9, n_pending = $10, n_in_progress = $11, n_done = "
          "$12, n_failed = $13, n_settled = $14, n_reused = $15, n_imported "
          "= $16, n_adopted = $17, n_leased = $18, hooks_due = $19, "
          "hooks_reopened = $20, pending_floor = " +
              floor + ", held_floor = $22 WHERE run = $1",
          quoted),
      {r.run,
       static_cast<int>(i.status),
       i.finished_ms,
       i.resumes,
       i.previous_run,
       i.no_reuse,
       PgFromSteps(i.from),
       r.next_seq,
       r.next_task,
       r.by_state[0],
       r.by_state[1],
       r.by_state[2],
       r.by_state[3],
       r.settled,
       r.reused,
       r.imported,
       i.adopted,
       r.leased,
       r.hooks_due,
       r.hooks_reopened,
       r.pending_floor,
       r.held_floor}};
}

void PgWork::SetHeldFloor(int64_t id) {
  if (id == run_->held_floor) return;
  run_->held_floor = id;
  run_dirty_ = true;
}

// The first pending task at or above the floor (the end of the ids if
// none) becomes the floor: the dead index entries below it, which an old
// snapshot keeps from vacuum, are walked over once here and never again
// by a claim. Computed by the run's row's write (PgRunWrite), after the
// rows written with it: no round trip of its own.
void PgWork::RaisePendingFloor() {
  raise_floor_ = true;
  run_dirty_ = true;
}

}  // namespace wizq
