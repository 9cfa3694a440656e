// Tests of the queue store (queue/dir/queue.h): dedup (SPEC §6.4), the task
// transitions and finally bookkeeping. Start and resume decisions are in
// queue_open_test.cc, checkpoints in queue_checkpoint_test.cc.
#include "queue/dir/queue.h"

#include <gtest/gtest.h>

#include <limits>

#include "tests/queue_fixture.h"

namespace wizq {
namespace queue_fixture {
namespace {

// --- dedup -------------------------------------------------------------------

TEST_F(QueueTest, DedupUsesCanonicalInputs) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  struct Case {
    std::string type, inputs;
    int64_t expect_same_as;  // index into ids, or -1: new
  };
  const std::vector<Case> kCases = {
      {"S", R"({"a":1,"b":2})", -1},                            // 0
      {"S", R"({"b":2,"a":1})", 0},                             // 1
      {"S", " {\n\t\"b\" : 2.0, \"a\" : 1e0 } ", 0},            // 2
      {"T", R"({"a":1,"b":2})", -1},                            // 3 other type
      {"S", "1", -1},                                           // 4
      {"S", "1.0", 4},                                          // 5
      {"S", "1e0", 4},                                          // 6
      {"S", "\"\\u0041\"", -1},                                 // 7
      {"S", "\"A\"", 7},                                        // 8
      {"S", R"({"o":{"x":[1,{"p":1,"q":2}],"y":null}})", -1},   // 9
      {"S", R"({"o":{"y":null,"x":[1.0,{"q":2,"p":1}]}})", 9},  // 10
      {"S", "[1,2]", -1},                                       // 11
      {"S", "[2,1]", -1},                   // 12 order matters
      {"S", "\"1\"", -1},                   // 13 not the number
      {"S", R"({"a":1,"b":2,"c":3})", -1},  // 14
  };
  std::vector<int64_t> ids;
  std::vector<bool> dups;
  Status s = q->Transact([&](Txn& txn) {
    for (const Case& c : kCases) {
      int64_t id = 0;
      bool dup = false;
      WIZQ_RETURN_IF_ERROR(
          txn.Submit(MakeTask(c.type, c.inputs, 1), &id, &dup));
      ids.push_back(id);
      dups.push_back(dup);
    }
    return Status::OK();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<std::string> dedup_lines =
      LinesOf(LogPath(), "task_deduplicated");
  size_t dedup_seen = 0;
  for (size_t i = 0; i < kCases.size(); i++) {
    SCOPED_TRACE(kCases[i].inputs);
    if (kCases[i].expect_same_as < 0) {
      EXPECT_FALSE(dups[i]);
      EXPECT_EQ(q->state().Find(ids[i])->inputs, kCases[i].inputs);
      for (size_t j = 0; j < i; j++) EXPECT_NE(ids[i], ids[j]);
    } else {
      EXPECT_TRUE(dups[i]);
      EXPECT_EQ(ids[i], ids[kCases[i].expect_same_as]);
      ASSERT_LT(dedup_seen, dedup_lines.size());
      EXPECT_EQ(IntField(dedup_lines[dedup_seen], "existing_id"), ids[i]);
      EXPECT_EQ(StrField(dedup_lines[dedup_seen], "type"), kCases[i].type);
      dedup_seen++;
    }
  }
  EXPECT_EQ(dedup_seen, dedup_lines.size());
  // 1 root + the new ones.
  EXPECT_EQ(q->state().total(), 1 + 9);

  // The keys survive a resume from the snapshot and from the log alone.
  ASSERT_TRUE(q->Checkpoint().ok());
  q.reset();
  for (bool drop_snapshot : {false, true}) {
    if (drop_snapshot) fs::remove(SnapshotPath());
    q = OpenOk(Options());
    bool dup = false;
    EXPECT_EQ(Submit(q.get(), MakeTask("S", R"({"b":2.00,"a":1})", 1), &dup),
              ids[0]);
    EXPECT_TRUE(dup);
    EXPECT_EQ(Submit(q.get(), MakeTask("T", R"({"b":2,"a":1})", 1), &dup),
              ids[3]);
    EXPECT_TRUE(dup);
    q.reset();
  }
}

TEST_F(QueueTest, CompleteWithDuplicateChildrenSpawnsEachOnce) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  std::vector<int64_t> ids = Complete(
      q.get(), 1,
      {MakeTask("C", R"({"x":1,"y":[1]})", 1), MakeTask("C", R"({"x":2})", 1),
       MakeTask("C", R"({"y":[1.0],"x":1})", 1),
       MakeTask("C", R"({"x":1, "y":[1]})", 1)});
  EXPECT_EQ(ids, (std::vector<int64_t>{2, 3, 2, 2}));
  EXPECT_EQ(q->state().Find(1)->children, (std::vector<int64_t>{2, 3}));
  std::vector<std::string> completed = LinesOf(LogPath(), "task_completed");
  ASSERT_EQ(completed.size(), 1u);
  EXPECT_TRUE(Contains(completed[0], "\"spawned\":[2,3]")) << completed[0];
  EXPECT_TRUE(Contains(completed[0], "\"deduplicated\":[2,2]")) << completed[0];
  EXPECT_EQ(LinesOf(LogPath(), "task_deduplicated").size(), 2u);
  // A spawned task equal to an existing root is deduplicated as well.
  bool dup = false;
  EXPECT_EQ(Submit(q.get(), MakeTask("Root", "{\"n\":0.0}", 2), &dup), 1);
  EXPECT_TRUE(dup);
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, FinallyTasksDedupOnlyPerOwner) {
  QueueOptions o = Options();
  o.initial_tasks = {
      MakeTask("Step", "{\"v\":1}", 0, 1, Origin::kInitial, true),
      MakeTask("Step", "{\"v\":2}", 0, 1, Origin::kInitial, true)};
  auto q = OpenOk(o);
  for (int i = 0; i < 2; i++) {
    const int64_t id = Claim(q.get());
    Complete(q.get(), id);
  }
  EXPECT_EQ(q->state().hooks_due(), (std::set<int64_t>{1, 2}));
  // Same step, same value for two owners: two hooks.
  NewTask h1 =
      MakeTask("Hook", "{\"same\":true}", 0, 1, Origin::kFinally, false, 1);
  NewTask h2 = h1;
  h2.finally_for = 2;
  bool dup = true;
  const int64_t id1 = Submit(q.get(), h1, &dup);
  EXPECT_FALSE(dup);
  const int64_t id2 = Submit(q.get(), h2, &dup);
  EXPECT_FALSE(dup);
  EXPECT_NE(id1, id2);
  // A second hook for the same owner (whatever its value) is a duplicate.
  NewTask again = h1;
  again.inputs = "{\"other\":1}";
  EXPECT_EQ(Submit(q.get(), again, &dup), id1);
  EXPECT_TRUE(dup);
  // A hook never collides with a spawned task of the same step and value,
  // nor with its owner (which shares them by design).
  EXPECT_NE(Submit(q.get(), MakeTask("Hook", "{\"same\":true}", 0), &dup), id1);
  EXPECT_FALSE(dup);
  EXPECT_EQ(q->state().Find(id1)->finally_for, 1);
  EXPECT_EQ(q->state().Find(1)->finally_task, id1);
  EXPECT_EQ(q->state().Find(2)->finally_task, id2);
  EXPECT_TRUE(q->state().hooks_due().empty());
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, InvalidInputsAreRejectedAndNothingIsStaged) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  const std::string state_before = Describe(q->state());
  const std::string log_before = ReadAll(LogPath());
  for (const char* bad : {"{bad", "", "[1,]", "{\"a\":1} x"}) {
    Status s = q->Transact([&](Txn& txn) {
      int64_t id;
      bool dup;
      WIZQ_RETURN_IF_ERROR(
          txn.Submit(MakeTask("C", "{\"ok\":1}", 1), &id, &dup));
      return txn.Submit(MakeTask("C", bad, 1), &id, &dup);
    });
    EXPECT_TRUE(s.IsInvalidArgument()) << bad << ": " << s.ToString();
    // Neither the valid submit before it nor anything else was kept.
    EXPECT_EQ(Describe(q->state()), state_before);
    EXPECT_EQ(ReadAll(LogPath()), log_before);
    // The same through Complete: the task stays in progress.
    s = q->Transact([&](Txn& txn) {
      return txn.Complete(
          1, {MakeTask("C", "{\"ok\":2}", 1), MakeTask("C", bad, 1)}, nullptr);
    });
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_EQ(Describe(q->state()), state_before);
    EXPECT_EQ(ReadAll(LogPath()), log_before);
  }
  // A failing callback discards what it staged; the queue goes on.
  Status s = q->Transact([&](Txn& txn) {
    int64_t id;
    bool dup;
    WIZQ_RETURN_IF_ERROR(txn.Submit(MakeTask("C", "{\"ok\":3}", 1), &id, &dup));
    return Status::Conflict("changed my mind");
  });
  EXPECT_TRUE(s.IsConflict());
  EXPECT_EQ(Describe(q->state()), state_before);
  EXPECT_EQ(Complete(q.get(), 1, {MakeTask("C", "{\"ok\":1}", 1)}),
            (std::vector<int64_t>{2}));
  ExpectDiskMatches(q.get());
}

// A callback that ignores a failed transition must not get that transition
// committed: the log would hold an event that cannot be applied.
TEST_F(QueueTest, TransitionThatFailedToStageIsNeverCommitted) {
  auto q = OpenOk(Options());
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1);
  const std::string log_before = ReadAll(LogPath());
  const std::string state_before = Describe(q->state());
  Status s = q->Transact([&](Txn& txn) {
    int64_t id;
    bool dup;
    // No task 99: the submit fails; the callback carries on regardless.
    Status ignored = txn.Submit(MakeTask("C", "{}", 99), &id, &dup);
    EXPECT_FALSE(ignored.ok());
    return Status::OK();
  });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(ReadAll(LogPath()), log_before);
  EXPECT_EQ(Describe(q->state()), state_before);
  // Nor when the parent has settled already.
  s = q->Transact([&](Txn& txn) {
    int64_t id;
    bool dup;
    Status ignored = txn.Submit(MakeTask("C", "{}", 1), &id, &dup);
    EXPECT_FALSE(ignored.ok());
    return Status::OK();
  });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(ReadAll(LogPath()), log_before);
  EXPECT_EQ(Describe(q->state()), state_before);
  // And the run is still readable and usable.
  EXPECT_EQ(Submit(q.get(), MakeTask("C", "{}", 0)), 2);
  q.reset();
  q = OpenOk(Options());
  ASSERT_TRUE(q);
  EXPECT_EQ(q->state().total(), 2);
}

// --- events -----------------------------------------------------------------

// QueueState checks the seq of every event it applies, as a second line of
// defence behind ParseLog: each must follow the last one.
TEST(QueueStateTest, EventSeqMustFollowTheLastOne) {
  const std::string started =
      "{\"seq\":1,\"ts\":1,\"event\":\"run_started\",\"format\":1,"
      "\"run_id\":\"r\",\"install_dir\":\"/x\",\"wizq_version\":\"t\","
      "\"pid\":1,\"input\":{},\"workflow\":{}}";
  auto joined = [](int seq) {
    return "{\"seq\":" + std::to_string(seq) +
           ",\"ts\":2,\"event\":\"worker_joined\",\"worker\":\"w\","
           "\"pid\":1}";
  };
  for (int seq : {3, 1, 0}) {
    QueueState state;
    ASSERT_TRUE(state.ApplyEvent(started).ok());
    Status s = state.ApplyEvent(joined(seq));
    EXPECT_TRUE(s.IsCorruption()) << seq << ": " << s.ToString();
    EXPECT_EQ(state.last_seq(), 1);
  }
  QueueState state;
  ASSERT_TRUE(state.ApplyEvent(started).ok());
  EXPECT_TRUE(state.ApplyEvent(joined(2)).ok());
  EXPECT_EQ(state.last_seq(), 2);
}

// The resume count stays within what a snapshot may hold: a run_resumed
// beyond it is corruption, not a signed overflow (queue_open_fuzzer;
// corpus regress-resumed-at-int-max).
TEST(QueueStateTest, ResumeCountStaysInRange) {
  const int max = std::numeric_limits<int>::max();
  for (int before : {0, max - 2, max - 1}) {
    QueueState state;
    state.mutable_run()->resumes = before;
    Status s =
        state.ApplyEvent("{\"seq\":1,\"ts\":1,\"event\":\"run_resumed\"}");
    if (before < max - 1) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(state.run().resumes, before + 1);
    } else {
      EXPECT_TRUE(s.IsCorruption()) << s.ToString();
      EXPECT_EQ(state.run().resumes, before);
    }
  }
}

