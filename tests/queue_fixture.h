// The fixture and helpers shared by the tests of the queue store:
// tests/queue_open_test.cc (start, resume, join, archive, refuse: SPEC §5),
// tests/queue_test.cc (dedup, transitions, finally bookkeeping) and
// tests/queue_checkpoint_test.cc (queue.json checkpoints). Header-only:
// CMake builds each tests/*_test.cc as its own binary.
#ifndef WIZQ_TESTS_QUEUE_FIXTURE_H_
#define WIZQ_TESTS_QUEUE_FIXTURE_H_

#include <errno.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "audit/log.h"
#include "queue/dir/queue.h"
#include "queue/dir/snapshot.h"
#include "queue/dir/state.h"
#include "tests/queue_test_util.h"
#include "tests/test_util.h"
#include "util/json_writer.h"

namespace wizq {
namespace queue_fixture {

namespace fs = std::filesystem;
using test::MakeTask;
using test::ReadAll;
using test::ReplayFromDisk;
using test::ScratchDir;
using test::WriteAll;

inline bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The hook task of `owner` (SPEC §2): it attaches to the owner's parent.
inline NewTask Hook(const Task& owner) {
  return MakeTask(owner.type, owner.inputs, owner.parent_id, 1,
                  Origin::kFinally, false, owner.id);
}

// Everything durable about a state, one task a line, for EXPECT_EQ diffs.
inline std::string Describe(const QueueState& s) {
  std::string out = "run " + s.run().run_id + " " +
                    RunStatusName(s.run().status) +
                    " resumes=" + std::to_string(s.run().resumes) +
                    " seq=" + std::to_string(s.last_seq()) + " counts=";
  for (TaskState st : {TaskState::kPending, TaskState::kInProgress,
                       TaskState::kDone, TaskState::kFailed}) {
    out += std::to_string(s.count(st)) + ",";
  }
  out += " settled=" + std::to_string(s.AllSettled()) + " due=";
  for (int64_t id : s.hooks_due()) out += std::to_string(id) + ",";
  out += " pending=";
  for (int64_t id : s.pending()) out += std::to_string(id) + ",";
  out += "\n";
  for (const Task& t : s.tasks()) {
    out +=
        std::to_string(t.id) + " " + t.type + " " + t.inputs + " " +
        TaskStateName(t.state) + " a=" + std::to_string(t.attempts) + "/" +
        std::to_string(t.max_attempts) + " p=" + std::to_string(t.parent_id) +
        " " + OriginName(t.origin) + " key=" + t.dedup_key +
        " by=" + t.claimed_by + " err=" + t.error_reason + ":" +
        t.error_message + " retry_at=" + std::to_string(t.retry_at_ms) +
        " fin=" + std::to_string(t.has_finally) + "/" +
        std::to_string(t.finally_for) + "/" + std::to_string(t.finally_task) +
        " gen=" + std::to_string(t.generation) +
        (t.hook_stale ? " stale" : "") +
        " open=" + std::to_string(t.open_children) + " children=";
    for (int64_t c : t.children) out += std::to_string(c) + ",";
    out += "\n";
  }
  return out;
}

// The state recorded in `wizard` rebuilt without the Queue: queue.json
// (when `use_snapshot`), then the audit events after it.
inline std::string DescribeFromDisk(const std::string& wizard,
                                    bool use_snapshot) {
  QueueState state;
  const std::string error = ReplayFromDisk(wizard, use_snapshot, &state);
  return error.empty() ? Describe(state) : error;
}

// The committed lines of a log.
inline std::vector<std::string> LogLines(const std::string& path) {
  const std::string data = ReadAll(path);
  LogParseResult parsed;
  Status s = ParseLog(path, data, 0, 1, &parsed);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<std::string> lines;
  for (const LogRecord& r : parsed.records) lines.emplace_back(r.line);
  return lines;
}

inline std::string EventOf(const std::string& line) {
  const std::string key = "\"event\":\"";
  size_t b = line.find(key);
  if (b == std::string::npos) return "";
  b += key.size();
  return line.substr(b, line.find('"', b) - b);
}

inline std::vector<std::string> LinesOf(const std::string& path,
                                        const std::string& event) {
  std::vector<std::string> out;
  for (const std::string& l : LogLines(path)) {
    if (EventOf(l) == event) out.push_back(l);
  }
  return out;
}

inline int64_t IntField(const std::string& line, const char* key) {
  const nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
  if (!doc.is_object() || !doc.contains(key)) return -1;
  if (!doc[key].is_number_integer()) return -1;
  return doc[key].get<int64_t>();
}

inline std::string StrField(const std::string& line, const char* key) {
  const nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
  if (!doc.is_object() || !doc.contains(key) || !doc[key].is_string()) {
    return "<none>";
  }
  return doc[key].get<std::string>();
}

// Every entry under `root`: relative path -> mode and content (a
// directory's content is empty; a symlink's is its target).
inline std::map<std::string, std::string> Tree(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    struct stat st;
    EXPECT_EQ(lstat(e.path().c_str(), &st), 0);
    std::string v = std::to_string(st.st_mode) + ":";
    if (S_ISREG(st.st_mode)) v += ReadAll(e.path().string());
    if (S_ISLNK(st.st_mode)) v += fs::read_symlink(e.path()).string();
    out[fs::relative(e.path(), root).string()] = v;
  }
  return out;
}

inline int Mode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class QueueTest : public ::testing::Test {
 protected:
  QueueTest() : install_(fs::canonical(dir_.path()).string()) {}

  QueueOptions Options(const std::string& run_id = "run-A") const {
    QueueOptions o;
    o.install_dir = install_;
    o.run_id = run_id;
    o.workflow_json = "{\"steps\":[{\"name\":\"Root\"}]}";
    o.entry_input = "{\"in\":1}";
    o.wizq_version = "0.1.0-test";
    o.initial_tasks.push_back(
        MakeTask("Root", "{\"n\":0}", 0, 2, Origin::kInitial));
    return o;
  }

  std::unique_ptr<Queue> OpenOk(const QueueOptions& o,
                                OpenReport* report = nullptr) {
    std::unique_ptr<Queue> q;
    OpenReport local;
    Status s = Queue::Open(o, &q, report ? report : &local);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return q;
  }

  std::string Wizard() const { return install_ + "/.wizard"; }
  std::string LogPath() const { return Wizard() + "/audit.jsonl"; }
  std::string SnapshotPath() const { return Wizard() + "/queue.json"; }

  static int64_t Claim(
      Queue* q, const std::function<bool(const Task&)>& accept = nullptr) {
    int64_t id = -1;
    Status s = q->Transact(
        [&](Txn& txn) { return txn.ClaimNextOfSteps(nullptr, accept, &id); });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return id;
  }

  static std::vector<int64_t> Complete(
      Queue* q, int64_t id, const std::vector<NewTask>& children = {}) {
    std::vector<int64_t> ids;
    Status s =
        q->Transact([&](Txn& txn) { return txn.Complete(id, children, &ids); });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return ids;
  }

  static bool Fail(Queue* q, int64_t id, bool retryable, int64_t delay_ms = 0) {
    bool will_retry = false;
    Status s = q->Transact([&](Txn& txn) {
      return txn.Fail(id, kReasonExitCode, "exit 1", retryable, delay_ms,
                      &will_retry);
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return will_retry;
  }

  static int64_t Submit(Queue* q, const NewTask& t, bool* dup = nullptr) {
    int64_t id = -1;
    bool d = false;
    Status s = q->Transact([&](Txn& txn) { return txn.Submit(t, &id, &d); });
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (dup) *dup = d;
    return id;
  }

  // The live state must be what the files say, read both ways.
  void ExpectDiskMatches(Queue* q) {
    ASSERT_TRUE(q->Refresh().ok());
    const std::string live = Describe(q->state());
    EXPECT_EQ(DescribeFromDisk(Wizard(), /*use_snapshot=*/true), live);
    EXPECT_EQ(DescribeFromDisk(Wizard(), /*use_snapshot=*/false), live);
  }

  ScratchDir dir_;
  const std::string install_;
};

}  // namespace queue_fixture
}  // namespace wizq

#endif  // WIZQ_TESTS_QUEUE_FIXTURE_H_
