// Contract cases: submitting (dedup), claiming by a filter, completing,
// failing and retrying, finally hooks and settling, finishing a run.
// Seeded from the file-free cases of queue_test.cc and
// queue_claim_steps_test.cc.
#include <thread>

#include "tests/store/store_contract.h"

namespace wizq::store_test {
namespace {

TEST_P(StoreContractTest, DedupUsesCanonicalInputs) {
  auto s = OpenOk(Options());
  ASSERT_EQ(ClaimAny(s.get()), 1);
  struct Case {
    std::string type, inputs;
    int same_as;  // index of an earlier case, or -1: new
  };
  const std::vector<Case> kCases = {
      {"S", R"({"a":1,"b":2})", -1},
      {"S", R"({"b":2,"a":1})", 0},
      {"S", " {\n\t\"b\" : 2.0, \"a\" : 1e0 } ", 0},
      {"T", R"({"a":1,"b":2})", -1},
      {"S", "1", -1},
      {"S", "1.0", 4},
      {"S", "\"\\u0041\"", -1},
      {"S", "\"A\"", 6},
      {"S", "[1,2]", -1},
      {"S", "[2,1]", -1},
      {"S", "\"1\"", -1},
  };
  std::vector<int64_t> ids;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.inputs);
    bool dup = false;
    ids.push_back(Submit(s.get(), MakeTask(c.type, c.inputs, 1), &dup));
    if (c.same_as < 0) {
      EXPECT_FALSE(dup);
      EXPECT_EQ(Get(s.get(), ids.back()).inputs, c.inputs);  // exact text
    } else {
      EXPECT_TRUE(dup);
      EXPECT_EQ(ids.back(), ids[c.same_as]);
    }
  }
  EXPECT_EQ(EventsNamed(s.get(), "task_deduplicated").size(), 4u);
  EXPECT_EQ(CountsOf(s.get()).total, 1 + 7);
  // Ids are dense: 1, 2, 3, ...
  for (int64_t id = 1; id <= 8; id++) EXPECT_EQ(Get(s.get(), id).id, id);
}