// --- transitions
// ---------------------------------------------------------------

TEST_F(QueueTest, ClaimsInIdOrderAndHonoursAccept) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("X", "1", 0, 1, Origin::kInitial),
                     MakeTask("Y", "2", 0, 1, Origin::kInitial),
                     MakeTask("X", "3", 0, 1, Origin::kInitial),
                     MakeTask("Y", "4", 0, 1, Origin::kInitial)};
  auto q = OpenOk(o);
  auto only_y = [](const Task& t) { return t.type == "Y"; };
  EXPECT_EQ(Claim(q.get(), only_y), 2);
  EXPECT_EQ(Claim(q.get()), 1);
  EXPECT_EQ(Claim(q.get(), only_y), 4);
  EXPECT_EQ(Claim(q.get(), only_y), 0);
  EXPECT_EQ(Claim(q.get()), 3);
  EXPECT_EQ(Claim(q.get()), 0);
  for (int64_t id = 1; id <= 4; id++) {
    EXPECT_EQ(q->state().Find(id)->state, TaskState::kInProgress);
    EXPECT_EQ(q->state().Find(id)->claimed_by, q->worker_id());
  }
  EXPECT_EQ(q->state().count(TaskState::kInProgress), 4);
  std::vector<std::string> claims = LinesOf(LogPath(), "task_claimed");
  ASSERT_EQ(claims.size(), 4u);
  EXPECT_EQ(IntField(claims[0], "id"), 2);
  EXPECT_EQ(StrField(claims[0], "worker"), q->worker_id());
  EXPECT_EQ(IntField(claims[0], "attempt"), 1);
}

