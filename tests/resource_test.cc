// Resource bounds of the real `wizq` binary (docs/RELIABILITY.md, "Crash
// points, security and resource bounds"):
//   - a low RLIMIT_NOFILE gives a clear error ("open files") and a non-zero
//     exit, never a hang, and the run is resumed once the limit is lifted;
//   - the memory of a run with 100,000 tasks: `wizq run` submitting them,
//     `wizq status` reading them, `wizq run` resuming with them pending,
//     each within a stated budget (kBaseBudgetKb + kPerTaskBudgetKb a task).
//
// Sizes: WIZQ_BIG_TASKS (tasks of the memory test; default 100,000, or
// 20,000 when WIZQ_BIG_TESTS=0 for small CI machines).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/process_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Json;
using test::Measured;
using test::RunMeasured;
using test::ScratchDir;

// Entries of a directory (0 if it is missing).
// Attempts started in the run whose tasks directory is `dir`: each has its
// `<id>.<attempt>.stdout` (tasks/exec/attempt_files.h).
int CountStarted(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".stdout") == 0) {
      n++;
    }
  }
  return n;
}

// Attempts that ended in the run whose tasks directory is `dir`: the end
// lines of its attempts.journal (tasks/exec/attempt_journal.h). (A stdout file
// exists as soon as wizq hands the attempt to its spawner, which may hold
// it queued; its completion is committed a little after it ends.)
int CountEnded(const std::string& dir) {
  const std::string journal = test::ReadAll(dir + "/attempts.journal");
  int n = 0;
  for (size_t at = 0; (at = journal.find("\nend ", at)) != std::string::npos;
       ++at) {
    n++;
  }
  return n;
}

// Root spawns n Leaf tasks (n in its input); a Leaf does nothing.
std::string WriteFanoutWorkflow(const ScratchDir& scratch, int leaf_sleep_ms) {
  const std::string leaf =
      leaf_sleep_ms > 0
          ? "sleep 0." + std::to_string(1000 + leaf_sleep_ms).substr(1) +
                "; echo '[]'"
          : "echo '[]'";
  const Json wf = {
      {"entrypoint", "Root"},
      {"options", {{"max_retries", 2}, {"timeout", 120}}},
      {"steps",
       {{{"name", "Root"},
         {"action",
          {{"kind", "Command"},
           {"script",
            "jq -c '[range(0; .value.n) | {kind: \"Leaf\", value: {i: .}}]'"}}},
         {"next", {"Leaf"}}},
        {{"name", "Leaf"},
         {"value_schema",
          {{"type", "object"},
           {"required", {"i"}},
           {"properties", {{"i", {{"type", "integer"}}}}}}},
         {"action", {{"kind", "Command"}, {"script", leaf}}},
         {"next", Json::array()}}}}};
  const std::string path = scratch.Join("fanout.json");
  test::WriteAll(path, wf.dump(2));
  return path;
}

class ResourceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  void TearDown() override { test::ReapStrays(); }
};

// --- file descriptors
// ----------------------------------------------------------

TEST_F(ResourceTest, LowOpenFileLimitGivesClearErrorAndRunResumes) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizer runtimes need descriptors of their own (UBSan's vptr
  // check probes memory through a pipe and reports "invalid vptr" when it
  // cannot open one), so at 5-9 descriptors this measures them, not wizq.
  GTEST_SKIP() << "not meaningful under sanitizers";
#endif
  constexpr int kLeaves = 20;
  const std::string input = "{\"n\":" + std::to_string(kLeaves) + "}";
  // 3 and below: the dynamic loader itself fails before wizq runs.
  for (int limit : {4, 5, 6, 7, 8, 9, 10, 12, 16}) {
    SCOPED_TRACE("RLIMIT_NOFILE " + std::to_string(limit));
    ScratchDir scratch;
    const std::string wf = WriteFanoutWorkflow(scratch, 50);
    const std::string dir = scratch.Join("inst");
    const std::vector<std::string> run = {
        "wizq", "run", wf, "--dir", dir, "--input", input, "--jobs", "8"};
    const Measured m = RunMeasured(
        run,
        [limit] {
          const struct rlimit rl = {static_cast<rlim_t>(limit),
                                    static_cast<rlim_t>(limit)};
          setrlimit(RLIMIT_NOFILE, &rl);
        },
        nullptr, test::seconds(30));
    ASSERT_FALSE(m.timed_out) << "wizq hung: " << Describe(m);
    ASSERT_TRUE(m.exited) << Describe(m);
    std::printf("[ nofile   ] limit %2d: exit %d in %.2fs\n", limit, m.code,
                m.seconds);
    if (m.code == 0) continue;  // enough descriptors for this run
    // Below some limit (which depends on what the test runner left open)
    // the dynamic loader fails before wizq's main(): not wizq's message.
    if (test::Contains(m.err, "error while loading shared libraries")) continue;
    EXPECT_TRUE(test::Contains(m.err, "open files"))
        << "no clear error: " << Describe(m);
    // An environment error must not use up the tasks' attempts: with the
    // limit lifted, the same command resumes the run and completes it.
    const Measured again = RunMeasured(run);
    EXPECT_TRUE(again.exited && again.code == 0)
        << "the run did not survive the descriptor shortage: "
        << Describe(again);
    const Json st = test::StatusJson(dir);
    EXPECT_EQ(st["counts"]["done"], kLeaves + 1) << st.dump().substr(0, 2000);
  }
}