TEST_P(StoreContractTest, CompleteWithDuplicateChildrenSpawnsEachOnce) {
  auto s = OpenOk(Options());
  ASSERT_EQ(ClaimAny(s.get()), 1);
  std::vector<int64_t> ids = Complete(
      s.get(), 1,
      {MakeTask("C", R"({"x":1,"y":[1]})", 1), MakeTask("C", R"({"x":2})", 1),
       MakeTask("C", R"({"y":[1.0],"x":1})", 1)});
  EXPECT_EQ(ids, (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(Get(s.get(), 1).children, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Get(s.get(), 1).state, TaskState::kDone);
  bool dup = false;
  EXPECT_EQ(Submit(s.get(), MakeTask("Root", "{\"n\":0.0}", 2), &dup), 1);
  EXPECT_TRUE(dup);
}

TEST_P(StoreContractTest, FinallyTasksDedupOnlyPerOwner) {
  auto s = OpenOk(
      Options({MakeTask("Step", "{\"v\":1}", 0, 1, Origin::kInitial, true),
               MakeTask("Step", "{\"v\":2}", 0, 1, Origin::kInitial, true)}));
  bool dup = false;
  // A hook shares its owner's step and value; it never folds into it.
  int64_t h1 = Submit(
      s.get(), MakeTask("Step", "{\"v\":1}", 0, 1, Origin::kFinally, false, 1),
      &dup);
  EXPECT_FALSE(dup);
  EXPECT_EQ(h1, 3);
  EXPECT_EQ(
      Submit(s.get(),
             MakeTask("Step", "{\"v\":1}", 0, 1, Origin::kFinally, false, 1),
             &dup),
      h1);
  EXPECT_TRUE(dup);
  // Another owner with an equal value gets a hook of its own.
  EXPECT_EQ(
      Submit(s.get(),
             MakeTask("Step", "{\"v\":1}", 0, 1, Origin::kFinally, false, 2),
             &dup),
      4);
  EXPECT_FALSE(dup);
  EXPECT_EQ(Get(s.get(), 3).finally_for, 1);
  EXPECT_EQ(Get(s.get(), 3).origin, Origin::kFinally);
}

TEST_P(StoreContractTest, InvalidInputsAreRejectedAndNothingIsStaged) {
  auto s = OpenOk(Options());
  const int64_t before = CountsOf(s.get()).total;
  std::vector<EventRecord> events;
  ASSERT_TRUE(s->ReadEvents(0, SIZE_MAX, &events).ok());
  const size_t seen = events.size();
  Status st = s->Transact([&](StoreTxn& txn) {
    int64_t id = 0;
    bool dup = false;
    WIZQ_RETURN_IF_ERROR(txn.Submit(MakeTask("S", "{\"ok\":1}"), &id, &dup));
    return txn.Submit(MakeTask("S", "{not json"), &id, &dup);
  });
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
  // The whole transaction is gone, the valid submit with it.
  EXPECT_EQ(CountsOf(s.get()).total, before);
  ASSERT_TRUE(s->ReadEvents(0, SIZE_MAX, &events).ok());
  EXPECT_EQ(events.size(), seen);
  EXPECT_GT(Submit(s.get(), MakeTask("S", "{\"ok\":1}")), 0);
}

TEST_P(StoreContractTest, ClaimsTheLowestIdsTheFilterAllows) {
  auto s = OpenOk(Options({MakeTask("A", "1", 0, 1, Origin::kInitial),
                           MakeTask("B", "2", 0, 1, Origin::kInitial),
                           MakeTask("A", "3", 0, 1, Origin::kInitial),
                           MakeTask("B", "4", 0, 1, Origin::kInitial),
                           MakeTask("P", "5", 0, 1, Origin::kInitial)}));
  // Only B's tasks.
  ClaimFilter f;
  f.steps = {"B"};
  f.max = 5;
  std::vector<Task> got = Claim(s.get(), f);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].id, 2);
  EXPECT_EQ(got[1].id, 4);
  EXPECT_EQ(got[0].attempts, 1);
  EXPECT_EQ(got[0].state, TaskState::kInProgress);
  // Room per step: one more A at most.
  f.steps = {"A"};
  f.room = {{"A", 1}};
  got = Claim(s.get(), f);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, 1);
  f.room = {{"A", 0}};
  EXPECT_TRUE(Claim(s.get(), f).empty());
  // A Prompt step nobody here can ask: only an answered task.
  f = ClaimFilter();
  f.steps = {"P"};
  f.answered_only = {"P"};
  EXPECT_TRUE(Claim(s.get(), f).empty());
  ASSERT_TRUE(s->Transact([](StoreTxn& txn) {
                 return txn.Answer(5, "true", "flag");
               }).ok());
  got = Claim(s.get(), f);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, 5);
  EXPECT_EQ(got[0].answer, "true");
  // A second answer is refused.
  Status st =
      s->Transact([](StoreTxn& txn) { return txn.Answer(5, "false", "flag"); });
  EXPECT_TRUE(st.IsConflict()) << st.ToString();
  EXPECT_EQ(CountsOf(s.get()).of(TaskState::kInProgress), 4);
}

TEST_P(StoreContractTest, HooksAreClaimedOnlyAsHookSteps) {
  auto s = OpenOk(Options({MakeTask("A", "1", 0, 1, Origin::kInitial, true)}));
  ASSERT_EQ(ClaimAny(s.get()), 1);
  Complete(s.get(), 1);
  std::vector<Task> due;
  // No limit, as the run loop asks (SIZE_MAX).
  Status st =
      s->Transact([&](StoreTxn& txn) { return txn.DueHooks(SIZE_MAX, &due); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].id, 1);
  const int64_t hook =
      Submit(s.get(), MakeTask("A", "1", 0, 1, Origin::kFinally, false, 1));
  ClaimFilter f;
  f.steps = {"A"};  // the step's own tasks, not its hooks
  EXPECT_TRUE(Claim(s.get(), f).empty());
  f.hook_steps = {"A"};
  std::vector<Task> got = Claim(s.get(), f);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, hook);
}

