#include "queue/pg/pg_migrate.h"

#include <zlib.h>

#include <iterator>

#include "queue/pg/pg_conn.h"
#include "queue/pg/pg_location.h"
#include "util/shell_quote.h"
#include "wizq/version.h"

namespace wizq {
namespace {

// The version table, created with the schema when it is absent.
constexpr std::string_view kVersionTable = R"sql(
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE {schema}.schema_version (
  version    int PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT now(),
  applied_by text NOT NULL  -- "wizq 0.1.0"
);
)sql";

// Step 1: the PostgreSQL store's tables (queue/pg/pg_store.h,
// docs/POSTGRES.md). Until a release ships it, version 1 may still change
// in place.
//
// JSON (task inputs, answers, events) is kept as `text` holding the exact
// JSON text wizq wrote, not jsonb: jsonb reorders keys, drops duplicates
// and refuses \u0000, and the events must read back byte for byte. Times
// are ms since the Unix epoch on the database's clock (clock_timestamp()),
// as the contract's Task and RunInfo carry them.
//
// No foreign key from tasks or events to runs: a run's row is never
// deleted (a fresh run archives it), and the key's check is a query per
// row inserted: the insert of a transaction's 16 events took 221 us of the
// server's time with the keys, 80 without (docs/POSTGRES.md).
constexpr std::string_view kStep1 = R"sql(
-- One row per run; a run_id names one current (not archived) run. Every
-- transaction of a run locks its row first (SELECT ... FOR UPDATE): the
-- transitions of one run are serialised, next_seq and next_task give
-- gap-free event seqs (in commit order) and dense task ids. The n_* and
-- hooks_* counters are kept incrementally by each transition.
CREATE TABLE {schema}.runs (
  run            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id         text NOT NULL,
  format         int NOT NULL,
  install_dir    text NOT NULL,
  workflow       text NOT NULL,          -- the frozen workflow, JSON text
  def_files      text NOT NULL DEFAULT '',  -- RunInfo::def_files
  input          text NOT NULL,          -- the entry input, JSON text
  wizq_version   text NOT NULL,
  status         smallint NOT NULL DEFAULT 0,  -- RunStatus
  started_ms     bigint NOT NULL,
  finished_ms    bigint NOT NULL DEFAULT 0,
  resumes        int NOT NULL DEFAULT 0,
  previous_run   text NOT NULL DEFAULT '',     -- the archived run's key
  no_reuse       boolean NOT NULL DEFAULT false,
  from_steps     text NOT NULL DEFAULT '[]',   -- JSON array of strings
  next_seq       bigint NOT NULL DEFAULT 1,
  next_task      bigint NOT NULL DEFAULT 1,
  -- No pending task's id is below it: claims start their scan there, not
  -- at the first of the dead index entries an old snapshot keeps.
  pending_floor  bigint NOT NULL DEFAULT 1,
  held_floor     bigint NOT NULL DEFAULT 1,  -- the same for in-progress
  n_pending      bigint NOT NULL DEFAULT 0,
  n_in_progress  bigint NOT NULL DEFAULT 0,
  n_done         bigint NOT NULL DEFAULT 0,
  n_failed       bigint NOT NULL DEFAULT 0,
  n_settled      bigint NOT NULL DEFAULT 0,
  n_reused       bigint NOT NULL DEFAULT 0,
  n_imported     bigint NOT NULL DEFAULT 0,
  n_adopted      bigint NOT NULL DEFAULT 0,
  n_leased       bigint NOT NULL DEFAULT 0,
  hooks_due      bigint NOT NULL DEFAULT 0,
  hooks_reopened bigint NOT NULL DEFAULT 0,
  archived_at    timestamptz
);
CREATE UNIQUE INDEX runs_live_run_id ON {schema}.runs (run_id)
  WHERE archived_at IS NULL;

-- One row per task (the fields of queue/task.h). Every claim carries a
-- fencing token (claim_token) and a lease on the database's clock
-- (claim_until_ms), a worker's claim too; lease_token is set only for a
-- claim held by a lease (an agent). open_children, settled_counted and
-- hook_due are kept incrementally as transitions settle tasks.
CREATE TABLE {schema}.tasks (
  run              bigint NOT NULL,        -- runs.run
  task_id          bigint NOT NULL,
  parent           bigint NOT NULL DEFAULT 0,
  step             text NOT NULL,
  inputs           text NOT NULL,          -- exact JSON text
  origin           smallint NOT NULL,      -- Origin
  dedup_key        text,                   -- of <type, canonical inputs>
  state            smallint NOT NULL DEFAULT 0,  -- TaskState
  attempt          int NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  max_attempts     int NOT NULL,
  started          boolean NOT NULL DEFAULT false,
  claimed_by       text NOT NULL DEFAULT '',
  claim_host       text NOT NULL DEFAULT '',
  claim_token      text,
  claim_until_ms   bigint NOT NULL DEFAULT 0,
  lease_token      text,
  lease_expires_ms bigint NOT NULL DEFAULT 0,
  agent            text NOT NULL DEFAULT '',
  timeout_ms       bigint NOT NULL DEFAULT 0,
  deadline_ms      bigint NOT NULL DEFAULT 0,
  retry_on_timeout boolean NOT NULL DEFAULT true,
  retry_at_ms      bigint NOT NULL DEFAULT 0,
  error_reason     text NOT NULL DEFAULT '',
  error_message    text NOT NULL DEFAULT '',
  created_ms       bigint NOT NULL,
  updated_ms       bigint NOT NULL,
  has_finally      boolean NOT NULL DEFAULT false,
  finally_task     bigint NOT NULL DEFAULT 0,
  finally_for      bigint NOT NULL DEFAULT 0,
  generation       int NOT NULL DEFAULT 1,
  hook_stale       boolean NOT NULL DEFAULT false,
  reused_from      bigint NOT NULL DEFAULT 0,
  answer           text,                   -- JSON text
  answer_source    text NOT NULL DEFAULT '',
  open_children    bigint NOT NULL DEFAULT 0,
  settled_counted  boolean NOT NULL DEFAULT false,
  hook_due         boolean NOT NULL DEFAULT false,
  PRIMARY KEY (run, task_id),
  UNIQUE (run, dedup_key),
  CHECK ((state = 1) = (claim_token IS NOT NULL))
) WITH (fillfactor = 85);
CREATE INDEX tasks_ready ON {schema}.tasks (run, task_id) WHERE state = 0;
CREATE INDEX tasks_in_progress ON {schema}.tasks (run, task_id)
  WHERE state = 1;
CREATE INDEX tasks_children ON {schema}.tasks (run, parent, task_id);
-- A fan-out's statistics say most tasks share one parent: the planner
-- then took a task's children for the whole run and scanned it for each
-- task read (pg_plan_test). A task's children are few to the planner.
ALTER TABLE {schema}.tasks ALTER COLUMN parent SET (n_distinct = -1);
CREATE INDEX tasks_hooks_due ON {schema}.tasks (run, task_id) WHERE hook_due;

-- The run's events, seq 1, 2, 3... in commit order (queue/events.h).
CREATE TABLE {schema}.events (
  run     bigint NOT NULL,               -- runs.run
  seq     bigint NOT NULL,
  kind    text NOT NULL,
  body    text NOT NULL,                 -- the event's exact JSON text
  PRIMARY KEY (run, seq)
);

-- Workers, for liveness and status: each holds the session advisory lock
-- (kPgWorkerLockSpace, lock_key) on a connection of its own while it
-- lives. Unlogged: a crash of the server empties it (and ends every lock).
CREATE UNLOGGED TABLE {schema}.workers (
  worker_id   text PRIMARY KEY,
  run         bigint NOT NULL,
  host        text NOT NULL,
  pid         bigint NOT NULL,
  backend_pid int NOT NULL,
  lock_key    int NOT NULL,
  started_ms  bigint NOT NULL
);
CREATE INDEX workers_run ON {schema}.workers (run);
CREATE SEQUENCE {schema}.worker_lock_keys AS int MINVALUE 1 CYCLE;
)sql";

