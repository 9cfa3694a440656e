#include <gtest/gtest.h>

#include "queue/dir/queue.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

QueueOptions Options(const std::string& dir) {
  QueueOptions o;
  o.install_dir = dir;
  o.run_id = "run-1";
  o.workflow_json = "{\"steps\":[]}";
  NewTask t;
  t.type = "Root";
  t.inputs = "{\"a\":1}";
  t.origin = Origin::kInitial;
  t.max_attempts = 2;
  o.initial_tasks.push_back(t);
  return o;
}

TEST(QueueSmokeTest, ClaimCompleteResume) {
  test::ScratchDir dir;
  std::unique_ptr<Queue> q;
  OpenReport report;
  ASSERT_TRUE(Queue::Open(Options(dir.path()), &q, &report).ok());
  EXPECT_EQ(report.action, OpenAction::kStartedFresh);
  int64_t id = 0;
  ASSERT_TRUE(q->Transact([&](Txn& txn) {
                 return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
               }).ok());
  ASSERT_EQ(id, 1);
  Status s = q->Transact([&](Txn& txn) {
    NewTask c;
    c.type = "Child";
    c.inputs = "{\"b\":2,\"a\":1}";
    c.parent_id = id;
    c.max_attempts = 3;
    NewTask d = c;
    d.inputs = "{\"a\":1.0,\"b\":2}";
    return txn.Complete(id, {c, d}, nullptr);
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(q->state().total(), 2);
  ASSERT_TRUE(q->Close().ok());
  q.reset();
  ASSERT_TRUE(Queue::Open(Options(dir.path()), &q, &report).ok());
  EXPECT_EQ(report.action, OpenAction::kResumed);
  EXPECT_EQ(q->state().total(), 2);
  EXPECT_EQ(q->state().Find(1)->state, TaskState::kDone);
  EXPECT_EQ(q->state().Find(2)->state, TaskState::kPending);
  // A claim left by a dead worker is reset on the next open.
  ASSERT_TRUE(q->Transact([&](Txn& txn) {
                 return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
               }).ok());
  q.reset();  // like a crash: no Close
  ASSERT_TRUE(Queue::Open(Options(dir.path()), &q, &report).ok());
  EXPECT_EQ(report.tasks_reset, 1);
  EXPECT_EQ(q->state().Find(2)->state, TaskState::kPending);
  EXPECT_EQ(q->state().Find(2)->attempts, 1);
}

}  // namespace
}  // namespace wizq