TEST_P(StoreContractTest, AttemptsAreCountedAtClaimSoACrashingTaskEndsFailed) {
  StoreOptions o = Options({MakeTask("Root", "{}", 0, 3, Origin::kInitial)});
  for (int attempt = 1; attempt <= 3; attempt++) {
    OpenReport report;
    auto s = OpenOk(o, &report);
    ASSERT_EQ(ClaimAny(s.get()), 1) << attempt;
    EXPECT_EQ(Get(s.get(), 1).attempts, attempt);
    ASSERT_TRUE(
        s->Transact([](StoreTxn& txn) { return txn.MarkStarted({1}); }).ok());
    s.reset();  // dies holding the task (no Close)
  }
  OpenReport report;
  auto s = OpenOk(o, &report);
  EXPECT_EQ(report.tasks_lost, 1);
  Task t = Get(s.get(), 1);
  EXPECT_EQ(t.state, TaskState::kFailed);
  EXPECT_EQ(t.error_reason, "worker_lost");
  EXPECT_EQ(t.attempts, 3);
}

TEST_P(StoreContractTest, FailRetriesUntilMaxAttemptsThenFails) {
  auto s = OpenOk(Options({MakeTask("Root", "{}", 0, 3, Origin::kInitial)}));
  for (int attempt = 1; attempt <= 3; attempt++) {
    ASSERT_EQ(ClaimAny(s.get()), 1);
    const bool again = Fail(s.get(), 1, true);
    EXPECT_EQ(again, attempt < 3);
    Task t = Get(s.get(), 1);
    EXPECT_EQ(t.attempts, attempt);
    EXPECT_EQ(t.state, attempt < 3 ? TaskState::kPending : TaskState::kFailed);
    EXPECT_EQ(t.error_reason, "exit_code");
  }
  EXPECT_EQ(ClaimAny(s.get()), 0);
  // Not retryable: failed at once.
  const int64_t id = Submit(s.get(), MakeTask("S", "{}", 0, 5));
  ASSERT_EQ(ClaimAny(s.get()), id);
  EXPECT_FALSE(Fail(s.get(), id, false));
  EXPECT_EQ(Get(s.get(), id).state, TaskState::kFailed);
}

TEST_P(StoreContractTest, RetryDelayIsRespected) {
  auto s = OpenOk(Options({MakeTask("Root", "{}", 0, 2, Origin::kInitial)}));
  ASSERT_EQ(ClaimAny(s.get()), 1);
  ASSERT_TRUE(Fail(s.get(), 1, true, 300));
  EXPECT_EQ(ClaimAny(s.get()), 0);  // not before its retry time
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(ClaimAny(s.get()), 1);
}

TEST_P(StoreContractTest, OnlyTheHolderCanCompleteOrFail) {
  auto a = OpenOk(Options());
  auto b = OpenOk(Options());  // a second live worker of the run
  ASSERT_EQ(ClaimAny(a.get()), 1);
  std::vector<int64_t> ids;
  Status st = b->Transact(
      [&](StoreTxn& txn) { return txn.Complete(1, Completion(), &ids); });
  EXPECT_TRUE(st.IsConflict()) << st.ToString();
  Failure f;
  f.reason = "exit_code";
  bool again = false;
  st = b->Transact([&](StoreTxn& txn) { return txn.Fail(1, f, &again); });
  EXPECT_TRUE(st.IsConflict()) << st.ToString();
  st =
      b->Transact([&](StoreTxn& txn) { return txn.Release(1, "interrupted"); });
  EXPECT_TRUE(st.IsConflict()) << st.ToString();
  EXPECT_EQ(Get(b.get(), 1).state, TaskState::kInProgress);
  Complete(a.get(), 1);
  EXPECT_EQ(Get(b.get(), 1).state, TaskState::kDone);
}

