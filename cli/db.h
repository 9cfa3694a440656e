// `wizq db migrate|status --store URL [--schema NAME]` (SPEC §14): the
// PostgreSQL store's schema. `migrate` applies the missing migrations and
// says which; `status` says the schema's version, this wizq's, and whether
// a migration is due. The store comes from --store or WIZQ_STORE and is
// shown only with its password removed; a password written in --store
// draws a warning.
#ifndef WIZQ_CLI_DB_H_
#define WIZQ_CLI_DB_H_

#include <CLI/CLI.hpp>
#include <memory>

namespace wizq {

class DbCli {
 public:
  // Adds the `db` command and its subcommands to `app`.
  explicit DbCli(CLI::App& app);
  ~DbCli();
  // Whether `db` was given (after app.parse).
  bool chosen() const;
  // Runs the chosen subcommand; returns the exit code: 0, 2 (bad
  // arguments: no store, a malformed location or schema name), 3 (the
  // store cannot be reached, or its schema is older or newer than this
  // wizq's).
  int Run();

 private:
  struct Args;
  std::unique_ptr<Args> a_;
};

}  // namespace wizq

#endif  // WIZQ_CLI_DB_H_
