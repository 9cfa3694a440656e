// PgStore: the contract's reads (each one statement of the committed
// state), events, WaitForChange (LISTEN/NOTIFY with a polling backstop),
// workers and the runs of the store.
#include <algorithm>
#include <chrono>
#include <thread>

#include "queue/pg/pg_location.h"
#include "queue/pg/pg_migrate.h"
#include "queue/pg/pg_store.h"
#include "queue/pg/pg_txn.h"

namespace wizq {
namespace {

// The poll that backs up LISTEN: a lost notification delays a waiter by
// at most this.
constexpr int kPollBackstopMs = 1000;

}  // namespace

Status PgReadRun(PgConn* conn, const std::string& quoted, int64_t run,
                 PgRun* out) {
  PgResult r;
  WIZQ_RETURN_IF_ERROR(
      conn->Exec(PgSchemaSql(std::string("SELECT ") + kPgRunColumns +
                                 " FROM {s}.runs r WHERE r.run = $1",
                             quoted),
                 {run}, &r));
  if (r.rows() == 0) {
    return Status::NotFound("run " + std::to_string(run) +
                            " is not in the store");
  }
  PgRunFromRow(r, 0, out);
  return Status::OK();
}

Status PgReadTask(PgConn* conn, const std::string& quoted, int64_t run,
                  int64_t id, Task* task) {
  PgResult r;
  WIZQ_RETURN_IF_ERROR(conn->Exec(
      PgSchemaSql(std::string("SELECT ") + kPgTaskColumns +
                      " FROM {s}.tasks t WHERE t.run = $1 AND t.task_id = $2",
                  quoted),
      {run, id}, &r));
  if (r.rows() == 0) {
    return Status::NotFound("the run has no task " + std::to_string(id));
  }
  PgTask row;
  PgTaskFromRow(r, 0, &row);
  *task = std::move(row.t);
  return Status::OK();
}

// Every field of the filter is one condition with its own parameter.
Status PgListTasks(PgConn* conn, const std::string& quoted, int64_t run,
                   const TaskFilter& f, std::vector<Task>* out) {
  out->clear();
  std::vector<PgParam> params = {run};
  std::string where = "t.run = $1";
  auto add = [&](const std::string& before, PgParam p,
                 const std::string& after = "") {
    params.push_back(std::move(p));
    where += " AND " + before + "$" + std::to_string(params.size()) + after;
  };
  if (!f.states.empty()) {
    std::vector<int64_t> states;
    for (TaskState s : f.states) states.push_back(static_cast<int>(s));
    add("t.state = ANY(", PgIntArray(states), "::smallint[])");
  }
  if (!f.steps.empty()) add("t.step = ANY(", PgArray(f.steps), "::text[])");
  if (f.hooks == TaskFilter::Hooks::kOnly) where += " AND t.origin = 3";
  if (f.hooks == TaskFilter::Hooks::kNone) where += " AND t.origin <> 3";
  if (f.parent_id >= 0) add("t.parent = ", f.parent_id);
  if (!f.error_reason.empty()) add("t.error_reason = ", f.error_reason);
  if (f.unanswered) where += " AND t.answer IS NULL";
  if (f.leased) where += " AND t.state = 1 AND t.lease_token IS NOT NULL";
  if (f.after_id > 0) add("t.task_id > ", f.after_id);
  std::string sql = std::string("SELECT ") +
                    (f.children ? kPgTaskColumns : kPgTaskColumnsNoChildren) +
                    " FROM {s}.tasks t WHERE " + where + " ORDER BY t.task_id";
  if (f.limit > 0) {
    params.push_back(f.limit);
    sql += " LIMIT $" + std::to_string(params.size());
  }
  PgResult r;
  WIZQ_RETURN_IF_ERROR(conn->Exec(PgSchemaSql(sql, quoted), params, &r));
  for (int i = 0; i < r.rows(); i++) {
    PgTask row;
    PgTaskFromRow(r, i, &row);
    out->push_back(std::move(row.t));
  }
  return Status::OK();
}

void PgCountsOf(const PgRun& run, RunCounts* c) {
  *c = RunCounts();
  for (int s = 0; s < 4; s++) c->by_state[s] = run.by_state[s];
  c->total = run.next_task - 1;
  c->reused = run.reused;
  c->imported = run.imported;
  c->adopted = run.info.adopted;
  c->leased = run.leased;
  c->hooks_due = run.hooks_due;
  c->all_settled = c->total > 0 && run.settled == c->total;
}

Status PgStore::GetRun(RunInfo* info) {
  std::lock_guard<std::mutex> guard(mu_);
  PgRun run;
  WIZQ_RETURN_IF_ERROR(
      OnSession([&] { return PgReadRun(conn_.get(), quoted_, run_, &run); }));
  *info = run.info;
  return Status::OK();
}

Status PgStore::GetTask(int64_t id, Task* task) {
  std::lock_guard<std::mutex> guard(mu_);
  return OnSession(
      [&] { return PgReadTask(conn_.get(), quoted_, run_, id, task); });
}

Status PgStore::ListTasks(const TaskFilter& f, std::vector<Task>* out) {
  std::lock_guard<std::mutex> guard(mu_);
  return OnSession(
      [&] { return PgListTasks(conn_.get(), quoted_, run_, f, out); });
}

Status PgStore::Counts(RunCounts* counts) {
  std::lock_guard<std::mutex> guard(mu_);
  PgRun run;
  WIZQ_RETURN_IF_ERROR(
      OnSession([&] { return PgReadRun(conn_.get(), quoted_, run_, &run); }));
  PgCountsOf(run, counts);
  return Status::OK();
}

Status PgStore::ReadEvents(int64_t after_seq, size_t max,
                           std::vector<EventRecord>* events) {
  events->clear();
  std::lock_guard<std::mutex> guard(mu_);
  PgResult r;
  const int64_t limit = max > static_cast<size_t>(INT64_MAX)
                            ? INT64_MAX
                            : static_cast<int64_t>(max);
  WIZQ_RETURN_IF_ERROR(OnSession([&] {
    return conn_->Exec(Sql("SELECT seq, body FROM {s}.events WHERE run = $1 "
                           "AND seq > $2 ORDER BY seq LIMIT $3"),
                       {run_, after_seq, limit}, &r);
  }));
  for (int i = 0; i < r.rows(); i++) {
    events->push_back({r.GetInt(i, "seq"), std::string(r.Get(i, "body"))});
  }
  return Status::OK();
}

// LISTEN first, then read the run's last seq, then wait for a
// notification (or the backstop poll): a commit between the read and the
// wait is still notified.
Status PgStore::WaitForChange(int64_t after_seq, int timeout_ms, int64_t* seq) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    {
      std::lock_guard<std::mutex> g(listen_mu_);
      if (listen_ == nullptr || listen_->lost()) {
        PgConnOptions o;
        o.application_name = "wizq listener";
        listen_.reset();
        if (PgConn::Open(options_.location, o, &listen_).ok() &&
            !listen_->Listen(schema_).ok()) {
          listen_.reset();  // polled instead until it can listen again
        }
      }
    }
    {
      std::lock_guard<std::mutex> guard(mu_);
      PgRun run;
      WIZQ_RETURN_IF_ERROR(OnSession(
          [&] { return PgReadRun(conn_.get(), quoted_, run_, &run); }));
      *seq = run.next_seq - 1;
    }
    if (*seq > after_seq) return Status::OK();
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      *seq = after_seq;
      return Status::OK();
    }
    const auto wait =
        std::min(left, std::chrono::milliseconds(kPollBackstopMs));
    std::lock_guard<std::mutex> g(listen_mu_);
    std::vector<PgNotification> got;
    if (listen_ == nullptr || !listen_->WaitForNotifications(wait, &got).ok()) {
      std::this_thread::sleep_for(
          std::min(wait, std::chrono::milliseconds(50)));
    }
  }
}

