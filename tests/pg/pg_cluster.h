// A throwaway PostgreSQL 15 cluster for a test binary (issue 23): made in a
// fresh directory under /tmp (`wizq-pg-XXXXXX`), its Unix socket there, no
// TCP unless asked, stopped and removed when the PgCluster is destroyed —
// also when the binary is interrupted (SIGINT, SIGTERM, SIGHUP: a handler
// stops the server and removes the directory). A binary killed with -9
// leaves its cluster behind; the directory's `owner` file names the owning
// process, and the next Start() of any test binary stops and removes the
// clusters whose owner is gone.
//
// initdb runs as the `postgres` user when the tests run as root (initdb
// refuses root), as the current user otherwise. Its output is kept as a
// template (options.template_dir, in the build directory) and copied by
// the next clusters, which saves initdb's seconds per binary.
//
// The superuser `wizq` connects without a password (trust); every other
// role must give its password (scram-sha-256), for the credentials tests.
//
// One cluster serves a whole test binary: tests isolate themselves by
// schema (NewSchemaName). The binaries come from
// /usr/lib/postgresql/15/bin (WIZQ_PG_BIN overrides it); when PostgreSQL
// is missing, Start() fails with a message naming `make test`, which
// installs it. No test is skipped for want of it.
#ifndef WIZQ_TESTS_PG_PG_CLUSTER_H_
#define WIZQ_TESTS_PG_PG_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "queue/pg/pg_conn.h"
#include "util/status.h"

namespace wizq::test {

struct PgClusterOptions {
  // Also listen on 127.0.0.1, on a free port (port()).
  bool tcp = false;
  // fsync as PostgreSQL's default (benchmarks); off makes tests faster.
  bool fsync = false;
  // More postgresql.conf lines, e.g.
  // "shared_preload_libraries = 'pg_stat_statements'".
  std::vector<std::string> settings;
  // Where initdb's output is cached between test binaries ("" for none).
  std::string template_dir;
};

class PgCluster {
 public:
  enum class StopMode { kFast, kImmediate };

  explicit PgCluster(PgClusterOptions options = {});
  // Stops the server (fast, else immediate) and removes the directory.
  ~PgCluster();
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  // The first call removes leftover clusters of dead test binaries, makes
  // the cluster and starts it; later calls start it again (after Stop).
  Status Start();
  Status Stop(StopMode mode = StopMode::kFast);
  bool running() const { return postmaster_pid_ > 0; }

  const std::string& dir() const { return dir_; }  // also the socket's
  int port() const { return port_; }
  pid_t postmaster_pid() const { return postmaster_pid_; }

  // Libpq keyword strings to the cluster: over the Unix socket, and over
  // TCP (REQUIRES: options.tcp).
  std::string Location(const std::string& user = "wizq",
                       const std::string& dbname = "postgres") const;
  std::string TcpLocation(const std::string& user = "wizq",
                          const std::string& dbname = "postgres") const;
  // The same as a postgresql:// URL over the Unix socket, with `password`
  // in its user info unless empty.
  std::string Url(const std::string& user = "wizq",
                  const std::string& password = "",
                  const std::string& dbname = "postgres") const;

  // A new session as the superuser.
  Status Connect(std::unique_ptr<PgConn>* out) const;
  // pg_terminate_backend(pid), waiting up to 5 s for the backend to end.
  Status TerminateBackend(int pid) const;
  // A schema name no other test of this cluster uses ("t<n>_<prefix>");
  // the schema is not created.
  std::string NewSchemaName(const std::string& prefix);

  // Stops and removes the leftover clusters under /tmp whose owner
  // process is gone; returns how many. Start() calls it first.
  static int RemoveLeftovers();

 private:
  Status Create();
  Status InitData();
  Status Configure();
  Status ReadPostmasterPid();

  PgClusterOptions options_;
  std::string dir_;
  int port_ = 5432;
  pid_t postmaster_pid_ = 0;
  int schemas_ = 0;
  int slot_ = -1;  // in the signal handler's table
};

// The directory a PgCluster of a test binary caches initdb's output in.
std::string PgTemplateDir();

// Whether the database at `location` has wizq's default schema (a command
// opened a run there).
bool PgHoldsWizqSchema(const std::string& location);

}  // namespace wizq::test

#endif  // WIZQ_TESTS_PG_PG_CLUSTER_H_