TEST_P(StoreContractTest, TwoHoldersClaimDisjointTasks) {
  std::vector<NewTask> roots;
  for (int i = 0; i < 40; i++) {
    roots.push_back(MakeTask("S", "{\"i\":" + std::to_string(i) + "}", 0, 1,
                             Origin::kInitial));
  }
  auto a = OpenOk(Options(roots));
  auto b = OpenOk(Options(roots));
  std::vector<int64_t> got_a, got_b;
  auto work = [&](Store* s, std::vector<int64_t>* got) {
    while (true) {
      std::vector<Task> t = Claim(s, AnyOf({"S"}, 3));
      if (t.empty()) return;
      for (const Task& x : t) got->push_back(x.id);
    }
  };
  std::thread ta(work, a.get(), &got_a);
  std::thread tb(work, b.get(), &got_b);
  ta.join();
  tb.join();
  std::vector<int64_t> all = got_a;
  all.insert(all.end(), got_b.begin(), got_b.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 40u);
  for (int i = 0; i < 40; i++) EXPECT_EQ(all[i], i + 1);  // each once
}

TEST_P(StoreContractTest, ReleaseGivesATaskBackWithoutCountingIt) {
  auto s = OpenOk(Options({MakeTask("Root", "{}", 0, 1, Origin::kInitial)}));
  ASSERT_EQ(ClaimAny(s.get()), 1);
  ASSERT_TRUE(s->Transact([](StoreTxn& txn) {
                 return txn.Release(1, "interrupted");
               }).ok());
  Task t = Get(s.get(), 1);
  EXPECT_EQ(t.state, TaskState::kPending);
  EXPECT_EQ(t.attempts, 0);
  EXPECT_EQ(ClaimAny(s.get()), 1);
  EXPECT_EQ(Get(s.get(), 1).attempts, 1);
}

TEST_P(StoreContractTest, FinallyHookIsDueOnceTheTaskAndItsSubtreeSettle) {
  auto s = OpenOk(Options({MakeTask("A", "1", 0, 1, Origin::kInitial, true)}));
  auto due = [&] {
    std::vector<Task> owners;
    EXPECT_TRUE(s->Transact([&](StoreTxn& txn) {
                   return txn.DueHooks(10, &owners);
                 }).ok());
    std::vector<int64_t> ids;
    for (const Task& t : owners) ids.push_back(t.id);
    return ids;
  };
  ASSERT_EQ(ClaimAny(s.get()), 1);
  Complete(s.get(), 1, {MakeTask("B", "2", 1), MakeTask("B", "3", 1)});
  EXPECT_TRUE(due().empty());  // its children are open
  ASSERT_EQ(ClaimAny(s.get()), 2);
  Complete(s.get(), 2);
  EXPECT_TRUE(due().empty());
  ASSERT_EQ(ClaimAny(s.get()), 3);
  EXPECT_FALSE(Fail(s.get(), 3, false));  // failed for good: settled too
  EXPECT_EQ(due(), (std::vector<int64_t>{1}));
  Submit(s.get(), MakeTask("A", "1", 0, 1, Origin::kFinally, false, 1));
  EXPECT_TRUE(due().empty());                   // submitted once
  EXPECT_FALSE(CountsOf(s.get()).all_settled);  // the hook is pending
}

TEST_P(StoreContractTest, FailedTaskHasNoHookAndSettlesItsParent) {
  auto s = OpenOk(Options({MakeTask("A", "1", 0, 1, Origin::kInitial, false)}));
  ASSERT_EQ(ClaimAny(s.get()), 1);
  Complete(s.get(), 1, {MakeTask("B", "2", 1, 1, Origin::kSpawned, true)});
  ASSERT_EQ(ClaimAny(s.get()), 2);
  EXPECT_FALSE(Fail(s.get(), 2, false));
  std::vector<Task> owners;
  ASSERT_TRUE(s->Transact([&](StoreTxn& txn) {
                 return txn.DueHooks(10, &owners);
               }).ok());
  EXPECT_TRUE(owners.empty());
  EXPECT_TRUE(CountsOf(s.get()).all_settled);
}

