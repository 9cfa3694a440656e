// with_pg_cluster [--fsync] [--set LINE]... COMMAND ARGS...: runs a test
// that is not a gtest binary (the MCP SDK client tests, tests/mcp/*.mjs) or
// a benchmark script (bench/pg_scale_bench.sh) on the PostgreSQL store.
// --fsync: PostgreSQL's default fsync=on (tests run with it off); --set: a
// postgresql.conf line (e.g. shared_preload_libraries = 'pg_stat_statements').
// It starts a throwaway cluster (tests/pg/pg_cluster.h: initdb into a temp dir,
// its Unix socket there), creates a database, runs COMMAND with WIZQ_STORE
// naming it, then stops and removes the cluster, also when COMMAND fails or is
// killed by a signal; its exit status is COMMAND's (128 + the signal's number
// for a signal).
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "tests/pg/pg_cluster.h"

namespace {

using wizq::Status;
using wizq::test::PgCluster;
using wizq::test::PgClusterOptions;

int Fail(const char* what, const Status& s) {
  std::fprintf(stderr, "with_pg_cluster: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

// Runs argv to its end; its exit status as a shell reports it.
int RunChild(char** argv) {
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    execvp(argv[0], argv);
    std::perror(argv[0]);
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace

int main(int argc, char** argv) {
  PgClusterOptions o;
  o.template_dir = wizq::test::PgTemplateDir();
  int first = 1;
  for (; first < argc; first++) {
    const std::string a = argv[first];
    if (a == "--fsync") {
      o.fsync = true;
    } else if (a == "--set" && first + 1 < argc) {
      o.settings.push_back(argv[++first]);
    } else {
      break;
    }
  }
  if (first >= argc) {
    std::fprintf(stderr,
                 "usage: with_pg_cluster [--fsync] [--set LINE]... COMMAND "
                 "[ARGS...]\n");
    return 2;
  }
  PgCluster cluster(o);
  Status s = cluster.Start();
  if (!s.ok()) return Fail("the cluster did not start", s);
  int code = 1;
  {
    std::unique_ptr<wizq::PgConn> admin;
    s = cluster.Connect(&admin);
    if (s.ok()) s = admin->Exec("CREATE DATABASE run_here");
  }
  if (s.ok()) {
    const std::string location = cluster.Location("wizq", "run_here");
    setenv("WIZQ_STORE", location.c_str(), 1);
    code = RunChild(argv + first);
    // A command that passed without reaching the store proves nothing
    // about it.
    if (code == 0 && !wizq::test::PgHoldsWizqSchema(location)) {
      std::fprintf(stderr, "with_pg_cluster: no run reached PostgreSQL\n");
      code = 1;
    }
  } else {
    Fail("CREATE DATABASE failed", s);
  }
  s = cluster.Stop();
  if (!s.ok()) Fail("stopping the cluster", s);
  return code;
}