// Step n is kSteps[n - 1].
constexpr std::string_view kSteps[] = {kStep1};
static_assert(std::size(kSteps) == kPgSchemaVersion,
              "one step per schema version");

std::string WithSchema(std::string_view sql, const std::string& quoted) {
  std::string out(sql);
  const std::string_view tag = "{schema}";
  size_t pos = 0;
  while ((pos = out.find(tag, pos)) != std::string::npos) {
    out.replace(pos, tag.size(), quoted);
    pos += quoted.size();
  }
  return out;
}

}  // namespace

const std::vector<std::string_view>& PgMigrationSteps() {
  static const std::vector<std::string_view> steps(std::begin(kSteps),
                                                   std::end(kSteps));
  return steps;
}

int32_t PgMigrateLockKey(std::string_view schema) {
  return static_cast<int32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(schema.data()),
            static_cast<uInt>(schema.size())));
}

Status ValidatePgSchemaName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 63 &&
            !(name[0] >= '0' && name[0] <= '9') && name.substr(0, 3) != "pg_";
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  }
  if (ok) return Status::OK();
  return Status::InvalidArgument(
      "--schema \"" + std::string(name) +
      "\": a schema name is 1 to 63 characters of a-z, 0-9 and _, not "
      "starting with a digit or pg_");
}

PgSchema::PgSchema(PgConn* conn, std::string name,
                   std::vector<std::string_view> steps)
    : conn_(conn),
      name_(std::move(name)),
      quoted_(conn->QuoteIdentifier(name_)),
      steps_(std::move(steps)) {}

