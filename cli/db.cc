#include "cli/db.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "orchestrator/run.h"
#include "queue/pg/pg_conn.h"
#include "queue/pg/pg_location.h"
#include "queue/pg/pg_migrate.h"
#include "util/environment.h"

namespace wizq {

struct DbCli::Args {
  CLI::App* db = nullptr;
  CLI::App* migrate = nullptr;
  CLI::App* status = nullptr;
  std::string store;
  std::string schema = std::string(kPgDefaultSchema);
};

namespace {

CLI::App* Sub(CLI::App* db, const char* name, const char* help,
              std::string* store, std::string* schema) {
  CLI::App* c = db->add_subcommand(name, help);
  c->set_version_flag("--version", std::string("wizq ") + WIZQ_VERSION);
  c->add_option("--store", *store,
                "The PostgreSQL store: a postgresql:// URL or a libpq "
                "keyword string (default: $WIZQ_STORE)");
  c->add_option("--schema", *schema,
                "The schema holding wizq's tables (default: wizq)");
  return c;
}

int Fail(const char* cmd, int code, const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "wizq db %s: %s\n", cmd, message.c_str());
  return code;
}

int ExitCodeOf(const Status& s) {
  return s.IsInvalidArgument() ? kExitInvalid : kExitEnvironment;
}

int DoMigrate(PgSchema* schema) {
  std::vector<int> applied;
  const Status s = schema->Migrate(&applied);
  for (int version : applied) {
    std::printf("applied migration %d\n", version);
  }
  if (!s.ok()) return Fail("migrate", ExitCodeOf(s), s.message());
  if (applied.empty()) {
    std::printf("schema \"%s\" is at version %d: nothing to apply\n",
                schema->name().c_str(), schema->known_version());
  } else {
    std::printf("schema \"%s\" is now at version %d\n", schema->name().c_str(),
                schema->known_version());
  }
  return kExitCompleted;
}

int DoStatus(PgSchema* schema, const std::string& location) {
  int version = 0;
  Status s = schema->ReadVersion(&version);
  if (!s.ok()) return Fail("status", ExitCodeOf(s), s.message());
  if (version == 0) {
    std::printf("schema version: none (the schema does not exist)\n");
  } else {
    std::printf("schema version: %d\n", version);
  }
  std::printf("this wizq: schema version %d (wizq %s)\n",
              schema->known_version(), WIZQ_VERSION);
  const int known = schema->known_version();
  std::printf("migration due: %s\n",
              version < known   ? "yes"
              : version > known ? "no (the schema is newer than this wizq)"
                                : "no");
  s = schema->Check(location);
  if (!s.ok()) return Fail("status", ExitCodeOf(s), s.message());
  return kExitCompleted;
}

}  // namespace

DbCli::DbCli(CLI::App& app) : a_(std::make_unique<Args>()) {
  Args& a = *a_;
  a.db = app.add_subcommand("db",
                            "The PostgreSQL store's schema: migrate, status");
  a.db->set_version_flag("--version", std::string("wizq ") + WIZQ_VERSION);
  a.db->require_subcommand(1);
  a.migrate = Sub(a.db, "migrate",
                  "Create or upgrade the store's schema to this wizq's version",
                  &a.store, &a.schema);
  a.status = Sub(a.db, "status",
                 "The schema's version, this wizq's, and whether a migration "
                 "is due",
                 &a.store, &a.schema);
}

DbCli::~DbCli() = default;

bool DbCli::chosen() const { return a_->db->parsed(); }

int DbCli::Run() {
  Args& a = *a_;
  const char* cmd = a.migrate->parsed() ? "migrate" : "status";
  CLI::App* sub = a.migrate->parsed() ? a.migrate : a.status;
  // A password on the command line is visible in `ps`; one in WIZQ_STORE
  // is as private as PGPASSWORD, one of the safer ways the warning names.
  const bool from_flag = sub->get_option("--store")->count() > 0;
  std::string location = a.store;
  if (!from_flag) {
    const char* env = std::getenv(kEnvStore);
    location = env != nullptr ? env : "";
  }
  if (location.empty()) {
    return Fail(cmd, kExitInvalid,
                "no store given: --store URL (a postgresql:// URL or a libpq "
                "keyword string) or the WIZQ_STORE environment variable");
  }
  if (from_flag && PgLocationHasPassword(location)) {
    std::fprintf(stderr, "wizq db %s: %s\n", cmd,
                 PgPasswordWarning("--store").c_str());
  }
  Status s = ValidatePgSchemaName(a.schema);
  if (!s.ok()) return Fail(cmd, kExitInvalid, s.message());
  std::printf("store: %s\nschema: %s\n", RedactPgLocation(location).c_str(),
              a.schema.c_str());
  PgConnOptions options;
  options.application_name = std::string("wizq db ") + cmd;
  std::unique_ptr<PgConn> conn;
  s = PgConn::Open(location, options, &conn);
  if (!s.ok()) return Fail(cmd, ExitCodeOf(s), s.message());
  PgSchema schema(conn.get(), a.schema);
  return a.migrate->parsed() ? DoMigrate(&schema) : DoStatus(&schema, location);
}

}  // namespace wizq
