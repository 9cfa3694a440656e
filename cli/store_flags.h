// --store and --schema (SPEC §14) on every command that opens a run, the
// same on each: a PostgreSQL location from the option, else from the
// WIZQ_STORE environment variable, else the directory store in --dir.
// `--store ''` chooses the directory store whatever WIZQ_STORE says.
#ifndef WIZQ_CLI_STORE_FLAGS_H_
#define WIZQ_CLI_STORE_FLAGS_H_

namespace CLI {
class App;
}

namespace wizq {

struct RunPlace;

// Adds --store and --schema to `cmd`, writing into *place (which must
// outlive the parse). Once `cmd` is parsed, the location is resolved: from
// WIZQ_STORE when --store is absent; a location that is no database, or a
// bad schema name, is a usage error (exit 2); a password written in --store
// (visible in `ps`) draws a warning on stderr naming the safer ways.
void AddStoreOptions(CLI::App* cmd, RunPlace* place);

// --dir, --run-id and the store options of a command that works on a run
// that is there (status, log, answer, agent, mcp, export, prune, ...).
void AddRunPlaceOptions(CLI::App* cmd, RunPlace* place);

}  // namespace wizq

#endif  // WIZQ_CLI_STORE_FLAGS_H_
