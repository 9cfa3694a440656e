// ExecutorSet: attempts go to the member that runs their action kind, and
// Wait sees the results of every member.
#include "tasks/exec/executor_set.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/fake_executor.h"

namespace wizq {
namespace {

using test::FakeExecutor;
using test::Ledger;
using test::Respond;

// Runs Pool actions; each result becomes ready `delay_ms` after Start, and
// Wait blocks (really sleeps) until one is ready or the timeout passes.
class DelayedPoolExecutor : public Executor {
 public:
  explicit DelayedPoolExecutor(int delay_ms) : delay_ms_(delay_ms) {}
  bool CanRun(const Action& a) const override {
    return a.kind == Action::Kind::kPool;
  }
  Status Start(const Attempt& a) override {
    started_.insert({a.task_id, a.number});
    due_.push_back(
        {Clock::now() + std::chrono::milliseconds(delay_ms_), a.task_id});
    return Status::OK();
  }
  Status Wait(int timeout_ms, Done* done) override {
    const auto deadline =
        Clock::now() +
        std::chrono::milliseconds(timeout_ms < 0 ? 1 << 30 : timeout_ms);
    for (;;) {
      for (auto it = due_.begin(); it != due_.end();) {
        if (it->first <= Clock::now()) {
          done->emplace_back(it->second, Respond("[]"));
          it = due_.erase(it);
        } else {
          ++it;
        }
      }
      if (!done->empty() || due_.empty() || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return Status::OK();
  }
  size_t running() const override { return due_.size(); }
  bool FindByProcess(int pid, int64_t* id) const override {
    if (pid != 4242 || due_.empty()) return false;
    *id = due_.front().second;
    return true;
  }
  void TerminateAll(double) override { due_.clear(); }
  bool AttemptStarted(int64_t id, int n) const override {
    return started_.count({id, n}) > 0;
  }
  Status ReapOrphans(int64_t id) override {
    reaped_.push_back(id);
    return Status::OK();
  }
  std::vector<int64_t> reaped_;

 private:
  using Clock = std::chrono::steady_clock;
  int delay_ms_;
  std::vector<std::pair<Clock::time_point, int64_t>> due_;
  std::set<std::pair<int64_t, int>> started_;
};

Attempt MakeAttempt(int64_t id, const Action* action) {
  Attempt a;
  a.task_id = id;
  a.step = "S" + std::to_string(id);
  a.action = action;
  return a;
}

class ExecutorSetTest : public ::testing::Test {
 protected:
  ExecutorSetTest() : commands_(&ledger_), pool_(30) {
    command_.kind = Action::Kind::kCommand;
    agent_.kind = Action::Kind::kPool;
  }
  Ledger ledger_;
  FakeExecutor commands_;
  DelayedPoolExecutor pool_;
  Action command_, agent_;
};

TEST_F(ExecutorSetTest, RoutesByActionKind) {
  ExecutorSet set({&commands_, &pool_});
  EXPECT_TRUE(set.CanRun(command_));
  EXPECT_TRUE(set.CanRun(agent_));
  ASSERT_TRUE(set.Start(MakeAttempt(1, &command_)).ok());
  ASSERT_TRUE(set.Start(MakeAttempt(2, &agent_)).ok());
  EXPECT_EQ(ledger_.runs().size(), 1u);  // only task 1 went to the fake
  EXPECT_EQ(ledger_.runs()[0].task_id, 1);
  EXPECT_EQ(set.running(), 2u);
  EXPECT_TRUE(set.AttemptStarted(1, 1));
  EXPECT_TRUE(set.AttemptStarted(2, 1));
  EXPECT_FALSE(set.AttemptStarted(3, 1));
}

TEST_F(ExecutorSetTest, RefusesAnActionNoMemberRuns) {
  ExecutorSet set({&commands_});
  EXPECT_FALSE(set.CanRun(agent_));
  Status s = set.Start(MakeAttempt(7, &agent_));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("task 7"), std::string::npos) << s.message();
  EXPECT_EQ(set.running(), 0u);
}

TEST_F(ExecutorSetTest, WaitSeesResultsOfEveryMember) {
  ExecutorSet set({&commands_, &pool_});
  ASSERT_TRUE(set.Start(MakeAttempt(1, &command_)).ok());
  ASSERT_TRUE(set.Start(MakeAttempt(2, &agent_)).ok());
  Executor::Done done;
  ASSERT_TRUE(set.Wait(-1, &done).ok());  // the fake's result is ready now
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].first, 1);
  done.clear();
  ASSERT_TRUE(set.Wait(0, &done).ok());  // the pool's is 30 ms away
  EXPECT_TRUE(done.empty());
  ASSERT_TRUE(set.Wait(5000, &done).ok());  // one busy member: its Wait
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].first, 2);
  EXPECT_EQ(set.running(), 0u);
  done.clear();
  ASSERT_TRUE(set.Wait(-1, &done).ok());  // nothing runs: returns at once
  EXPECT_TRUE(done.empty());
}

TEST_F(ExecutorSetTest, SlicedWaitWithTwoBusyMembersHonoursTheTimeout) {
  DelayedPoolExecutor slow(60 * 1000);
  DelayedPoolExecutor other(60 * 1000);
  ExecutorSet both({&slow, &other});
  ASSERT_TRUE(slow.Start(MakeAttempt(1, &agent_)).ok());
  ASSERT_TRUE(other.Start(MakeAttempt(2, &agent_)).ok());
  Executor::Done done;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(both.Wait(50, &done).ok());
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
  EXPECT_TRUE(done.empty());
  EXPECT_GE(ms, 45);  // it did wait, not spin out at once
  EXPECT_EQ(both.running(), 2u);
}

TEST_F(ExecutorSetTest, UnionOfProcessesOrphansAndTermination) {
  ExecutorSet set({&commands_, &pool_});
  ASSERT_TRUE(set.Start(MakeAttempt(2, &agent_)).ok());
  int64_t id = 0;
  EXPECT_TRUE(set.FindByProcess(4242, &id));
  EXPECT_EQ(id, 2);
  EXPECT_FALSE(set.FindByProcess(1, &id));
  ASSERT_TRUE(set.ReapOrphans(9).ok());
  EXPECT_EQ(pool_.reaped_, std::vector<int64_t>{9});
  set.TerminateAll(0);
  EXPECT_EQ(set.running(), 0u);
}

}  // namespace
}  // namespace wizq
