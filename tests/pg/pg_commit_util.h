// What the COMMIT tests of the PostgreSQL store share (pg_commit_test.cc,
// pg_crash_test.cc): a run of the crash sweep's workflow
// (tests/data/crash/sweep.jsonc: Root fans out Work tasks, even ones spawn
// a deduplicated Leaf, Root has a finally hook; every task writes start
// and end lines to $WIZQ_INSTALL_DIR/ledger and holds an flock while it
// runs) by the real `wizq` on the store, and the checks on its end.
#ifndef WIZQ_TESTS_PG_PG_COMMIT_UTIL_H_
#define WIZQ_TESTS_PG_PG_COMMIT_UTIL_H_

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/pg/pg_test_util.h"

namespace wizq::test {

class PgSweepTest : public PgTest {
 protected:
  static constexpr int kWorks = 8;

  // `wizq run` of the sweep workflow in `dir` on the store at `location`,
  // as run `run_id`, with `env` added.
  std::unique_ptr<WizqProcess> Run(
      const std::string& dir, const std::string& location,
      const std::string& run_id,
      std::vector<std::pair<std::string, std::string>> env = {},
      std::vector<std::string> more = {}) {
    std::vector<std::string> args = {
        "wizq",
        "run",
        SourceDir() + "/tests/data/crash/sweep.jsonc",
        "--dir",
        dir,
        "--input",
        "{\"n\":" + std::to_string(kWorks) + "}",
        "--jobs",
        "3",
        "--quiet",
        "--run-id",
        run_id,
        "--schema",
        schema_};
    args.insert(args.end(), more.begin(), more.end());
    SpawnOptions o;
    o.env = std::move(env);
    o.env.emplace_back("WIZQ_STORE", location);
    return std::make_unique<WizqProcess>(args, o);
  }

  // `wizq ARGS... --run-id ID --schema S` on the store, to its end.
  WizqResult Wizq(std::vector<std::string> args, const std::string& run_id) {
    args.insert(args.begin(), "wizq");
    args.insert(args.end(), {"--run-id", run_id, "--schema", schema_});
    SpawnOptions o;
    o.env = {{"WIZQ_STORE", cluster_->Location()}};
    return WizqProcess(args, o).Wait();
  }

  // The run `run_id` worked in `dir` completed, each task once, each event
  // once: a gap-free seq, one task_completed per task, one submission per
  // <type, inputs>, the finally hook after every other task; in the
  // ledger no overlap and at most 1 + `crashes` starts per task.
  void VerifyRun(const std::string& dir, const std::string& run_id,
                 int crashes) {
    const WizqResult log = Wizq({"log", "--json"}, run_id);
    ASSERT_EQ(log.code, 0) << log.Describe();
    std::map<int64_t, int> completions;
    int run_finished = 0;
    const std::vector<Json> events = ParseJsonLines(log.out);
    for (size_t i = 0; i < events.size(); i++) {
      ASSERT_EQ(events[i].value("seq", int64_t{0}), static_cast<int64_t>(i + 1))
          << "event " << i + 1 << ": " << events[i].dump();
      const std::string ev = events[i].value("event", "");
      if (ev == "task_completed") completions[events[i]["id"]]++;
      if (ev == "run_finished") run_finished++;
    }
    EXPECT_EQ(run_finished, 1);
    const WizqResult st = Wizq({"status", "--json"}, run_id);
    ASSERT_EQ(st.code, 0) << st.Describe();
    const Json status = ParseJsonOrNull(st.out);
    ASSERT_TRUE(status.is_object()) << st.out;
    EXPECT_EQ(status["status"], "completed");
    std::set<std::string> seen;
    int64_t hook = 0;
    for (const Json& t : status["tasks"]) {
      const int64_t id = t["id"];
      EXPECT_EQ(t["state"], "done") << t.dump();
      EXPECT_EQ(completions[id], 1) << "task_completed events of " << t.dump();
      if (t["origin"] == "Finally") {
        EXPECT_EQ(hook, 0) << "a second finally hook: " << t.dump();
        hook = id;
        continue;
      }
      const std::string key =
          t["type"].get<std::string>() + " " + t["inputs"].dump();
      EXPECT_TRUE(seen.insert(key).second) << "submitted twice: " << key;
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(1 + kWorks + 3))
        << "Root, the Work tasks and Leaf k=0,1,2";
    ASSERT_NE(hook, 0) << "the finally hook never ran";
    VerifyLedger(dir, hook, status["tasks"].size(), crashes);
  }

  void VerifyLedger(const std::string& dir, int64_t hook, size_t tasks,
                    int crashes) {
    std::map<int64_t, int> starts, ends;
    size_t hook_start = SIZE_MAX, last_other_end = 0;
    for (const LedgerLine& l : ReadLedger(dir)) {
      EXPECT_NE(l.kind, "OVERLAP") << "task " << l.task << " attempt "
                                   << l.attempt << " overlapped another";
      if (l.kind == "start") starts[l.task]++;
      if (l.kind == "end") ends[l.task]++;
      if (l.task == hook && l.kind == "start") {
        hook_start = std::min(hook_start, l.index);
      }
      if (l.task != hook && l.kind == "end") {
        last_other_end = std::max(last_other_end, l.index);
      }
    }
    EXPECT_EQ(starts.size(), tasks);
    for (const auto& [id, n] : starts) {
      EXPECT_GE(ends[id], 1) << "task " << id << " never ended";
      EXPECT_LE(n, 1 + crashes) << "task " << id << " ran " << n
                                << " times with " << crashes << " crash(es)";
    }
    EXPECT_GT(hook_start, last_other_end)
        << "the finally hook started before every other task had ended";
    EXPECT_EQ(HeldLocks(dir + "/locks"), std::vector<std::string>{})
        << "task processes outlived the run";
  }
};

}  // namespace wizq::test

#endif  // WIZQ_TESTS_PG_PG_COMMIT_UTIL_H_