TEST_F(QueueTest, AttemptsAreCountedAtClaimSoACrashingTaskEndsFailed) {
  // A task that kills its worker every time: max_attempts 2.
  for (int crash = 1; crash <= 2; crash++) {
    OpenReport report;
    auto q = OpenOk(Options(), &report);
    if (crash == 2) {
      EXPECT_EQ(report.tasks_reset, 1);
    }
    ASSERT_EQ(Claim(q.get()), 1);
    EXPECT_EQ(q->state().Find(1)->attempts, crash);
    EXPECT_EQ(IntField(LinesOf(LogPath(), "task_claimed").back(), "attempt"),
              crash);
    q.reset();  // the worker dies
  }
  OpenReport report;
  auto q = OpenOk(Options(), &report);
  EXPECT_EQ(report.tasks_reset, 0);
  EXPECT_EQ(report.tasks_lost, 1);
  const Task* t = q->state().Find(1);
  EXPECT_EQ(t->state, TaskState::kFailed);
  EXPECT_EQ(t->attempts, 2);
  EXPECT_EQ(t->error_reason, kReasonWorkerLost);
  EXPECT_TRUE(q->state().AllSettled());
  EXPECT_EQ(Claim(q.get()), 0);
  std::vector<std::string> failed = LinesOf(LogPath(), "task_failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(StrField(failed[0], "reason"), "worker_lost");
  EXPECT_TRUE(Contains(failed[0], "\"will_retry\":false"));
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, FailRetriesUntilMaxAttemptsThenFails) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("R", "1", 0, 3, Origin::kInitial),
                     MakeTask("N", "2", 0, 3, Origin::kInitial)};
  auto q = OpenOk(o);
  for (int attempt = 1; attempt <= 3; attempt++) {
    ASSERT_EQ(Claim(q.get()), 1);
    EXPECT_EQ(q->state().Find(1)->attempts, attempt);
    EXPECT_EQ(Fail(q.get(), 1, /*retryable=*/true), attempt < 3);
    EXPECT_EQ(q->state().Find(1)->state,
              attempt < 3 ? TaskState::kPending : TaskState::kFailed);
    EXPECT_EQ(q->state().Find(1)->error_reason, kReasonExitCode);
    EXPECT_EQ(q->state().Find(1)->error_message, "exit 1");
  }
  std::vector<std::string> failed = LinesOf(LogPath(), "task_failed");
  ASSERT_EQ(failed.size(), 3u);
  EXPECT_TRUE(Contains(failed[0], "\"will_retry\":true"));
  EXPECT_TRUE(Contains(failed[2], "\"will_retry\":false"));
  EXPECT_EQ(StrField(failed[2], "reason"), "exit_code");
  // Not retryable: failed at once, attempts left or not.
  ASSERT_EQ(Claim(q.get()), 2);
  EXPECT_FALSE(Fail(q.get(), 2, /*retryable=*/false));
  EXPECT_EQ(q->state().Find(2)->state, TaskState::kFailed);
  EXPECT_EQ(q->state().Find(2)->attempts, 1);
  EXPECT_TRUE(q->state().AllSettled());
  EXPECT_EQ(Claim(q.get()), 0);
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, RetryAtIsRespected) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("A", "1", 0, 5, Origin::kInitial),
                     MakeTask("B", "2", 0, 5, Origin::kInitial),
                     MakeTask("C", "3", 0, 5, Origin::kInitial)};
  auto q = OpenOk(o);
  ASSERT_EQ(Claim(q.get()), 1);
  ASSERT_EQ(Claim(q.get()), 2);
  ASSERT_EQ(Claim(q.get()), 3);
  EXPECT_TRUE(Fail(q.get(), 1, true, 3600 * 1000));  // an hour
  EXPECT_TRUE(Fail(q.get(), 2, true, 150));
  EXPECT_TRUE(Fail(q.get(), 3, true, 0));
  const auto failed_at = std::chrono::steady_clock::now();
  EXPECT_GT(q->state().Find(1)->retry_at_ms, q->state().Find(3)->retry_at_ms);
  // Task 3 is ready at once; 1 and 2 are pending but not ready.
  EXPECT_EQ(Claim(q.get()), 3);
  if (std::chrono::steady_clock::now() - failed_at <
      std::chrono::milliseconds(140)) {
    EXPECT_EQ(Claim(q.get()), 0);
  }
  EXPECT_EQ(q->state().Find(1)->state, TaskState::kPending);
  EXPECT_EQ(q->state().Find(2)->state, TaskState::kPending);
  std::this_thread::sleep_until(failed_at + std::chrono::milliseconds(200));
  EXPECT_EQ(Claim(q.get()), 2);
  EXPECT_EQ(Claim(q.get()), 0);
  Complete(q.get(), 2);
  Complete(q.get(), 3);
  // The delay is durable: still not claimable after a resume.
  ASSERT_TRUE(q->Close().ok());
  q = OpenOk(Options());
  EXPECT_EQ(Claim(q.get()), 0);
  EXPECT_EQ(q->state().Find(1)->state, TaskState::kPending);
  EXPECT_GT(q->state().Find(1)->retry_at_ms, 0);
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, OnlyTheHolderCanCompleteOrFail) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("A", "1", 0, 2, Origin::kInitial),
                     MakeTask("B", "2", 0, 2, Origin::kInitial)};
  auto q1 = OpenOk(o);
  auto q2 = OpenOk(o);
  ASSERT_EQ(Claim(q1.get()), 1);
  const std::string log_before = ReadAll(LogPath());
  bool retry = false;
  Status s =
      q2->Transact([&](Txn& txn) { return txn.Complete(1, {}, nullptr); });
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  s = q2->Transact([&](Txn& txn) {
    return txn.Fail(1, kReasonTimeout, "", true, 0, &retry);
  });
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  // Not claimed by anyone, or not a task at all.
  s = q1->Transact([&](Txn& txn) { return txn.Complete(2, {}, nullptr); });
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  s = q1->Transact([&](Txn& txn) { return txn.Complete(99, {}, nullptr); });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(ReadAll(LogPath()), log_before);
  // The holder still can; afterwards nobody can complete it again.
  Complete(q1.get(), 1);
  s = q1->Transact([&](Txn& txn) { return txn.Complete(1, {}, nullptr); });
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  s = q2->Transact([&](Txn& txn) { return txn.Complete(1, {}, nullptr); });
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  // Conflicts do not stop a queue.
  EXPECT_EQ(Claim(q2.get()), 2);
  Complete(q2.get(), 2);
  EXPECT_TRUE(q2->state().AllSettled());
}

