#include "queue/pg/pg_migrate.h"

#include <zlib.h>

#include <iterator>

#include "queue/pg/pg_conn.h"
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

// Step 1. A FIRST CUT of the store's tables (anchors §7.1), made before the
// store itself: the lead revises it together with the store (issue 23),
// and until a release ships it, version 1 may still change in place.
//
// JSON (task inputs, results, events) is kept as `text` holding the exact
// JSON text wizq wrote, not jsonb: jsonb reorders keys, drops duplicates
// and refuses \u0000, and the events must read back byte for byte.
constexpr std::string_view kStep1 = R"sql(
-- One row per run. next_seq is the per-run ordering lock: a transaction
-- that appends events bumps it (UPDATE ... RETURNING) last, so seq is
-- gap-free and in commit order within a run (anchors §3, option A).
CREATE TABLE {schema}.runs (
  run         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id      text NOT NULL,             -- --run-id, or derived from workflow + input
  def_hash    text NOT NULL,             -- the workflow's (and its step files') hash
  input       text NOT NULL,             -- the entry input, exact JSON text
  next_seq    bigint NOT NULL DEFAULT 1,
  next_task   bigint NOT NULL DEFAULT 1, -- task ids are dense per run
  last_crc    bigint,                    -- chain value of an audit.jsonl export
  archived_at timestamptz,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX runs_live_run_id ON {schema}.runs (run_id)
  WHERE archived_at IS NULL;

-- One row per task. A claim is fenced by state + attempt + lease_token;
-- lease_until is the database's clock. lease_until is in no index, so a
-- lease renewal is a HOT update (fillfactor leaves room for it).
CREATE TABLE {schema}.tasks (
  run          bigint NOT NULL REFERENCES {schema}.runs ON DELETE CASCADE,
  task_id      bigint NOT NULL,
  parent       bigint,
  step         text NOT NULL,
  dedup_key    bytea NOT NULL,           -- of <type, canonical inputs>
  state        smallint NOT NULL DEFAULT 0,  -- 0 pending, 1 in progress, ...
  attempt      int NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  max_attempts int NOT NULL CHECK (max_attempts > 0),
  run_after    timestamptz NOT NULL DEFAULT now(),
  lease_token  uuid,
  lease_owner  uuid,
  lease_until  timestamptz,
  holder_host  text,
  inputs       text NOT NULL,            -- exact JSON text
  result       text,                     -- exact JSON text
  error        text,
  PRIMARY KEY (run, task_id),
  UNIQUE (run, dedup_key),
  CHECK ((state = 1) = (lease_token IS NOT NULL))
) WITH (fillfactor = 85);
CREATE INDEX tasks_ready ON {schema}.tasks (run, step, run_after, task_id)
  WHERE state = 0;
CREATE INDEX tasks_in_progress ON {schema}.tasks (run) WHERE state = 1;

-- The run's events, seq 1, 2, 3... in commit order.
CREATE TABLE {schema}.events (
  run     bigint NOT NULL REFERENCES {schema}.runs ON DELETE CASCADE,
  seq     bigint NOT NULL,
  at      timestamptz NOT NULL DEFAULT now(),
  kind    text NOT NULL,
  task_id bigint,
  body    text NOT NULL,                 -- the event's exact JSON text
  crc     bigint,
  PRIMARY KEY (run, seq)
);

-- Live workers, informational (the lease is the authority): unlogged, so
-- a crash of the server empties it; each holds a session advisory lock
-- (lock_space, lock_key) while it lives.
CREATE UNLOGGED TABLE {schema}.workers (
  worker_id   uuid PRIMARY KEY,
  run         bigint NOT NULL,
  host        text NOT NULL,
  pid         int NOT NULL,
  backend_pid int NOT NULL,
  lock_space  int NOT NULL,
  lock_key    int NOT NULL,
  started_at  timestamptz NOT NULL DEFAULT now()
);
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

Status PgSchema::Check() {
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
                              ": run `wizq db migrate --store ... --schema " +
                              name_ + "` to bring it to version " +
                              std::to_string(known));
}

Status PgSchema::Open() {
  int version = 0;
  WIZQ_RETURN_IF_ERROR(ReadVersion(&version));
  if (version == 0) {
    std::vector<int> applied;
    WIZQ_RETURN_IF_ERROR(Migrate(&applied));
  }
  return Check();
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
