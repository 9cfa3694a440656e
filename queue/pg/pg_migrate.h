// The PostgreSQL store's schema and its migrations (SPEC §14). Every
// object of the store lives in one schema (`wizq` unless chosen), in a
// database that may hold anything else; its version table,
// `<schema>.schema_version`, has one row per applied step.
//
// Migrate() applies each missing step in its own transaction, under a
// transaction-level advisory lock on the schema's name, so that two
// migrators at once apply each step once. A schema newer than this binary
// knows is never touched: Check() and Migrate() refuse it.
#ifndef WIZQ_QUEUE_PG_PG_MIGRATE_H_
#define WIZQ_QUEUE_PG_PG_MIGRATE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace wizq {

class PgConn;

// The schema version this binary reads and writes.
inline constexpr int kPgSchemaVersion = 1;
inline constexpr std::string_view kPgDefaultSchema = "wizq";
// The transaction advisory lock that migrations of a schema take:
// (kPgMigrateLockSpace, PgMigrateLockKey(schema)), "wizm" and the CRC-32
// of the schema's name.
inline constexpr int32_t kPgMigrateLockSpace = 0x77697a6d;
int32_t PgMigrateLockKey(std::string_view schema);

// InvalidArgument unless `name` is a schema name wizq accepts: 1 to 63
// bytes of a-z, 0-9 and _, not starting with a digit or "pg_" (names that
// need no quoting, so that `psql` users see them as written).
Status ValidatePgSchemaName(std::string_view name);

// The SQL of each migration step, step n at [n - 1], `{schema}` standing
// for the quoted schema name. kPgSchemaVersion steps.
const std::vector<std::string_view>& PgMigrationSteps();

class PgSchema {
 public:
  // REQUIRES: ValidatePgSchemaName(name) is OK; `conn` outlives this and
  // has no transaction open. `steps` are those this binary knows (tests
  // pass more or fewer, to act as a newer or an older wizq).
  PgSchema(PgConn* conn, std::string name,
           std::vector<std::string_view> steps = PgMigrationSteps());

  const std::string& name() const { return name_; }
  // The version this binary knows: kPgSchemaVersion unless told otherwise.
  int known_version() const { return static_cast<int>(steps_.size()); }

  // The schema's version in the database: 0 when it (or its version
  // table) is absent.
  Status ReadVersion(int* version);

  // For a command that uses the store: OK if the schema is at
  // known_version(). NotSupported (exit 3) if it is absent or older (the
  // message names `wizq db migrate` with `location`, the store as given,
  // without its password: the command to paste) or newer (left
  // untouched). Reads only. An empty `location` leaves --store out (the
  // command then takes WIZQ_STORE).
  Status Check(std::string_view location = {});

  // `wizq db migrate ...` for this schema and `location` (quoted in
  // backticks), to paste.
  std::string MigrateCommand(std::string_view location) const;

  // Check(), but an absent schema is first created (Migrate()).
  Status Open(std::string_view location = {});

  // Applies each step from the schema's version to known_version(), each
  // in its own transaction under the migration lock; *applied gets the
  // versions applied (none when current). NotSupported for a newer schema
  // (nothing changed); Busy if another migrator held the lock past the
  // session's lock_timeout. A COMMIT of unknown outcome is an IOError:
  // Migrate() again, which finds what landed.
  Status Migrate(std::vector<int>* applied);

 private:
  Status NewerStatus(int version) const;
  Status ApplyStep(std::vector<int>* applied, bool* done);

  PgConn* conn_;
  std::string name_;
  std::string quoted_;  // name_ as an SQL identifier
  std::vector<std::string_view> steps_;
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_PG_PG_MIGRATE_H_
