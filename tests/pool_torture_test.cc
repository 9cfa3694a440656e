// The Pool mode of the kill -9 torture (tests/torture/pool_torture.cc) at a
// bounded size: 2 `wizq run` and 3 `wizq agent serve` on one directory,
// 30 kills (times WIZQ_TORTURE_SCALE) of a run, a serve or a serve with
// its agent COMMANDs, with leases of 1 s; every run must end with
// lost=0 duplicated=0 overlapped=0. `make torture` runs it at full size.
#include <gtest/gtest.h>

#include <iostream>
#include <random>
#include <string>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

TEST(PoolTortureTest, KillsOfRunsAndAgentsLoseAndRepeatNothing) {
  test::BecomeSubreaper();
  const int scale = test::EnvInt("WIZQ_TORTURE_SCALE", 1);
  const int seed_env = test::EnvInt("WIZQ_TORTURE_SEED", 0);
  const uint32_t seed =
      seed_env != 0 ? static_cast<uint32_t>(seed_env) : std::random_device{}();
  const std::string n = std::to_string(30 * (scale > 0 ? scale : 1));
  const test::WizqResult r = test::RunWizq(
      {test::BuildDir() + "/wizq_pool_torture", "--wizq", test::WizqPath(),
       "--cycles", n, "--fanout", "6", "--seed", std::to_string(seed)},
      {}, test::seconds(600));
  SCOPED_TRACE("seed " + std::to_string(seed) + " (WIZQ_TORTURE_SEED)");
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(test::Contains(r.out, "POOL-TORTURE cycles=" + n + " runs="))
      << r.out;
  EXPECT_TRUE(test::Contains(r.out, " lost=0 duplicated=0 overlapped=0 "))
      << r.out;
  std::cout << r.out;
}

}  // namespace
}  // namespace wizq
