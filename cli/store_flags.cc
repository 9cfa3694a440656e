#include "cli/store_flags.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "queue/pg/pg_conn.h"
#include "queue/pg/pg_location.h"
#include "queue/pg/pg_migrate.h"
#include "queue/run_place.h"
#include "util/environment.h"

namespace wizq {
namespace {

// `wizq agent take`, `wizq status`: the command as messages name it.
std::string CommandName(const CLI::App& cmd) {
  std::string name = cmd.get_name();
  for (const CLI::App* p = cmd.get_parent(); p != nullptr && p->get_parent();
       p = p->get_parent()) {
    name = p->get_name() + " " + name;
  }
  return "wizq " + name;
}

void Resolve(const CLI::App& cmd, RunPlace* place) {
  const bool from_flag = cmd.count("--store") > 0;
  place->store_from_flag = from_flag;
  if (!from_flag) {
    const char* env = std::getenv(kEnvStore);
    place->store = env != nullptr ? env : "";
  }
  if (place->store.empty()) {
    if (cmd.count("--schema") > 0) {
      throw CLI::ValidationError(
          "--schema",
          "--schema applies to a PostgreSQL store: give --store "
          "URL (or WIZQ_STORE) too");
    }
    return;
  }
  if (!IsDatabaseLocation(place->store)) {
    throw CLI::ValidationError(
        from_flag ? "--store" : "WIZQ_STORE",
        "takes a PostgreSQL location (a postgresql:// URL or a libpq keyword "
        "string such as \"host=db dbname=wizq\"), not \"" +
            RedactPgLocation(place->store) +
            "\"; without one, the run is in --dir");
  }
  const Status readable = PgConn::CheckLocation(place->store);
  if (!readable.ok()) throw CLI::ValidationError(readable.message());
  if (!place->schema.empty()) {
    Status s = ValidatePgSchemaName(place->schema);
    if (!s.ok()) throw CLI::ValidationError(s.message());  // names it
  }
  if (from_flag && PgLocationHasPassword(place->store)) {
    std::fprintf(stderr, "%s: %s\n", CommandName(cmd).c_str(),
                 PgPasswordWarning("--store").c_str());
  }
}

}  // namespace

void AddStoreOptions(CLI::App* cmd, RunPlace* place) {
  cmd->add_option("--store", place->store,
                  "The run's store: a PostgreSQL postgresql:// URL or libpq "
                  "keyword string (default: $WIZQ_STORE; none: the directory "
                  "store in --dir)");
  cmd->add_option("--schema", place->schema,
                  "The PostgreSQL store's schema (default: wizq)");
  cmd->parse_complete_callback([cmd, place] { Resolve(*cmd, place); });
}

void AddRunPlaceOptions(CLI::App* cmd, RunPlace* place) {
  cmd->add_option("--dir", place->dir,
                  "Install directory; with --store, the machine's local "
                  "working directory (default: .)");
  cmd->add_option("--run-id", place->run_id,
                  "The run (default: the run in --dir; with --store, the "
                  "store's latest run)");
  AddStoreOptions(cmd, place);
}

}  // namespace wizq