Status PgSchema::ReadVersion(int* version) {
  *version = 0;
  PgResult r;
  WIZQ_RETURN_IF_ERROR(conn_->Exec(
      "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = "
      "$1 AND tablename = 'schema_version') AS present",
      {name_}, &r));
  if (!r.GetBool(0, "present")) return Status::OK();
  WIZQ_RETURN_IF_ERROR(
      conn_->Exec("SELECT coalesce(max(version), 0) AS version FROM " +
                      quoted_ + ".schema_version",
                  {}, &r));
  *version = static_cast<int>(r.GetInt(0, "version"));
  return Status::OK();
}

Status PgSchema::NewerStatus(int version) const {
  return Status::NotSupported(
      "schema \"" + name_ + "\" of the store is at version " +
      std::to_string(version) + ", newer than this wizq knows (" +
      std::to_string(known_version()) +
      "): use a newer wizq; the schema was left untouched");
}

// The command that brings the schema up to date, as the user may paste
// it: the store without its password (which it then reads from
// PGPASSWORD or a password file), or from WIZQ_STORE when not given.
std::string PgSchema::MigrateCommand(std::string_view location) const {
  std::string cmd = "`wizq db migrate";
  if (!location.empty()) {
    cmd += " --store " + ShellQuote(PgLocationWithoutPassword(location));
  }
  cmd += " --schema " + name_ + "`";
  if (PgLocationHasPassword(location)) {
    cmd += " (its password by PGPASSWORD or a password file)";
  }
  return cmd;
}

Status PgSchema::Check(std::string_view location) {
  int version = 0;
  WIZQ_RETURN_IF_ERROR(ReadVersion(&version));
  const int known = known_version();
  if (version == known) return Status::OK();
  if (version > known) return NewerStatus(version);
  const std::string is = version == 0
                             ? "is not set up (version 0)"
                             : "is at version " + std::to_string(version) +
                                   ", older than this wizq's (" +
                                   std::to_string(known) + ")";
  return Status::NotSupported("schema \"" + name_ + "\" of the store " + is +
                              ": run " + MigrateCommand(location) +
                              " to bring it to version " +
                              std::to_string(known));
}

Status PgSchema::Open(std::string_view location) {
  int version = 0;
  WIZQ_RETURN_IF_ERROR(ReadVersion(&version));
  if (version == 0) {
    std::vector<int> applied;
    WIZQ_RETURN_IF_ERROR(Migrate(&applied));
  }
  return Check(location);
}

Status PgSchema::Migrate(std::vector<int>* applied) {
  applied->clear();
  bool done = false;
  while (!done) WIZQ_RETURN_IF_ERROR(ApplyStep(applied, &done));
  return Status::OK();
}

// One transaction: takes the lock, reads the version (another migrator
// may have moved it), applies the next step if one is missing.
Status PgSchema::ApplyStep(std::vector<int>* applied, bool* done) {
  *done = true;
  PgTxn txn(conn_);
  WIZQ_RETURN_IF_ERROR(txn.Begin());
  Status s = conn_->Exec("SELECT pg_advisory_xact_lock($1::int4, $2::int4)",
                         {kPgMigrateLockSpace, PgMigrateLockKey(name_)});
  if (!s.ok() && conn_->last_error().kind == PgErrorKind::kLockNotAvailable) {
    return Status::Busy("another migration of schema \"" + name_ +
                        "\" holds its lock: wait for it, then run `wizq db "
                        "migrate` again");
  }
  WIZQ_RETURN_IF_ERROR(s);
  int version = 0;
  WIZQ_RETURN_IF_ERROR(ReadVersion(&version));
  if (version > known_version()) return NewerStatus(version);
  if (version == known_version()) return Status::OK();  // rolled back
  // Statements of a migration may take long on a big table; the lock wait
  // stays bounded by the session's lock_timeout.
  WIZQ_RETURN_IF_ERROR(conn_->Exec("SET LOCAL statement_timeout = 0"));
  if (version == 0) {
    WIZQ_RETURN_IF_ERROR(conn_->ExecScript(WithSchema(kVersionTable, quoted_)));
  }
  const int step = version + 1;
  WIZQ_RETURN_IF_ERROR(conn_->ExecScript(WithSchema(steps_[step - 1], quoted_))
                           .Annotate("schema \"" + name_ + "\", migration " +
                                     std::to_string(step)));
  WIZQ_RETURN_IF_ERROR(
      conn_->Exec("INSERT INTO " + quoted_ +
                      ".schema_version (version, applied_by) VALUES ($1, $2)",
                  {step, std::string("wizq ") + Version()}));
  WIZQ_RETURN_IF_ERROR(txn.Commit().Annotate(
      "schema \"" + name_ + "\", migration " + std::to_string(step)));
  applied->push_back(step);
  *done = step == known_version();
  return Status::OK();
}

}  // namespace wizq