TEST_F(QueueTest, EveryTransactionPutsBackOnlyDeadClaims) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("A", "1", 0, 2, Origin::kInitial),
                     MakeTask("B", "2", 0, 1, Origin::kInitial),
                     MakeTask("C", "3", 0, 2, Origin::kInitial)};
  auto q1 = OpenOk(o);
  auto q2 = OpenOk(o);
  ASSERT_EQ(Claim(q2.get()), 1);
  ASSERT_EQ(Claim(q2.get()), 2);
  ASSERT_EQ(Claim(q1.get()), 3);
  int64_t reset = -1, lost = -1;
  auto reset_dead = [&](Queue* q) {
    reset = lost = 0;
    Status s = q->Transact([&](Txn& txn) {
      reset = static_cast<int64_t>(txn.reclaimed().reset.size());
      lost = static_cast<int64_t>(txn.reclaimed().lost.size());
      return Status::OK();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
  };
  reset_dead(q1.get());  // q2 is alive: nothing to do
  EXPECT_EQ(reset, 0);
  EXPECT_EQ(lost, 0);
  q2.reset();  // q2's process dies
  reset_dead(q1.get());
  EXPECT_EQ(reset, 1);
  EXPECT_EQ(lost, 1);
  EXPECT_EQ(q1->state().Find(1)->state, TaskState::kPending);
  EXPECT_EQ(q1->state().Find(1)->attempts, 1);
  EXPECT_EQ(q1->state().Find(2)->state, TaskState::kFailed);
  EXPECT_EQ(q1->state().Find(2)->error_reason, kReasonWorkerLost);
  EXPECT_EQ(q1->state().Find(3)->state, TaskState::kInProgress);  // q1's own
  EXPECT_EQ(LinesOf(LogPath(), "task_reset").size(), 1u);
  reset_dead(q1.get());  // idempotent
  EXPECT_EQ(reset + lost, 0);
  EXPECT_EQ(Claim(q1.get()), 1);
  EXPECT_EQ(q1->state().Find(1)->attempts, 2);
  ExpectDiskMatches(q1.get());
}

// --- finally bookkeeping ----------------------------------------------------

TEST_F(QueueTest, FinallyHookIsDueOnceTheTaskAndItsSubtreeSettle) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("R", "{}", 0, 1, Origin::kInitial, true)};
  auto q = OpenOk(o);
  auto due = [&]() { return q->state().hooks_due(); };
  using Ids = std::set<int64_t>;
  ASSERT_EQ(Claim(q.get()), 1);
  // R spawns C1 (with a hook of its own) and C2.
  Complete(q.get(), 1,
           {MakeTask("C1", "{}", 1, 1, Origin::kSpawned, true),
            MakeTask("C2", "{}", 1)});
  EXPECT_EQ(due(), Ids{});  // R waits for its children
  EXPECT_FALSE(q->state().AllSettled());
  ExpectDiskMatches(q.get());
  ASSERT_EQ(Claim(q.get()), 2);
  Complete(q.get(), 2);
  EXPECT_EQ(due(), Ids{2});  // C1 done without children: its hook is due
  ASSERT_EQ(Claim(q.get()), 3);
  Complete(q.get(), 3);
  EXPECT_EQ(due(), Ids{2});  // R still waits for C1's hook
  ExpectDiskMatches(q.get());
  // C1's hook attaches to R, which waits for it too.
  const int64_t h1 = Submit(q.get(), Hook(*q->state().Find(2)));
  EXPECT_EQ(q->state().Find(h1)->parent_id, 1);
  EXPECT_EQ(due(), Ids{});
  ExpectDiskMatches(q.get());
  ASSERT_EQ(Claim(q.get()), h1);
  // The hook prints a task; it attaches to R as well.
  std::vector<int64_t> out = Complete(q.get(), h1, {MakeTask("Out", "{}", 1)});
  EXPECT_EQ(due(), Ids{});
  ASSERT_EQ(Claim(q.get()), out[0]);
  Complete(q.get(), out[0]);
  EXPECT_EQ(due(), Ids{1});  // innermost first: now R's own hook
  EXPECT_FALSE(q->state().AllSettled());
  ExpectDiskMatches(q.get());
  const int64_t hr = Submit(q.get(), Hook(*q->state().Find(1)));
  EXPECT_EQ(due(), Ids{});
  EXPECT_FALSE(q->state().AllSettled());
  ASSERT_EQ(Claim(q.get()), hr);
  Complete(q.get(), hr);
  EXPECT_TRUE(q->state().AllSettled());
  ExpectDiskMatches(q.get());
  ASSERT_TRUE(q->Close().ok());
  q = OpenOk(o);
  EXPECT_TRUE(q->state().AllSettled());
  EXPECT_EQ(due(), Ids{});
}

