// PgStore: opening a run by OpenMode (SPEC §5 on PostgreSQL, §14): start
// a fresh run, resume or join the current run of the run_id (unless
// StoreOptions::admit refuses this worker), archive an older-format or
// --fresh one (its row kept, archived_at set), attach, or look only; the
// worker's registration and liveness lock.
#include <unistd.h>

#include <algorithm>

#include "fs/env.h"
#include "queue/host.h"  // NewWorkerId
#include "queue/import.h"
#include "queue/pg/pg_location.h"
#include "queue/pg/pg_migrate.h"
#include "queue/pg/pg_store.h"
#include "queue/pg/pg_txn.h"
#include "queue/run_info.h"

namespace wizq {

Status PgStore::Connect(const StoreOptions& o, const char* application,
                        bool create, std::unique_ptr<PgConn>* conn) {
  const std::string schema = SchemaOf(o);
  WIZQ_RETURN_IF_ERROR(ValidatePgSchemaName(schema));
  WIZQ_RETURN_IF_ERROR(
      PgConn::Open(o.location, SessionOptions(o, application), conn));
  PgSchema s(conn->get(), schema);
  if (create) return s.Open(o.location);
  int version = 0;
  WIZQ_RETURN_IF_ERROR(s.ReadVersion(&version));
  if (version == 0) {
    return Status::NotFound("no wizq run in the store " +
                            RedactPgLocation(o.location) + " (schema \"" +
                            schema + "\" does not exist)");
  }
  return s.Check(o.location);
}

Status PgStore::Open(const StoreOptions& o, std::unique_ptr<Store>* out,
                     OpenReport* report) {
  OpenReport local;
  if (report == nullptr) report = &local;
  *report = OpenReport();
  std::unique_ptr<PgConn> conn;
  const bool looks =
      o.mode == OpenMode::kReadOnly || o.mode == OpenMode::kAttach;
  WIZQ_RETURN_IF_ERROR(Connect(o, "wizq", !looks, &conn));
  std::unique_ptr<PgStore> store(new PgStore(o, std::move(conn)));
  if (o.mode != OpenMode::kReadOnly) {
    HostId host = o.host;
    if (host.empty()) {
      Env* env = o.env ? o.env : Env::Posix();
      WIZQ_RETURN_IF_ERROR(HostId::Current(env, o.install_dir, &host));
    }
    store->host_key_ = host.Key();
  }
  // Two fresh starts of one run_id at once: one inserts the run, the
  // other finds it on its next try.
  Status st;
  for (int attempt = 0; attempt < 3; attempt++) {
    *report = OpenReport();
    st = store->OpenByMode(report);
    const PgErrorKind kind = store->conn_->last_error().kind;
    if (store->conn_->in_transaction() && !store->conn_->lost()) {
      store->conn_->Rollback().IgnoreError();  // nothing of a failed open
    }
    if (st.ok() || kind != PgErrorKind::kUniqueViolation) break;
  }
  WIZQ_RETURN_IF_ERROR(st);
  *out = std::move(store);
  return Status::OK();
}

// The current (not archived) run of the run_id, locked unless the store is
// opened read-only or for leases only (a reader or an agent's heartbeat
// must not wait for the workers' transactions, which hold the row: `wizq
// status` on a busy run); with no run_id, the latest current run.
Status PgStore::FindCurrent(PgRun* run, bool* found) {
  PgResult r;
  const std::string cols = std::string("SELECT ") + kPgRunColumns;
  const bool looks =
      options_.mode == OpenMode::kReadOnly ||
      (options_.mode == OpenMode::kAttach && options_.leases_only);
  const std::string lock = looks ? "" : " FOR UPDATE";
  if (options_.run_id.empty()) {
    WIZQ_RETURN_IF_ERROR(
        conn_->Exec(Sql(cols +
                        " FROM {s}.runs r WHERE r.archived_at IS NULL ORDER BY "
                        "r.run DESC LIMIT 1" +
                        lock),
                    {}, &r));
  } else {
    WIZQ_RETURN_IF_ERROR(conn_->Exec(
        Sql(cols +
            " FROM {s}.runs r WHERE r.run_id = $1 AND r.archived_at "
            "IS NULL" +
            lock),
        {options_.run_id}, &r));
  }
  *found = r.rows() > 0;
  if (*found) PgRunFromRow(r, 0, run);
  return Status::OK();
}

Status PgStore::OpenByMode(OpenReport* report) {
  WIZQ_RETURN_IF_ERROR(conn_->Begin());
  PgRun run;
  bool found = false;
  WIZQ_RETURN_IF_ERROR(FindCurrent(&run, &found));
  const OpenMode mode = options_.mode;
  if (mode == OpenMode::kReadOnly || mode == OpenMode::kAttach) {
    if (!found) {
      const std::string id =
          options_.run_id.empty() ? "" : options_.run_id + " ";
      return Status::NotFound(
          "no wizq run " + id + "in the store " + DisplayLocation() +
          " (schema \"" + SchemaOf(options_) + "\")" +
          (mode == OpenMode::kAttach ? " to attach to (start one with wizq run)"
                                     : ""));
    }
    run_ = run.run;
    if (mode == OpenMode::kAttach) return AttachRun(&run, report);
    writable_ = Status::NotSupported("the store was opened read-only");
    report->action = OpenAction::kReadOnly;
    return conn_->Rollback();
  }
  if (!found) return StartFresh(nullptr, "", report);
  std::string reason;
  const RunInfo& info = run.info;
  if (info.format_version > kRunFormatVersion) {
    return Status::NotSupported("run " + info.run_id +
                                " in the store was written by a newer wizq "
                                "(format version " +
                                std::to_string(info.format_version) +
                                "): upgrade wizq; the run was left untouched");
  }
  if (info.format_version < kRunFormatVersion) {
    reason = "older format version " + std::to_string(info.format_version);
  } else if (mode == OpenMode::kFresh) {
    reason = "--fresh";
  } else if (options_.admit) {
    // A worker whose workflow, input or step files differ is refused
    // before it writes anything (Open rolls back): the run is other
    // workers' too.
    WIZQ_RETURN_IF_ERROR(options_.admit(info));
  }
  if (reason.empty()) return ResumeRun(&run, report);
  WIZQ_RETURN_IF_ERROR(ArchiveRun(run, reason));
  report->archived_to = std::to_string(run.run);
  report->archive_reason = reason;
  report->archived_unfinished =
      info.status != RunStatus::kCompleted && info.status != RunStatus::kFailed;
  return StartFresh(&run, reason, report);
}

Status PgStore::StartFresh(const PgRun* archived, const std::string& reason,
                           OpenReport* report) {
  PgResult r;
  // A new run of a run_id never starts in its archived run's millisecond.
  for (int i = 0; i < 50; i++) {
    WIZQ_RETURN_IF_ERROR(
        conn_->Exec("SELECT " + std::string(kPgNowMsSql) + " AS now", {}, &r));
    if (archived == nullptr || r.GetInt(0, "now") > archived->info.started_ms) {
      break;
    }
    usleep(1000);
  }
  const int64_t now = r.GetInt(0, "now");
  WIZQ_RETURN_IF_ERROR(conn_->Exec(
      Sql(std::string("INSERT INTO {s}.runs AS r (run_id, format, "
                      "install_dir, workflow, def_files, input, "
                      "wizq_version, started_ms) VALUES ($1, $2, $3, $4, "
                      "$5, $6, $7, $8) "
                      "RETURNING ") +
          kPgRunColumns),
      {options_.run_id, kRunFormatVersion, options_.install_dir,
       options_.workflow_json, options_.def_files, options_.entry_input,
       options_.wizq_version, now},
      &r));
  PgRun run;
  PgRunFromRow(r, 0, &run);
  run_ = run.run;
  WIZQ_RETURN_IF_ERROR(Register(run.run));
  PgWork w(conn_.get(), quoted_, &run, now);
  RunStarted started;
  started.format = kRunFormatVersion;
  started.run_id = options_.run_id;
  started.install_dir = options_.install_dir;
  started.wizq_version = options_.wizq_version;
  started.pid = getpid();
  started.input = options_.entry_input;
  started.workflow = options_.workflow_json;
  WIZQ_RETURN_IF_ERROR(w.Stage(started));
  if (archived != nullptr) {
    const std::string key = std::to_string(archived->run);
    QueueArchived e{reason, key, options_.no_reuse, options_.from};
    WIZQ_RETURN_IF_ERROR(w.Stage(e));
  }
  WIZQ_RETURN_IF_ERROR(w.Stage(WorkerJoined{worker_id_, getpid()}));
  PgStoreTxn txn(this, &w, &reclaimed_, quoted_);
  for (const NewTask& t : options_.initial_tasks) {
    int64_t id = 0;
    bool dup = false;
    WIZQ_RETURN_IF_ERROR(txn.Submit(t, &id, &dup));
  }
  if (options_.import != nullptr) {
    WIZQ_RETURN_IF_ERROR(StageImport(
        *options_.import, now, [&w](const Event& e) { return w.StageAny(e); }));
  }
  report->tasks_pending = run.by_state[static_cast<int>(TaskState::kPending)];
  if (options_.retry_failed) WIZQ_RETURN_IF_ERROR(StageRetries(&w, report));
  WIZQ_RETURN_IF_ERROR(Commit(&w));
  report->action = OpenAction::kStartedFresh;
  return Status::OK();
}

Status PgStore::ResumeRun(PgRun* run, OpenReport* report) {
  run_ = run->run;
  const auto count = [&](TaskState s) {
    return run->by_state[static_cast<int>(s)];
  };
  report->tasks_pending = count(TaskState::kPending);
  report->tasks_done = count(TaskState::kDone);
  const RunStatus status = run->info.status;
  if ((status == RunStatus::kCompleted || status == RunStatus::kFailed) &&
      !(options_.retry_failed && count(TaskState::kFailed) > 0)) {
    report->action = OpenAction::kFinished;
    writable_ = Status::InvalidArgument("run " + run->info.run_id +
                                        " is finished: nothing changes it");
    return conn_->Rollback();
  }
  std::vector<WorkerInfo> live;
  WIZQ_RETURN_IF_ERROR(LiveWorkers(run->run, &live));
  const bool join = !live.empty();
  WIZQ_RETURN_IF_ERROR(Register(run->run));
  PgResult r;
  WIZQ_RETURN_IF_ERROR(
      conn_->Exec("SELECT " + std::string(kPgNowMsSql) + " AS now", {}, &r));
  PgWork w(conn_.get(), quoted_, run, r.GetInt(0, "now"));
  WIZQ_RETURN_IF_ERROR(Reclaim(&w, &reclaimed_));
  report->tasks_reset = static_cast<int64_t>(reclaimed_.reset.size());
  report->tasks_lost = static_cast<int64_t>(reclaimed_.lost.size());
  report->tasks_adopted = static_cast<int64_t>(reclaimed_.adopt.size());
  report->tasks_pending = count(TaskState::kPending);
  if (!join) {
    RunResumed resumed;
    resumed.tasks_pending = report->tasks_pending;
    resumed.tasks_done = report->tasks_done;
    resumed.tasks_reset = report->tasks_reset;
    resumed.tasks_lost = report->tasks_lost;
    resumed.tasks_adopted = report->tasks_adopted;
    WIZQ_RETURN_IF_ERROR(w.Stage(resumed));
  }
  WIZQ_RETURN_IF_ERROR(w.Stage(WorkerJoined{worker_id_, getpid()}));
  if (options_.retry_failed) WIZQ_RETURN_IF_ERROR(StageRetries(&w, report));
  WIZQ_RETURN_IF_ERROR(Commit(&w));
  report->action = join ? OpenAction::kJoined : OpenAction::kResumed;
  return Status::OK();
}

// Attaching never starts, resumes or archives: one more worker, which puts
// back what lost holders held; for leases only, a look at the run.
Status PgStore::AttachRun(PgRun* run, OpenReport* report) {
  report->tasks_pending = run->by_state[static_cast<int>(TaskState::kPending)];
  report->tasks_done = run->by_state[static_cast<int>(TaskState::kDone)];
  if (run->info.status == RunStatus::kCompleted ||
      run->info.status == RunStatus::kFailed) {
    report->action = OpenAction::kFinished;
    writable_ = Status::InvalidArgument("run " + run->info.run_id +
                                        " is finished: nothing changes it");
    return conn_->Rollback();
  }
  // Holding leases only, it has nothing to register nor to put back
  // first (its every transaction does) and does not wait for the row.
  if (options_.leases_only) {
    report->action = OpenAction::kAttached;
    return conn_->Rollback();
  }
  WIZQ_RETURN_IF_ERROR(Register(run->run));
  PgResult r;
  WIZQ_RETURN_IF_ERROR(
      conn_->Exec("SELECT " + std::string(kPgNowMsSql) + " AS now", {}, &r));
  PgWork w(conn_.get(), quoted_, run, r.GetInt(0, "now"));
  WIZQ_RETURN_IF_ERROR(Reclaim(&w, &reclaimed_));
  report->tasks_reset = static_cast<int64_t>(reclaimed_.reset.size());
  report->tasks_lost = static_cast<int64_t>(reclaimed_.lost.size());
  report->tasks_pending = run->by_state[static_cast<int>(TaskState::kPending)];
  WIZQ_RETURN_IF_ERROR(w.Stage(WorkerJoined{worker_id_, getpid()}));
  WIZQ_RETURN_IF_ERROR(Commit(&w));
  report->action = OpenAction::kAttached;
  return Status::OK();
}

// Refused while the run has live workers; what its attempts left running
// on this host is ended first; a WhileCurrent holder is waited for.
Status PgStore::ArchiveRun(const PgRun& run, const std::string& reason) {
  std::vector<WorkerInfo> live;
  WIZQ_RETURN_IF_ERROR(LiveWorkers(run.run, &live));
  if (!live.empty()) {
    std::string pids;
    for (const WorkerInfo& w : live) {
      pids += (pids.empty() ? "pid " : ", pid ") + std::to_string(w.pid);
    }
    return Status::Busy("run " + run.info.run_id + " in the store " +
                        DisplayLocation() + " still has live workers (" + pids +
                        "); it cannot be replaced (" + reason +
                        ") until they finish or stop");
  }
  if (options_.local.end_orphan) {
    std::vector<Task> held;
    TaskFilter f;
    f.states = {TaskState::kInProgress};
    WIZQ_RETURN_IF_ERROR(PgListTasks(conn_.get(), quoted_, run.run, f, &held));
    for (const Task& t : held) {
      if (!OnThisHost(t.claim_host)) continue;  // its processes are not here
      Status s = options_.local.end_orphan(t);
      if (!s.ok()) {
        return s.Annotate("cannot archive the previous run (" + reason +
                          ") while task " + std::to_string(t.id) +
                          " of it still runs");
      }
    }
  }
  WIZQ_RETURN_IF_ERROR(
      conn_->Exec("SELECT pg_advisory_xact_lock($1::int4, $2::int4)",
                  {kPgRunLockSpace, static_cast<int32_t>(run.run)}));
  return conn_->Exec(
      Sql("UPDATE {s}.runs SET archived_at = now() WHERE run = $1"), {run.run});
}

// `wizq run --retry-failed`: each failed task pending again with a fresh
// budget (task_retried), as DirQueue::StageRetries.
Status PgStore::StageRetries(PgWork* w, OpenReport* report) {
  PgResult r;
  WIZQ_RETURN_IF_ERROR(
      conn_->Exec(Sql(std::string("SELECT ") + kPgTaskColumns +
                      " FROM {s}.tasks t WHERE t.run = $1 AND t.state = 3 "
                      "ORDER BY t.task_id FOR UPDATE OF t"),
                  {w->run().run}, &r));
  for (int i = 0; i < r.rows(); i++) {
    PgTask row;
    PgTaskFromRow(r, i, &row);
    const Task& t = w->Cache(row)->t;
    const int budget = std::max(
        1, options_.retry_budget ? options_.retry_budget(t) : t.max_attempts);
    const std::string error = t.error_reason;
    TaskRetried e;
    e.id = t.id;
    e.reason = "retry_failed";
    e.error = error;
    e.max_attempts = static_cast<int64_t>(t.attempts) + budget;
    WIZQ_RETURN_IF_ERROR(w->Stage(e));
  }
  report->tasks_retried = r.rows();
  report->tasks_pending =
      w->run().by_state[static_cast<int>(TaskState::kPending)];
  return Status::OK();
}

// This process becomes a worker of `run`: its liveness lock on a session
// of its own (taken before its row is visible, so that a row without a
// held lock is a dead worker), then the renewals of its claims.
Status PgStore::Register(int64_t run) {
  proof_mono_ms_ = MonoMs();  // its claims all come later: a proof of life
  WIZQ_RETURN_IF_ERROR(PgConn::Open(
      options_.location, SessionOptions(options_, "wizq worker"), &live_));
  worker_id_ = NewWorkerId();
  bool locked = false;
  for (int i = 0; i < 16 && !locked; i++) {  // a cycled key may be held
    PgResult r;
    WIZQ_RETURN_IF_ERROR(
        live_->Exec(Sql("SELECT nextval('{s}.worker_lock_keys')::int AS key, "
                        "pg_postmaster_start_time()::text AS up"),
                    {}, &r));
    lock_key_ = static_cast<int32_t>(r.GetInt(0, "key"));
    server_up_ = r.Get(0, "up");
    WIZQ_RETURN_IF_ERROR(
        live_->TryAdvisoryLock(kPgWorkerLockSpace, lock_key_, &locked));
  }
  if (!locked) return Status::Busy("no free worker lock key in the store");
  WIZQ_RETURN_IF_ERROR(live_->Exec(
      Sql("INSERT INTO {s}.workers (worker_id, run, host, pid, backend_pid, "
          "lock_key, started_ms) VALUES ($1, $2, $3, $4, $5, $6, " +
          std::string(kPgNowMsSql) + ")"),
      {worker_id_, run, host_key_, static_cast<int64_t>(getpid()),
       live_->backend_pid(), lock_key_}));
  renewer_ = std::thread([this] { RenewLoop(); });
  return Status::OK();
}

// The workers of `run` other than this one whose liveness lock is held.
Status PgStore::LiveWorkers(int64_t run, std::vector<WorkerInfo>* live) {
  live->clear();
  PgResult r;
  WIZQ_RETURN_IF_ERROR(conn_->Exec(
      Sql("SELECT w.worker_id, w.pid FROM {s}.workers w WHERE w.run = $1 AND "
          "w.worker_id <> $2 AND " +
          PgWorkerAliveSql()),
      {run, worker_id_}, &r));
  for (int i = 0; i < r.rows(); i++) {
    WorkerInfo w;
    w.id = r.Get(i, "worker_id");
    w.pid = r.GetInt(i, "pid");
    w.alive = true;
    live->push_back(std::move(w));
  }
  return Status::OK();
}

}  // namespace wizq