Status PgStore::Workers(std::vector<WorkerInfo>* workers) {
  workers->clear();
  std::lock_guard<std::mutex> guard(mu_);
  PgResult r;
  WIZQ_RETURN_IF_ERROR(OnSession([&] {
    return conn_->Exec(
        Sql("SELECT w.worker_id, r.run_id, w.host, w.pid, w.started_ms, " +
            PgWorkerAliveSql() +
            " AS alive FROM {s}.workers w JOIN {s}.runs r ON r.run = w.run "
            "WHERE w.run = $1 ORDER BY w.started_ms, w.worker_id"),
        {run_}, &r);
  }));
  for (int i = 0; i < r.rows(); i++) {
    WorkerInfo w;
    w.id = r.Get(i, "worker_id");
    w.run_id = r.Get(i, "run_id");
    HostId::Parse(r.Get(i, "host"), &w.host);
    w.pid = r.GetInt(i, "pid");
    w.started_ms = r.GetInt(i, "started_ms");
    w.alive = r.GetBool(i, "alive");
    workers->push_back(std::move(w));
  }
  return Status::OK();
}

// The runs of this run_id: the current one first, then the archived ones,
// newest first. A run's key is its row's number.
Status PgStore::ListRuns(std::vector<RunRef>* runs) {
  runs->clear();
  std::lock_guard<std::mutex> guard(mu_);
  PgResult r;
  WIZQ_RETURN_IF_ERROR(OnSession([&] {
    return conn_->Exec(
        Sql(std::string("SELECT ") + kPgRunColumns +
            " FROM {s}.runs r WHERE r.run_id = (SELECT run_id FROM {s}.runs "
            "WHERE run = $1) ORDER BY r.archived_at IS NOT NULL, r.run DESC"),
        {run_}, &r);
  }));
  for (int i = 0; i < r.rows(); i++) {
    PgRun run;
    PgRunFromRow(r, i, &run);
    RunRef ref;
    ref.run_id = run.info.run_id;
    ref.key = run.archived ? std::to_string(run.run) : "";
    ref.archived = run.archived;
    ref.status = run.info.status;
    ref.started_ms = run.info.started_ms;
    ref.finished_ms = run.info.finished_ms;
    runs->push_back(std::move(ref));
  }
  return Status::OK();
}

