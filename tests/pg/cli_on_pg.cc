// Runs a CLI suite (tests/*_test.cc that drive the real binary) on the
// PostgreSQL store: linked into each suite of the both-stores list
// (tests/pg/pg_tests.cmake, WIZQ_BOTH_STORES), it does nothing unless the
// environment has WIZQ_TEST_STORE=postgresql. Then the binary's one
// throwaway cluster (tests/pg/pg_test_util.h) is started by the first test
// case, and each case gets a database of its own, named in WIZQ_STORE for
// every `wizq` the case starts and dropped when it ends. The suites' own
// helpers read a run through the CLI on this store (tests/integration_util.h,
// OnPgStore()).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <memory>
#include <string>

#include "tests/integration_util.h"
#include "tests/pg/pg_test_util.h"

namespace wizq::test {
namespace {

class DatabasePerCase : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override {
    Status started;
    PgCluster& cluster = SharedPgCluster(&started);
    if (!started.ok()) Die("the cluster did not start", started);
    if (admin_ == nullptr) {
      const Status s = cluster.Connect(&admin_);
      if (!s.ok()) Die("cannot connect to the cluster", s);
    }
    db_ = "case" + std::to_string(++cases_);
    const Status s = admin_->Exec("CREATE DATABASE " + db_);
    if (!s.ok()) Die("CREATE DATABASE failed", s);
    setenv("WIZQ_STORE", cluster.Location("wizq", db_).c_str(), 1);
    current_ = this;
    g_empty_store = [] { current_->Empty(); };
  }

  void OnTestEnd(const ::testing::TestInfo&) override {
    unsetenv("WIZQ_STORE");
    g_empty_store = nullptr;
    stored_ += HoldsARun();
    Drop();
  }

  // A suite whose cases never reached the store ran on the directory
  // store: a pass that proves nothing about PostgreSQL.
  void OnTestProgramEnd(const ::testing::UnitTest& unit) override {
    std::fprintf(stderr,
                 "[cli_on_pg] %d of %d cases wrote a run to the store\n",
                 stored_, cases_);
    if (stored_ == 0 && unit.test_to_run_count() > 0) {
      std::fprintf(stderr,
                   "[cli_on_pg] no case reached PostgreSQL: WIZQ_STORE did not "
                   "reach wizq\n");
      std::exit(1);
    }
  }

 private:
  // A worker the case left behind holds a session: FORCE ends it.
  void Drop() {
    const Status s = admin_->Exec("DROP DATABASE " + db_ + " WITH (FORCE)");
    if (!s.ok()) std::fprintf(stderr, "[cli_on_pg] %s\n", s.ToString().c_str());
  }
  // Whether the case's database has wizq's schema (a command opened a run).
  bool HoldsARun() {
    Status started;
    return PgHoldsWizqSchema(SharedPgCluster(&started).Location("wizq", db_));
  }
  void Empty() {
    Drop();
    const Status s = admin_->Exec("CREATE DATABASE " + db_);
    if (!s.ok()) Die("CREATE DATABASE failed", s);
  }

  static void Die(const char* what, const Status& s) {
    std::fprintf(stderr, "[cli_on_pg] %s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }

  static inline DatabasePerCase* current_ = nullptr;
  std::unique_ptr<PgConn> admin_;
  std::string db_;
  int cases_ = 0;
  int stored_ = 0;  // cases whose database held a run at their end
};

[[maybe_unused]] const bool kRegistered = [] {
  const char* store = getenv("WIZQ_TEST_STORE");
  if (store == nullptr || std::string(store) != "postgresql") return false;
  ::testing::UnitTest::GetInstance()->listeners().Append(new DatabasePerCase);
  return true;
}();

}  // namespace
}  // namespace wizq::test
