// What the PostgreSQL test binaries share: the binary's one cluster
// (started by the first test that needs it, stopped and removed at exit,
// with how long each took printed on stderr), and PgTest, a fixture with a
// schema name of its own and a superuser session.
#ifndef WIZQ_TESTS_PG_PG_TEST_UTIL_H_
#define WIZQ_TESTS_PG_PG_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "tests/pg/pg_cluster.h"

namespace wizq::test {

inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

// Set (before the first test runs) by a binary whose tests need TCP.
inline bool& SharedPgClusterTcp() {
  static bool tcp = false;
  return tcp;
}

// The cluster of this test binary; *started says whether it runs.
inline PgCluster& SharedPgCluster(Status* started) {
  struct Holder {
    PgCluster cluster;
    Status status;
    pid_t owner = getpid();
    explicit Holder(PgClusterOptions o) : cluster(std::move(o)) {
      const auto t0 = std::chrono::steady_clock::now();
      status = cluster.Start();
      std::fprintf(stderr, "[pg_cluster] %s in %.2f s: %s\n",
                   status.ok() ? "made and started" : "FAILED to start",
                   SecondsSince(t0), cluster.dir().c_str());
    }
    ~Holder() {
      if (getpid() != owner || !cluster.running()) return;
      const auto t0 = std::chrono::steady_clock::now();
      const Status s = cluster.Stop();
      std::fprintf(stderr, "[pg_cluster] stopped (fast) in %.2f s: %s\n",
                   SecondsSince(t0), s.ToString().c_str());
    }
  };
  static Holder holder([] {
    PgClusterOptions o;
    o.template_dir = PgTemplateDir();
    o.tcp = SharedPgClusterTcp();
    return o;
  }());
  *started = holder.status;
  return holder.cluster;
}

#define ASSERT_OK(expr)                                  \
  do {                                                   \
    const ::wizq::Status _s = (expr);                    \
    ASSERT_TRUE(_s.ok()) << #expr ": " << _s.ToString(); \
  } while (0)
#define EXPECT_OK(expr)                                  \
  do {                                                   \
    const ::wizq::Status _s = (expr);                    \
    EXPECT_TRUE(_s.ok()) << #expr ": " << _s.ToString(); \
  } while (0)

// Makes `role` (if absent) a login role with `password`, allowed to create
// schemas in the database. CREATE ROLE takes no parameters: the password
// goes through format() inside the server, bound all the way.
// Every COMMIT of the cluster that writes waits for a synchronous standby
// that never comes (kNoStandby), from when its session has reloaded its
// settings (each does before its next statement) until Release, or the
// end of the scope, also when the test fails.
class CommitsHeld {
 public:
  static constexpr char kNoStandby[] = "wizq_nobody";
  explicit CommitsHeld(PgConn* admin) : admin_(admin) {}
  ~CommitsHeld() { Release().IgnoreError(); }
  Status Hold() {
    WIZQ_RETURN_IF_ERROR(admin_->Exec(
        std::string("ALTER SYSTEM SET synchronous_standby_names = '") +
        kNoStandby + "'"));
    return admin_->Exec("SELECT pg_reload_conf()");
  }
  Status Release() {
    WIZQ_RETURN_IF_ERROR(
        admin_->Exec("ALTER SYSTEM RESET synchronous_standby_names"));
    return admin_->Exec("SELECT pg_reload_conf()");
  }

 private:
  PgConn* admin_;
};

inline Status CreatePasswordRole(PgConn* admin, const std::string& role,
                                 const std::string& password) {
  WIZQ_RETURN_IF_ERROR(admin->Exec(
      "CREATE OR REPLACE FUNCTION pg_temp.make_role(n text, p text) "
      "RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
      "IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = n) THEN "
      "EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L', n, p); "
      "EXECUTE format('GRANT CREATE ON DATABASE postgres TO %I', n); "
      "END IF; END $$"));
  return admin->Exec("SELECT pg_temp.make_role($1, $2)", {role, password});
}

// A test on the binary's cluster: schema_ is a name no other test uses
// (not created), admin_ a superuser session.
class PgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status started;
    cluster_ = &SharedPgCluster(&started);
    ASSERT_TRUE(started.ok()) << started.ToString();
    schema_ = cluster_->NewSchemaName(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_OK(cluster_->Connect(&admin_));
  }

  // A new superuser session.
  std::unique_ptr<PgConn> Connect() {
    std::unique_ptr<PgConn> c;
    const Status s = cluster_->Connect(&c);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return c;
  }

  PgCluster* cluster_ = nullptr;
  std::string schema_;
  std::unique_ptr<PgConn> admin_;
};

}  // namespace wizq::test

#endif  // WIZQ_TESTS_PG_PG_TEST_UTIL_H_