TEST_P(StoreContractTest, FinishIfSettledFinishesOnceEverythingSettled) {
  auto s = OpenOk(Options());
  RunStatus status = RunStatus::kRunning;
  auto finish = [&] {
    EXPECT_TRUE(s->Transact([&](StoreTxn& txn) {
                   return txn.FinishIfSettled(5, &status);
                 }).ok());
    return status;
  };
  EXPECT_EQ(finish(), RunStatus::kRunning);
  ASSERT_EQ(ClaimAny(s.get()), 1);
  EXPECT_EQ(finish(), RunStatus::kRunning);
  Complete(s.get(), 1, {MakeTask("B", "2", 1)});
  EXPECT_EQ(finish(), RunStatus::kRunning);
  ASSERT_EQ(ClaimAny(s.get()), 2);
  EXPECT_FALSE(Fail(s.get(), 2, false));
  EXPECT_EQ(finish(), RunStatus::kFailed);
  EXPECT_EQ(EventsNamed(s.get(), "run_finished").size(), 1u);
  EXPECT_EQ(finish(), RunStatus::kFailed);  // once
  EXPECT_EQ(EventsNamed(s.get(), "run_finished").size(), 1u);
  RunInfo run;
  ASSERT_TRUE(s->GetRun(&run).ok());
  EXPECT_EQ(run.status, RunStatus::kFailed);
}

TEST_P(StoreContractTest, AllSettledNeedsAtLeastOneTask) {
  auto s = OpenOk(Options({}));
  EXPECT_FALSE(CountsOf(s.get()).all_settled);
  EXPECT_EQ(CountsOf(s.get()).total, 0);
}

TEST_P(StoreContractTest, AttachingAChildToADueTaskMakesItWaitAgain) {
  auto s = OpenOk(Options({MakeTask("A", "1", 0, 1, Origin::kInitial, true)}));
  ASSERT_EQ(ClaimAny(s.get()), 1);
  Complete(s.get(), 1);
  std::vector<Task> owners;
  ASSERT_TRUE(s->Transact([&](StoreTxn& txn) {
                 return txn.DueHooks(10, &owners);
               }).ok());
  ASSERT_EQ(owners.size(), 1u);
  // A hook of a child attaches its output to the child's parent.
  Submit(s.get(), MakeTask("B", "2", 1));
  owners.clear();
  ASSERT_TRUE(s->Transact([&](StoreTxn& txn) {
                 return txn.DueHooks(10, &owners);
               }).ok());
  EXPECT_TRUE(owners.empty());
}

TEST_P(StoreContractTest, EventsHaveADenseSeqInCommitOrder) {
  auto s = OpenOk(Options());
  ASSERT_EQ(ClaimAny(s.get()), 1);
  Complete(s.get(), 1, {MakeTask("B", "2", 1), MakeTask("B", "3", 1)});
  std::vector<EventRecord> all;
  ASSERT_TRUE(s->ReadEvents(0, SIZE_MAX, &all).ok());
  ASSERT_GE(all.size(), 5u);
  for (size_t i = 0; i < all.size(); i++) {
    EXPECT_EQ(all[i].seq, static_cast<int64_t>(i + 1));
    EXPECT_EQ(IntField(all[i].line, "seq"), all[i].seq);
  }
  EXPECT_EQ(EventName(all[0].line), "run_started");
  // Paging by seq.
  std::vector<EventRecord> page;
  ASSERT_TRUE(s->ReadEvents(2, 2, &page).ok());
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].seq, 3);
  EXPECT_EQ(page[1].line, all[3].line);
}

TEST_P(StoreContractTest, ListTasksFiltersAndPages) {
  auto s = OpenOk(Options());
  ASSERT_EQ(ClaimAny(s.get()), 1);
  Complete(
      s.get(), 1,
      {MakeTask("B", "2", 1), MakeTask("C", "3", 1), MakeTask("B", "4", 1)});
  std::vector<Task> got;
  TaskFilter f;
  f.steps = {"B"};
  ASSERT_TRUE(s->ListTasks(f, &got).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].id, 2);
  EXPECT_EQ(got[1].id, 4);
  f = TaskFilter();
  f.parent_id = 1;
  f.limit = 2;
  ASSERT_TRUE(s->ListTasks(f, &got).ok());
  ASSERT_EQ(got.size(), 2u);
  f.after_id = got.back().id;
  ASSERT_TRUE(s->ListTasks(f, &got).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, 4);
  f = TaskFilter();
  f.states = {TaskState::kDone};
  ASSERT_TRUE(s->ListTasks(f, &got).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, 1);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreContractTest,
                         ::testing::ValuesIn(Factories()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace wizq::store_test