Status PgStore::OpenRun(const RunRef& ref, std::unique_ptr<Store>* out) {
  char* end = nullptr;
  const int64_t key = std::strtoll(ref.key.c_str(), &end, 10);
  if (ref.key.empty() || *end != '\0' || key <= 0) {
    return Status::InvalidArgument(
        "\"" + ref.key + "\" is not a run of the store " + DisplayLocation());
  }
  StoreOptions o = options_;
  o.mode = OpenMode::kReadOnly;
  PgConnOptions co;
  co.application_name = "wizq";
  std::unique_ptr<PgConn> conn;
  WIZQ_RETURN_IF_ERROR(PgConn::Open(o.location, co, &conn));
  std::unique_ptr<PgStore> store(new PgStore(o, std::move(conn)));
  PgRun run;
  WIZQ_RETURN_IF_ERROR(PgReadRun(store->conn_.get(), quoted_, key, &run));
  store->run_ = key;
  store->writable_ = Status::NotSupported("run " + ref.key +
                                          " of the store is opened read-only");
  *out = std::move(store);
  return Status::OK();
}

// Every run of the schema, with its live workers (their liveness locks).
Status PgStore::ListAll(const StoreOptions& o, bool archived,
                        std::vector<RunSummary>* runs) {
  runs->clear();
  std::unique_ptr<PgConn> conn;
  WIZQ_RETURN_IF_ERROR(Connect(o, "wizq runs", false, &conn));
  const std::string schema = SchemaOf(o);
  PgResult r;
  WIZQ_RETURN_IF_ERROR(conn->Exec(
      PgSchemaSql(
          std::string("SELECT ") + kPgRunColumns +
              ", (SELECT count(*) FROM {s}.workers w WHERE w.run = "
              "r.run AND " +
              PgWorkerAliveSql() +
              ") AS live FROM {s}.runs r WHERE $1::boolean OR r.archived_at "
              "IS NULL ORDER BY r.archived_at IS NOT NULL, r.run DESC",
          conn->QuoteIdentifier(schema)),
      {archived}, &r));
  for (int i = 0; i < r.rows(); i++) {
    PgRun run;
    PgRunFromRow(r, i, &run);
    RunSummary sum;
    sum.ref.run_id = run.info.run_id;
    sum.ref.key = run.archived ? std::to_string(run.run) : "";
    sum.ref.archived = run.archived;
    sum.ref.status = run.info.status;
    sum.ref.started_ms = run.info.started_ms;
    sum.ref.finished_ms = run.info.finished_ms;
    for (int k = 0; k < 4; k++) {
      sum.counts.by_state[k] = run.by_state[k];
      sum.counts.total += run.by_state[k];
    }
    sum.counts.reused = run.reused;
    sum.counts.imported = run.imported;
    sum.counts.leased = run.leased;
    sum.live_workers = r.GetInt(i, "live");
    runs->push_back(std::move(sum));
  }
  return Status::OK();
}

}  // namespace wizq
