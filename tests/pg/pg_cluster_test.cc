// The throwaway cluster itself (tests/pg/pg_cluster.h): restarts keep the
// data, options are applied, and a cluster never outlives its test binary:
// removed when it is interrupted, and found and removed by the next start
// when it was killed with -9.
#include "tests/pg/pg_cluster.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "tests/pg/pg_test_util.h"
#include "tests/test_util.h"

namespace wizq::test {
namespace {

namespace fs = std::filesystem;

// True once `pid` is gone (or a zombie) within 10 s.
bool Gone(pid_t pid) {
  for (int i = 0; i < 1000; i++) {
    const std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || stat.compare(paren + 2, 1, "Z") == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

struct Child {
  pid_t pid = 0;
  std::string dir;
  pid_t postmaster = 0;
};

// Forks a process that starts a cluster of its own, reports its directory
// and postmaster, and waits to be signalled.
Child StartClusterInChild() {
  int fds[2];
  EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
  fflush(nullptr);
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    close(fds[0]);
    PgClusterOptions o;
    o.template_dir = PgTemplateDir();
    PgCluster cluster(o);
    const Status s = cluster.Start();
    const std::string report =
        (s.ok() ? cluster.dir() + " " + std::to_string(cluster.postmaster_pid())
                : "FAILED " + s.ToString()) +
        "\n";
    if (write(fds[1], report.data(), report.size()) < 0) _exit(1);
    close(fds[1]);
    while (true) pause();
  }
  close(fds[1]);
  std::string report;
  char buf[512];
  ssize_t n;
  while (report.find('\n') == std::string::npos &&
         (n = read(fds[0], buf, sizeof(buf))) > 0) {
    report.append(buf, n);
  }
  report = report.substr(0, report.find('\n'));
  close(fds[0]);
  const size_t space = report.find(' ');
  EXPECT_EQ(report.rfind("FAILED", 0), std::string::npos) << report;
  c.dir = report.substr(0, space);
  c.postmaster = static_cast<pid_t>(std::atol(report.c_str() + space + 1));
  EXPECT_TRUE(fs::exists(c.dir + "/data/PG_VERSION")) << report;
  EXPECT_EQ(kill(c.postmaster, 0), 0) << report;
  return c;
}

TEST(PgClusterTest, RestartKeepsCommittedData) {
  Status started;
  PgCluster& cluster = SharedPgCluster(&started);
  ASSERT_OK(started);
  std::unique_ptr<PgConn> c;
  ASSERT_OK(cluster.Connect(&c));
  PgResult r;
  ASSERT_OK(c->Exec("SHOW listen_addresses", {}, &r));
  EXPECT_EQ(r.Get(0, 0), "");  // Unix socket only
  ASSERT_OK(c->Exec("CREATE TABLE restart_probe (v int)"));
  ASSERT_OK(c->Exec("INSERT INTO restart_probe VALUES (1)"));
  for (auto mode :
       {PgCluster::StopMode::kImmediate, PgCluster::StopMode::kFast}) {
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_OK(cluster.Stop(mode));
    const double stop = SecondsSince(t0);
    EXPECT_FALSE(c->Ping().ok());
    t0 = std::chrono::steady_clock::now();
    ASSERT_OK(cluster.Start());
    std::fprintf(stderr, "[pg_cluster] stop -m %s %.2f s, start again %.2f s\n",
                 mode == PgCluster::StopMode::kFast ? "fast" : "immediate",
                 stop, SecondsSince(t0));
    ASSERT_OK(cluster.Connect(&c));
    ASSERT_OK(c->Exec("SELECT count(*) AS n FROM restart_probe", {}, &r));
    EXPECT_EQ(r.GetInt(0, "n"), 1);
  }
}

TEST(PgClusterTest, OptionsAreAppliedAndTheDirectoryIsRemoved) {
  std::string dir;
  pid_t postmaster = 0;
  {
    PgClusterOptions o;
    o.template_dir = PgTemplateDir();
    o.tcp = true;
    o.fsync = true;
    o.settings = {"shared_preload_libraries = 'pg_stat_statements'"};
    PgCluster cluster(o);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_OK(cluster.Start());
    std::fprintf(stderr,
                 "[pg_cluster] a second cluster (template copy + "
                 "start) %.2f s\n",
                 SecondsSince(t0));
    dir = cluster.dir();
    postmaster = cluster.postmaster_pid();
    std::unique_ptr<PgConn> c;
    PgConnOptions co;
    ASSERT_OK(PgConn::Open(cluster.TcpLocation(), co, &c));
    PgResult r;
    ASSERT_OK(
        c->Exec("SELECT current_setting('fsync') AS f, "
                "current_setting('listen_addresses') AS l, "
                "inet_server_port() AS p",
                {}, &r));
    EXPECT_EQ(r.Get(0, "f"), "on");
    EXPECT_EQ(r.Get(0, "l"), "127.0.0.1");
    EXPECT_EQ(r.GetInt(0, "p"), cluster.port());
    ASSERT_OK(c->Exec("CREATE EXTENSION pg_stat_statements"));
    ASSERT_OK(c->Exec("SELECT count(*) FROM pg_stat_statements"));
    // Other roles need a password; a missing one is refused.
    ASSERT_OK(c->Exec("CREATE ROLE nopass LOGIN"));
    std::unique_ptr<PgConn> refused;
    EXPECT_FALSE(PgConn::Open(cluster.Location("nopass"), co, &refused).ok());
    EXPECT_TRUE(fs::exists(dir + "/owner"));
  }
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE(Gone(postmaster));
}

TEST(PgClusterTest, LeftoversOfAKilledBinaryAreRemovedByTheNextStart) {
  Status started;
  PgCluster& mine = SharedPgCluster(&started);
  ASSERT_OK(started);
  const Child child = StartClusterInChild();
  ASSERT_FALSE(child.dir.empty());
  kill(child.pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child.pid, &status, 0), child.pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  // Killed with -9: its cluster runs on, orphaned.
  EXPECT_TRUE(fs::exists(child.dir));
  EXPECT_EQ(kill(child.postmaster, 0), 0);

  // Removed by this call, or by another test binary's start running
  // beside it (ctest -j), which claims it first.
  PgCluster::RemoveLeftovers();
  EXPECT_FALSE(fs::exists(child.dir));
  EXPECT_TRUE(Gone(child.postmaster));
  // A live binary's cluster (this one's) is left alone.
  EXPECT_TRUE(fs::exists(mine.dir()));
  std::unique_ptr<PgConn> c;
  ASSERT_OK(mine.Connect(&c));
  ASSERT_OK(c->Ping());
}

TEST(PgClusterTest, InterruptedBinaryStopsAndRemovesItsCluster) {
  for (int sig : {SIGTERM, SIGINT}) {
    const Child child = StartClusterInChild();
    ASSERT_FALSE(child.dir.empty());
    const auto t0 = std::chrono::steady_clock::now();
    kill(child.pid, sig);
    int status = 0;
    ASSERT_EQ(waitpid(child.pid, &status, 0), child.pid);
    std::fprintf(stderr, "[pg_cluster] %s: stopped and removed in %.2f s\n",
                 strsignal(sig), SecondsSince(t0));
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig)
        << strsignal(sig) << ": status " << status;
    EXPECT_FALSE(fs::exists(child.dir)) << strsignal(sig);
    EXPECT_TRUE(Gone(child.postmaster)) << strsignal(sig);
  }
}

TEST(PgClusterTest, MissingPostgresqlFailsNamingMakeTest) {
  setenv("WIZQ_PG_BIN", "/nonexistent/postgresql/bin", 1);
  PgCluster cluster;
  const Status s = cluster.Start();
  unsetenv("WIZQ_PG_BIN");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("make test"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("/nonexistent/postgresql/bin/initdb"),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace wizq::test
