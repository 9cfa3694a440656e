// The PostgreSQL store in the contract suite: one throwaway cluster for the
// test binary (started by the first case that needs it, stopped and
// removed at exit, also on failure: tests/pg/pg_test_util.h), a fresh
// schema and a fresh local directory per case.
#include <memory>

#include "fs/env.h"
#include "tests/pg/pg_test_util.h"
#include "tests/store/store_contract.h"
#include "tests/test_util.h"

namespace wizq::store_test {
namespace {

class PgFactory : public StoreFactory {
 public:
  std::string Name() const override { return "pg"; }
  StoreOptions NewPlace() override {
    Status started;
    test::PgCluster& cluster = test::SharedPgCluster(&started);
    EXPECT_TRUE(started.ok()) << started.ToString();
    dir_ = std::make_unique<test::ScratchDir>();
    StoreOptions o;
    o.location = cluster.Location();
    o.schema = cluster.NewSchemaName(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    o.install_dir = dir_->path();
    o.env = Env::Posix();
    return o;
  }
  void Cleanup() override { dir_.reset(); }

 private:
  std::unique_ptr<test::ScratchDir> dir_;
};

const Register kPg("pg", [] { return std::make_unique<PgFactory>(); });

}  // namespace
}  // namespace wizq::store_test
