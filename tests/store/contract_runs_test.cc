// The store contract: the runs of a location (Store::WhileCurrent).
#include "tests/store/store_contract.h"

namespace wizq::store_test {
namespace {

// A reader's WhileCurrent runs its callback while its run is the current
// one, and refuses (Conflict, the callback not called) once that run was
// archived by a fresh start, as `wizq prune` relies on.
TEST_P(StoreContractTest, WhileCurrentRefusesOnceTheRunWasArchived) {
  StoreOptions o = Options({MakeTask("A", "{}")});
  ASSERT_TRUE(OpenOk(o)->Close().ok());
  StoreOptions ro = o;
  ro.mode = OpenMode::kReadOnly;
  std::unique_ptr<Store> reader = OpenOk(ro);
  ASSERT_NE(reader, nullptr);
  int calls = 0;
  auto fn = [&] {
    calls++;
    return Status::OK();
  };
  Status s = reader->WhileCurrent(fn);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(calls, 1);

  StoreOptions fresh = o;
  fresh.mode = OpenMode::kFresh;
  std::unique_ptr<Store> writer = OpenOk(fresh);
  ASSERT_NE(writer, nullptr);
  s = writer->WhileCurrent(fn);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(calls, 2);
  s = reader->WhileCurrent(fn);
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  EXPECT_EQ(calls, 2) << "called for an archived run";
  ASSERT_TRUE(writer->Close().ok());

  // The archived run, opened as such, is never the current one.
  std::vector<RunRef> runs;
  ASSERT_TRUE(reader->ListRuns(&runs).ok());
  for (const RunRef& r : runs) {
    if (!r.archived) continue;
    std::unique_ptr<Store> old;
    ASSERT_TRUE(reader->OpenRun(r, &old).ok());
    EXPECT_TRUE(old->WhileCurrent(fn).IsConflict());
  }
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace wizq::store_test
