// The crash-point sweep on the PostgreSQL store (issue 23's pitfall
// matrix): for the COMMIT's points (pg.before_commit, pg.after_commit_sent,
// pg.after_commit_ack: util/crash_point.h) and the run loop's, the real
// `wizq run` of the sweep workflow on the store _exit(86)s the n-th time
// it passes the point (WIZQ_CRASH_AT); `wizq status` must then read the
// run, a plain `wizq run` in the same directory (the same host: it adopts
// the orphaned attempts) resumes until it exits 0, and the run must have
// completed with every event once and no task run more than once per crash
// (pg_commit_util.h). A point no n reaches fails.
#include <cstdio>
#include <string>
#include <vector>

#include "tests/pg/pg_commit_util.h"
#include "util/crash_point.h"

namespace wizq::test {
namespace {

constexpr int kMaxResumes = 4;

class PgCrashSweep : public PgSweepTest,
                     public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    PgSweepTest::SetUp();
    BecomeSubreaper();
  }
  void TearDown() override { ReapStrays(); }

  // One crash at `point`:`n` and its resumes; false if the run never
  // passed the point n times.
  bool CrashAndResume(int n) {
    const std::string point = GetParam();
    const std::string run_id = "n" + std::to_string(n);
    const std::string dir = scratch_.path() + "/" + run_id;
    std::filesystem::create_directories(dir);
    const WizqResult first =
        Run(dir, cluster_->Location(), run_id,
            {{"WIZQ_CRASH_AT", point + ":" + std::to_string(n)}})
            ->Wait();
    if (first.exited && first.code == 0) return false;  // not reached
    EXPECT_TRUE(first.exited && first.code == kCrashExitCode)
        << point << ":" << n << " " << first.Describe();
    // The run reads, unless the crash came before its first commit.
    const WizqResult st = Wizq({"status", "--json"}, run_id);
    if (point == "pg.before_commit" && n == 1) {
      EXPECT_EQ(st.code, 2) << st.Describe();
      EXPECT_TRUE(Contains(st.err, "no wizq run " + run_id)) << st.err;
    } else {
      EXPECT_EQ(st.code, 0)
          << "status right after the crash: " << st.Describe();
      EXPECT_TRUE(ParseJsonOrNull(st.out).is_object()) << st.out;
    }
    WizqResult r;
    for (int i = 0; i < kMaxResumes && r.code != 0; i++) {
      r = Run(dir, cluster_->Location(), run_id)->Wait();
    }
    EXPECT_EQ(r.code, 0) << point << ":" << n << " resumed: " << r.Describe();
    VerifyRun(dir, run_id, 1);
    return true;
  }

  ScratchDir scratch_;
};

TEST_P(PgCrashSweep, Point) {
  // A COMMIT point is passed by every transaction: the first few are the
  // run's opening and first claims, the later ones results.
  const bool pg = IsPgCrashPoint(GetParam());
  const std::vector<int> ns =
      pg ? std::vector<int>{1, 2, 3, 6, 10} : std::vector<int>{1, 2, 3};
  std::string reached;
  for (int n : ns) {
    if (HasFatalFailure()) return;
    if (CrashAndResume(n)) reached += " " + std::to_string(n);
  }
  std::printf("PG-CRASH %s reached at n =%s\n", GetParam(), reached.c_str());
  EXPECT_FALSE(reached.empty()) << GetParam() << " was never passed";
}

std::vector<const char*> SweptPoints() {
  std::vector<const char*> out;
  for (const char* p : kCrashPoints) {
    const std::string s = p;
    if (IsPgCrashPoint(p) || (s.rfind("run.", 0) == 0)) out.push_back(p);
  }
  return out;
}

std::string PointName(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (c == '.') c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(PgCrashPoints, PgCrashSweep,
                         ::testing::ValuesIn(SweptPoints()), PointName);

}  // namespace
}  // namespace wizq::test
