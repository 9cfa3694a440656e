// Contract cases for what the run loop (orchestrator/run_claim.cc,
// orchestrator/run_reuse.cc) passes to a store as data: claims bounded by
// an id and skipping declined tasks, pending tasks listed by step, the
// imported count, and the reuse choices recorded with a fresh run.
#include "queue/import.h"
#include "tests/store/store_contract.h"

namespace wizq::store_test {
namespace {

std::vector<int64_t> Ids(const std::vector<Task>& tasks) {
  std::vector<int64_t> ids;
  for (const Task& t : tasks) ids.push_back(t.id);
  return ids;
}

TEST_P(StoreContractTest, ClaimStopsBelowTheIdBoundAndSkipsDeclinedTasks) {
  auto s = OpenOk(Options({MakeTask("A", "1", 0, 1, Origin::kInitial),
                           MakeTask("A", "2", 0, 1, Origin::kInitial),
                           MakeTask("B", "3", 0, 1, Origin::kInitial),
                           MakeTask("A", "4", 0, 1, Origin::kInitial),
                           MakeTask("A", "5", 0, 1, Origin::kInitial)}));
  ClaimFilter f;
  f.steps = {"A"};
  f.max = 10;
  f.skip_ids = {2};
  f.below_id = 5;  // 5 would overtake a task the caller wants first
  EXPECT_EQ(Ids(Claim(s.get(), f)), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(Get(s.get(), 2).state, TaskState::kPending);
  EXPECT_EQ(Get(s.get(), 5).state, TaskState::kPending);
  f.below_id = 0;  // no bound
  EXPECT_EQ(Ids(Claim(s.get(), f)), (std::vector<int64_t>{5}));
  f.skip_ids.clear();
  EXPECT_EQ(Ids(Claim(s.get(), f)), (std::vector<int64_t>{2}));
}

TEST_P(StoreContractTest, PendingTasksOfStepsAreListedInIdOrder) {
  auto s = OpenOk(Options({MakeTask("A", "1", 0, 1, Origin::kInitial),
                           MakeTask("B", "2", 0, 1, Origin::kInitial),
                           MakeTask("C", "3", 0, 1, Origin::kInitial),
                           MakeTask("B", "4", 0, 1, Origin::kInitial),
                           MakeTask("A", "5", 0, 1, Origin::kInitial)}));
  ClaimFilter only_one;
  only_one.steps = {"A"};
  ASSERT_EQ(Ids(Claim(s.get(), only_one)), (std::vector<int64_t>{1}));
  TaskFilter f;
  f.states = {TaskState::kPending};
  f.steps = {"A", "B", "B"};  // a step named twice counts once
  std::vector<Task> got;
  ASSERT_TRUE(s->ListTasks(f, &got).ok());
  EXPECT_EQ(Ids(got), (std::vector<int64_t>{2, 4, 5}));
  f.limit = 1;  // the first pending task of the steps
  ASSERT_TRUE(s->ListTasks(f, &got).ok());
  EXPECT_EQ(Ids(got), (std::vector<int64_t>{2}));
  f.after_id = 2;
  f.limit = 2;
  ASSERT_TRUE(s->ListTasks(f, &got).ok());
  EXPECT_EQ(Ids(got), (std::vector<int64_t>{4, 5}));
}

TEST_P(StoreContractTest, CountsTellTasksThatFinishedBeforeAnImport) {
  RunImport import;
  import.source = "test";
  ImportedTask done;
  done.task = MakeTask("A", "1", 0, 1, Origin::kInitial);
  done.state = TaskState::kDone;
  ImportedTask failed;
  failed.task = MakeTask("A", "2", 0, 1, Origin::kInitial);
  failed.state = TaskState::kFailed;
  failed.failures.push_back({std::string(kReasonExitCode), "exit code 1"});
  ImportedTask pending;
  pending.task = MakeTask("A", "3", 0, 1, Origin::kInitial);
  import.tasks = {done, failed, pending};
  StoreOptions o = Options({});
  o.import = &import;
  auto s = OpenOk(o);
  const RunCounts c = CountsOf(s.get());
  EXPECT_EQ(c.total, 3);
  EXPECT_EQ(c.imported, 2);
  EXPECT_EQ(c.of(TaskState::kPending), 1);
}

TEST_P(StoreContractTest, AFreshRunRecordsWhatItMayReuse) {
  {
    auto first = OpenOk(Options());
    ASSERT_TRUE(first->Close().ok());
  }
  StoreOptions o = Options();
  o.mode = OpenMode::kFresh;
  o.no_reuse = true;
  o.from = {"Step", "7"};
  OpenReport report;
  auto s = OpenOk(o, &report);
  EXPECT_FALSE(report.archived_to.empty());
  RunInfo run;
  ASSERT_TRUE(s->GetRun(&run).ok());
  EXPECT_EQ(run.previous_run, report.archived_to);
  EXPECT_TRUE(run.no_reuse);
  EXPECT_EQ(run.from, (std::vector<std::string>{"Step", "7"}));
}

}  // namespace
}  // namespace wizq::store_test
