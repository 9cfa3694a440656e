// Txn::ClaimNextOfSteps and the index of pending tasks by step
// (QueueState::pending_by_type) that it uses: the same choice as a scan
// (lowest ready id among accepted tasks), a refused step skipped whole, and
// an index that always equals the pending set, live and after a reopen.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "queue/dir/queue.h"
#include "tests/queue_fixture.h"

namespace wizq {
namespace queue_fixture {
namespace {

using Ids = std::set<int64_t>;

// The index rebuilt from the tasks: it must equal the live one.
void ExpectIndexMatches(const QueueState& st) {
  std::map<std::string, Ids, std::less<>> want;
  for (const Task& t : st.tasks()) {
    if (t.state == TaskState::kPending) want[t.type].insert(t.id);
  }
  EXPECT_EQ(st.pending_by_type(), want);
}

int64_t ClaimOfSteps(Queue* q, const std::set<std::string>& refused) {
  int64_t id = -1;
  Status s = q->Transact([&](Txn& txn) {
    return txn.ClaimNextOfSteps(
        [&](std::string_view type) {
          return refused.count(std::string(type)) == 0;
        },
        nullptr, &id);
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return id;
}

TEST_F(QueueTest, ClaimNextOfStepsTakesTheLowestIdOfTheOpenSteps) {
  auto q = OpenOk(Options());  // task 1: Root
  for (const char* type : {"A", "B", "A", "B", "C"}) {
    Submit(
        q.get(),
        MakeTask(type, "{\"i\":\"" + std::to_string(q->state().total()) + "\"}",
                 0, 2, Origin::kInitial));
  }
  ExpectIndexMatches(q->state());
  EXPECT_EQ(q->state().pending_by_type().at("B"), (Ids{3, 5}));
  EXPECT_EQ(ClaimOfSteps(q.get(), {"Root"}), 2);       // A
  EXPECT_EQ(ClaimOfSteps(q.get(), {"Root", "A"}), 3);  // B
  ExpectIndexMatches(q->state());
  // A retry later than now is not ready: the next of its step is taken.
  EXPECT_TRUE(Fail(q.get(), 3, /*retryable=*/true, /*delay_ms=*/3600000));
  ExpectIndexMatches(q->state());
  EXPECT_EQ(ClaimOfSteps(q.get(), {"Root", "A"}), 5);
  // Every step refused: nothing, whatever is pending.
  EXPECT_EQ(ClaimOfSteps(q.get(), {"Root", "A", "B", "C"}), 0);
  // No filter: the lowest ready id.
  EXPECT_EQ(ClaimOfSteps(q.get(), {}), 1);
  Complete(q.get(), 1);
  Complete(q.get(), 2);
  ExpectIndexMatches(q->state());
  EXPECT_EQ(q->state().pending_by_type().count("Root"), 0u);  // none left
  // Rebuilt from the files, the index is the same.
  ASSERT_TRUE(q->Close().ok());
  q = OpenOk(Options());
  ExpectIndexMatches(q->state());
  // The closed worker held 5: put back, pending again.
  EXPECT_EQ(q->state().pending_by_type().at("B"), (Ids{3, 5}));
}

}  // namespace
}  // namespace queue_fixture
}  // namespace wizq
