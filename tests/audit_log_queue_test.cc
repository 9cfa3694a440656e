// Tests of the audit log through the Queue (queue/dir/queue.h): a real
// run's torn last record is set aside when the queue is opened again, and
// the run goes on.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "audit/log.h"
#include "queue/dir/queue.h"
#include "tests/audit_log_fixture.h"
#include "tests/queue_test_util.h"
#include "tests/test_util.h"

namespace wizq::audit_log_test {
namespace {

using test::MakeTask;
using test::NoSyncEnv;
using test::WithoutFreeSpace;
using test::WriteAll;

// --- through the Queue -------------------------------------------------------

std::string DescribeTasks(const QueueState& state) {
  std::string out;
  for (const Task& t : state.tasks()) {
    out += std::to_string(t.id) + " " + t.type + " " + t.inputs + " " +
           TaskStateName(t.state) + " a=" + std::to_string(t.attempts) + "/" +
           std::to_string(t.max_attempts) +
           " p=" + std::to_string(t.parent_id) + " " + OriginName(t.origin) +
           " by=" + t.claimed_by + " err=" + t.error_reason + " children=";
    for (int64_t c : t.children) out += std::to_string(c) + ",";
    out += "\n";
  }
  return out;
}

QueueOptions RunOptions(const std::string& dir) {
  QueueOptions o;
  o.install_dir = std::filesystem::canonical(dir).string();
  o.run_id = "run-torn";
  o.workflow_json = "{\"steps\":[]}";
  o.initial_tasks.push_back(
      MakeTask("Root", "{\"n\":0}", 0, 3, Origin::kInitial));
  return o;
}

TEST(AuditLogQueueTest, TornLastRecordOfARealRunIsSetAsideOnOpen) {
  ScratchDir dir;
  NoSyncEnv env;
  QueueOptions options = RunOptions(dir.path());
  options.env = &env;
  const std::string log_path = dir.path() + "/.wizard/audit.jsonl";
  std::string before_last;  // tasks before the last commit
  std::string log_before;   // the log before the last commit
  std::string full_log;
  {
    std::unique_ptr<Queue> q;
    OpenReport report;
    ASSERT_TRUE(Queue::Open(options, &q, &report).ok());
    int64_t id = 0;
    ASSERT_TRUE(q->Transact([&](Txn& txn) {
                   return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
                 }).ok());
    ASSERT_TRUE(q->Transact([&](Txn& txn) {
                   return txn.Complete(id,
                                       {MakeTask("Child", "{\"x\":1}", id, 2),
                                        MakeTask("Child", "{\"x\":2}", id, 2)},
                                       nullptr);
                 }).ok());
    before_last = DescribeTasks(q->state());
    log_before = WithoutFreeSpace(ReadAll(log_path));
    // The last commit: a claim, a completion with two children, as one
    // batch of several lines.
    Status s = q->Transact([&](Txn& txn) {
      int64_t c = 0;
      WIZQ_RETURN_IF_ERROR(txn.ClaimNextOfSteps(nullptr, nullptr, &c));
      return txn.Complete(c,
                          {MakeTask("Leaf", "{\"y\":1}", c, 1),
                           MakeTask("Leaf", "{\"y\":2}", c, 1)},
                          nullptr);
    });
    ASSERT_TRUE(s.ok()) << s.ToString();
    full_log = WithoutFreeSpace(ReadAll(log_path));
    // Destroyed without Close: a crash.
  }
  ASSERT_GT(full_log.size(), log_before.size());
  ASSERT_EQ(full_log.substr(0, log_before.size()), log_before);
  // Let the snapshot cover no more than the log before the last commit.
  const std::string snapshot = ReadAll(dir.path() + "/.wizard/queue.json");
  ASSERT_TRUE(Contains(snapshot, "\"version\":1"));

  const uint64_t start = log_before.size();
  // Offsets inside the last batch: every third one, and every one within
  // a few bytes of a line boundary (the AuditLogTest cases of
  // audit_log_test.cc cover every offset at the log level).
  std::vector<uint64_t> cuts;
  for (uint64_t cut = start; cut < full_log.size(); cut++) {
    bool near_boundary = false;
    for (uint64_t d = 0; d <= 3 && d <= cut; d++) {
      near_boundary = near_boundary || full_log[cut - d] == '\n' ||
                      (cut + d < full_log.size() && full_log[cut + d] == '\n');
    }
    if (near_boundary || (cut - start) % 3 == 0) cuts.push_back(cut);
  }
  for (uint64_t cut : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    // Put back the .wizard of the crashed run, cut at `cut`.
    WriteAll(log_path, full_log.substr(0, cut));
    WriteAll(dir.path() + "/.wizard/queue.json", snapshot);
    for (const auto& e :
         std::filesystem::directory_iterator(dir.path() + "/.wizard")) {
      if (e.path().filename().string().rfind("audit.torn-", 0) == 0) {
        std::filesystem::remove(e.path());
      }
    }
    std::unique_ptr<Queue> q;
    OpenReport report;
    Status s = Queue::Open(options, &q, &report);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(report.action, OpenAction::kResumed);
    if (cut == start) {
      EXPECT_EQ(report.torn_tail_path, "");
    } else {
      ASSERT_NE(report.torn_tail_path, "");
      EXPECT_TRUE(Contains(report.torn_tail_path, "/.wizard/audit.torn-"));
      EXPECT_EQ(ReadAll(report.torn_tail_path),
                full_log.substr(start, cut - start));
    }
    EXPECT_EQ(DescribeTasks(q->state()), before_last);
    // The log now continues on a clean line and parses completely.
    const std::string now = ReadAll(log_path);
    EXPECT_EQ(now.substr(0, start), log_before);
    LogParseResult parsed;
    s = ParseLog(log_path, now, 0, 1, &parsed);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(parsed.torn_bytes, 0u);
    EXPECT_EQ(parsed.committed_end, WithoutFreeSpace(now).size());
    // And the run goes on.
    int64_t id = 0;
    ASSERT_TRUE(q->Transact([&](Txn& txn) {
                   return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
                 }).ok());
    EXPECT_EQ(id, 2);
  }
}

}  // namespace
}  // namespace wizq::audit_log_test