TEST_F(QueueTest, FailedTaskHasNoHookAndSettlesItsParent) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("R", "{}", 0, 1, Origin::kInitial, true)};
  auto q = OpenOk(o);
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1, {MakeTask("C", "{}", 1, 1, Origin::kSpawned, true)});
  ASSERT_EQ(Claim(q.get()), 2);
  EXPECT_FALSE(Fail(q.get(), 2, true));
  // C failed for good: no hook for it; R (done) is now due.
  EXPECT_EQ(q->state().hooks_due(), std::set<int64_t>{1});
  ExpectDiskMatches(q.get());
}

TEST_F(QueueTest, AllSettledNeedsAtLeastOneTask) {
  QueueOptions o = Options();
  o.initial_tasks.clear();
  auto q = OpenOk(o);
  EXPECT_FALSE(q->state().AllSettled());
  EXPECT_EQ(Claim(q.get()), 0);
}

// A task that is due for its hook gets a new child (attached while it
// waits): it is no longer due, live as well as when read back.
TEST_F(QueueTest, AttachingAChildToADueTaskMakesItWaitAgain) {
  QueueOptions o = Options();
  o.initial_tasks = {MakeTask("R", "{}", 0, 1, Origin::kInitial, true)};
  auto q = OpenOk(o);
  ASSERT_EQ(Claim(q.get()), 1);
  Complete(q.get(), 1);
  EXPECT_EQ(q->state().hooks_due(), std::set<int64_t>{1});
  Submit(q.get(), MakeTask("Late", "{}", 1));
  EXPECT_EQ(q->state().hooks_due(), std::set<int64_t>{});
  ExpectDiskMatches(q.get());
}

}  // namespace
}  // namespace queue_fixture
}  // namespace wizq