// --- memory with 100,000 tasks
// ---------------------------------------------------

// Peak RSS budget: a fixed part plus a part per task of the run.
constexpr long kBaseBudgetKb = 16 * 1024;
constexpr long kPerTaskBudgetKb100 = 250;  // 2.5 KiB a task, in 1/100 KiB

long BudgetKb(int tasks) {
  return kBaseBudgetKb + static_cast<long>(tasks) * kPerTaskBudgetKb100 / 100;
}

TEST_F(ResourceTest, HundredThousandTaskRunStaysWithinMemoryBudget) {
  const bool big = test::EnvInt("WIZQ_BIG_TESTS", 1) != 0;
  const int n = test::EnvInt("WIZQ_BIG_TASKS", big ? 100000 : 20000);
  const long budget = BudgetKb(n + 1);
  ScratchDir scratch;
  const std::string wf = WriteFanoutWorkflow(scratch, 0);
  const std::string dir = scratch.Join("inst");
  const std::string tasks_dir = dir + "/.wizard/tasks";
  const std::vector<std::string> run = {"wizq",
                                        "run",
                                        wf,
                                        "--dir",
                                        dir,
                                        "--input",
                                        "{\"n\":" + std::to_string(n) + "}",
                                        "--jobs",
                                        "1",
                                        "-q"};
  // Kills wizq once `more` tasks beyond those started so far have started
  // (each started task has its stdout file): it then holds ~n pending
  // tasks.
  const auto after_started = [&](int more) {
    const int target = CountStarted(tasks_dir) + more;
    return [&tasks_dir, target] { return CountStarted(tasks_dir) >= target; };
  };

  // 1. A fresh run: the root's response submits n tasks in one commit.
  const Measured fresh =
      RunMeasured(run, nullptr, after_started(5), test::seconds(300));
  ASSERT_FALSE(fresh.timed_out) << Describe(fresh);
  ASSERT_EQ(fresh.signal, SIGKILL)
      << "expected to stop it: " << Describe(fresh);
  // 2. Read-only: `wizq status`, JSON and text.
  const Measured status_json =
      RunMeasured({"wizq", "status", "--dir", dir, "--json"}, nullptr, nullptr,
                  test::seconds(120));
  ASSERT_TRUE(status_json.exited && status_json.code == 0)
      << Describe(status_json);
  const Json st = test::ParseJsonOrNull(status_json.out);
  ASSERT_FALSE(st.is_discarded());
  EXPECT_EQ(st["tasks"].size(), static_cast<size_t>(n) + 1);
  EXPECT_GE(st["counts"]["pending"], n - 10);
  const Measured status_text = RunMeasured(
      {"wizq", "status", "--dir", dir}, nullptr, nullptr, test::seconds(120));
  ASSERT_TRUE(status_text.exited && status_text.code == 0)
      << Describe(status_text);
  // 3. Resuming the run with ~n tasks pending, until 10 more have ended
  // (then at least 5 of them are committed done).
  const int ended = CountEnded(tasks_dir);
  const Measured resume = RunMeasured(
      run, nullptr,
      [&tasks_dir, ended] { return CountEnded(tasks_dir) >= ended + 10; },
      test::seconds(300));
  ASSERT_FALSE(resume.timed_out) << Describe(resume);
  ASSERT_EQ(resume.signal, SIGKILL) << Describe(resume);
  const Json after = test::StatusJson(dir);
  EXPECT_GE(after["counts"]["done"], 6);

  const long log_kb =
      static_cast<long>(fs::file_size(dir + "/.wizard/audit.jsonl") / 1024);
  const long queue_kb =
      static_cast<long>(fs::file_size(dir + "/.wizard/queue.json") / 1024);
  std::printf(
      "[ memory   ] %d tasks (budget %ld KiB; audit.jsonl %ld KiB, "
      "queue.json %ld KiB)\n"
      "[ memory   ]   wizq run (fresh, submits them): %ld KiB peak, %.2fs\n"
      "[ memory   ]   wizq status --json:             %ld KiB peak, %.2fs\n"
      "[ memory   ]   wizq status:                    %ld KiB peak, %.2fs\n"
      "[ memory   ]   wizq run (resume, all pending): %ld KiB peak, %.2fs\n",
      n + 1, budget, log_kb, queue_kb, fresh.maxrss_kb, fresh.seconds,
      status_json.maxrss_kb, status_json.seconds, status_text.maxrss_kb,
      status_text.seconds, resume.maxrss_kb, resume.seconds);
  RecordProperty("tasks", n + 1);
  RecordProperty("fresh_run_kb", static_cast<int>(fresh.maxrss_kb));
  RecordProperty("status_json_kb", static_cast<int>(status_json.maxrss_kb));
  RecordProperty("status_kb", static_cast<int>(status_text.maxrss_kb));
  RecordProperty("resume_kb", static_cast<int>(resume.maxrss_kb));
  if (test::UnderSanitizer())
    GTEST_SKIP() << "memory figures mean nothing here";
  EXPECT_LT(fresh.maxrss_kb, budget) << "wizq run submitting the tasks";
  EXPECT_LT(status_json.maxrss_kb, budget) << "wizq status --json";
  EXPECT_LT(status_text.maxrss_kb, budget) << "wizq status";
  EXPECT_LT(resume.maxrss_kb, budget) << "wizq run resuming";
}

}  // namespace
}  // namespace wizq
