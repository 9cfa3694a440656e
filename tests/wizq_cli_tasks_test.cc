// Tests of the `wizq` command: its tasks as it runs them (SPEC §2, §3, §4)
// — the task protocol, concurrency limits, signals, waiting for agents,
// timeouts that end a task's whole process tree, invalid responses retried
// then failed, finally hooks — with the fixture of wizq_cli_fixture.h.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"
#include "tests/wizq_cli_fixture.h"

namespace wizq::cli_test {
namespace {

// --- the task protocol -------------------------------------------------------

// stdin, working directory, WIZQ_* environment and per-attempt files of a
// Command task (SPEC §3, §4); the install directory is made canonical.
TEST_F(WizqCliTest, TaskGetsItsInputEnvironmentAndFiles) {
  const std::string inst = dir_.Join("install");
  fs::create_directory(inst);
  fs::create_directory_symlink(inst, dir_.Join("link"));
  const std::string given = dir_.Join("link/../link/.");
  const WizqResult r = RunWizq({"wizq", "run", DataFile("env.jsonc"), "--dir",
                                given, "--input", R"({"z":1,"a":"x"})"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const std::string canonical = fs::canonical(inst).string();
  const Json st = test::StatusJson(inst);
  EXPECT_EQ(st["install_dir"], canonical);
  const std::string run_id = st["run_id"];
  std::string keys[3];
  for (int attempt : {1, 2}) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    const std::vector<std::string> lines =
        test::SplitLines(ReadAll(inst + "/env." + std::to_string(attempt)));
    ASSERT_GE(lines.size(), 3u);
    EXPECT_EQ(test::ParseJsonOrNull(lines[0]),
              Json::parse(R"({"kind":"Root","value":{"a":"x","z":1}})"));
    std::map<std::string, std::string> env;
    for (const std::string& l : lines) {
      const size_t eq = l.find('=');
      if (eq != std::string::npos) env[l.substr(0, eq)] = l.substr(eq + 1);
    }
    EXPECT_EQ(env["PWD"], fs::canonical(test::DataDir()).string());
    EXPECT_EQ(env["WIZQ_RUN_ID"], run_id);
    EXPECT_EQ(env["WIZQ_TASK_ID"], "1");
    EXPECT_EQ(env["WIZQ_ATTEMPT"], std::to_string(attempt));
    EXPECT_EQ(env["WIZQ_INSTALL_DIR"], canonical);
    EXPECT_FALSE(env["WIZQ_IDEMPOTENCY_KEY"].empty());
    keys[attempt] = env["WIZQ_IDEMPOTENCY_KEY"];
    // Its files (tasks/exec/attempt_files.h): stdout and stderr; its stdin was
    // no file (lines[0] above is what it read).
    const std::string base =
        test::TaskFilesDir(inst) + "/1." + std::to_string(attempt);
    EXPECT_EQ(ReadAll(base + ".stderr"), "to stderr\n");
  }
  EXPECT_EQ(keys[1], keys[2]) << "the idempotency key changed between attempts";
  EXPECT_TRUE(
      Contains(ReadAll(test::TaskFilesDir(inst) + "/1.2.stdout"), "Child"));
  const Json root = OneTask(st, "Root");
  EXPECT_EQ(root["attempts"], 2);
  EXPECT_EQ(test::ParseJsonOrNull(ReadAll(inst + "/child.stdin")),
            Json::parse(R"({"kind":"Child","value":{"a":[1,2],"b":1}})"));
  // The failed attempt's reason names the exit code and the stderr tail.
  for (const Json& e : test::ReadAudit(inst)) {
    if (e["event"] != "task_failed") continue;
    EXPECT_EQ(e["reason"], "exit_code");
    EXPECT_TRUE(Contains(e["message"], "3")) << e.dump();
    EXPECT_TRUE(Contains(e["message"], "to stderr")) << e.dump();
  }
}

// --fresh starts a new run under the same run id; its tasks are not the old
// run's tasks, so they must not share their idempotency keys (a task that
// guards its side effects with the key would skip them after --fresh).
TEST_F(WizqCliTest, FreshRunGetsNewIdempotencyKeys) {
  ASSERT_EQ(Run("env.jsonc", "{}").code, 0);
  const std::string before = ReadAll(dir_.Join("env.2"));
  ASSERT_EQ(Run("env.jsonc", "{}", {"--fresh", "--no-reuse"}).code, 0);
  const std::string after = ReadAll(dir_.Join("env.2"));
  auto key = [](const std::string& text) {
    const size_t at = text.find("WIZQ_IDEMPOTENCY_KEY=");
    return at == std::string::npos ? std::string()
                                   : text.substr(at, text.find('\n', at) - at);
  };
  ASSERT_FALSE(key(before).empty());
  EXPECT_NE(key(before), key(after))
      << "the task of the fresh run has the key of the archived run's task";
}

// --dir defaults to the working directory; --run-id names the run.
TEST_F(WizqCliTest, DirDefaultsToTheWorkingDirectoryAndRunIdIsUsed) {
  const WizqResult r = RunWizq({"wizq", "run", DataFile("basic.jsonc"),
                                "--input", R"({"n":1})", "--run-id", "my-run"},
                               {dir_.path(), {}});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(test::HasRun(dir_.path()));
  const Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["run_id"], "my-run");
  const WizqResult s = RunWizq({"wizq", "status"}, {dir_.path(), {}});
  EXPECT_TRUE(s.exited && s.code == 0) << s.Describe();
  EXPECT_TRUE(Contains(s.out, "my-run")) << s.out;
}

// The top-level max_concurrency caps what one process runs at once, a
// step's own max_concurrency caps its tasks, --jobs overrides the former.
TEST_F(WizqCliTest, ConcurrencyLimitsAreHonoured) {
  struct Case {
    std::vector<std::string> args;
    size_t max_total, max_slow, max_fast;
  };
  const std::vector<Case> cases = {
      {{}, 3, 1, 3}, {{"--jobs", "1"}, 1, 1, 1}, {{"--jobs", "8"}, 4, 1, 3}};
  for (const Case& c : cases) {
    ScratchDir dir;
    test::StartOver(dir.path());  // with a store: a new run each
    std::vector<std::string> args = {
        "wizq", "run", DataFile("concurrency.jsonc"), "--dir", dir.path()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const WizqResult r = RunWizq(args);
    ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
    std::set<std::string> running;
    size_t total = 0, slow = 0, fast = 0;
    for (const LedgerLine& l : test::ReadLedger(dir.path())) {
      if (l.kind == "start") running.insert(l.role);
      if (l.kind == "end") running.erase(l.role);
      size_t s = 0, f = 0;
      for (const std::string& role : running) {
        s += role.rfind("slow", 0) == 0;
        f += role.rfind("fast", 0) == 0;
      }
      total = std::max(total, running.size());
      slow = std::max(slow, s);
      fast = std::max(fast, f);
    }
    const std::string name = c.args.empty() ? "default" : c.args.back();
    EXPECT_LE(total, c.max_total) << name;
    EXPECT_LE(slow, c.max_slow) << name;
    EXPECT_LE(fast, c.max_fast) << name;
    EXPECT_GE(total, std::min<size_t>(c.max_total, 2))
        << name << ": tasks never ran in parallel";
  }
}

// SIGTERM (and SIGINT): the running tasks are stopped, their process trees
// ended and the tasks put back without counting the attempt; exit 130; the
// next run finishes them.
TEST_F(WizqCliTest, SigtermStopsTasksAndPutsThemBack) {
  const test::SpawnOptions slow{"", {{"NAP_FLOOR_MS", "400"}}};
  for (int sig : {SIGTERM, SIGINT}) {
    ScratchDir dir;
    test::StartOver(dir.path());  // with a store: a new run each
    SCOPED_TRACE(sig == SIGTERM ? "SIGTERM" : "SIGINT");
    const std::vector<std::string> cmd = {
        "wizq",    "run",       DataFile("basic.jsonc"), "--dir", dir.path(),
        "--input", R"({"n":4})"};
    {
      WizqProcess p(cmd, slow);
      ASSERT_TRUE(test::WaitFor(
          [&] {
            return test::LedgerFind(test::ReadLedger(dir.path()), "start")
                           .size() >= 3 ||
                   p.Poll();
          },
          test::seconds(20)));
      p.Kill(sig);
      const WizqResult& r = p.Wait(test::seconds(20));
      EXPECT_TRUE(r.exited && r.code == 130) << r.Describe();
    }
    EXPECT_EQ(test::HeldLocks(dir.path() + "/locks"),
              std::vector<std::string>{})
        << "stopped tasks still run";
    int put_back = 0;
    for (const Json& e : test::ReadAudit(dir.path())) {
      if (e["event"] != "task_reset") continue;
      put_back++;
      EXPECT_EQ(e["reason"], "interrupted") << e.dump();
      EXPECT_EQ(e.value("refund", false), true) << e.dump();
    }
    EXPECT_GE(put_back, 1);
    const Json mid = test::StatusJson(dir.path());
    EXPECT_EQ(mid["counts"]["in_progress"], 0) << "claims left behind";
    const WizqResult r = RunWizq(cmd);
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
    const Json st = test::StatusJson(dir.path());
    EXPECT_EQ(st["counts"]["done"], 5);
    for (const Json& t : st["tasks"]) {
      EXPECT_EQ(t["attempts"], 1)
          << "an interrupted attempt was counted: " << t.dump();
    }
  }
}

// Once only Pool tasks are left, `wizq run` without --agent keeps going,
// says once that it waits for agents and how to start one (also as a
// --json note), and Ctrl+C leaves the Pool task pending for later.
TEST_F(WizqCliTest, RunWithOnlyPoolTasksLeftWaitsForAgents) {
  WizqProcess run(
      {"wizq", "run", DataFile("pool.jsonc"), "--dir", dir_.path(), "--json"});
  ASSERT_TRUE(test::WaitFor(
      [&] { return Contains(run.Stderr(), "waiting for agents"); },
      test::seconds(30)))
      << run.Stderr();
  EXPECT_TRUE(Contains(run.Stderr(), "wizq agent serve")) << run.Stderr();
  EXPECT_TRUE(Contains(run.Stdout(), "\"waiting for agents")) << run.Stdout();
  std::this_thread::sleep_for(test::milliseconds(300));
  EXPECT_FALSE(run.Poll()) << "wizq stopped instead of waiting: "
                           << run.result().Describe();
  run.Kill(SIGINT);
  const WizqResult& r = run.Wait(test::seconds(20));
  EXPECT_TRUE(r.exited && r.code == 130) << r.Describe();
  EXPECT_EQ(test::LedgerFind(Ledger(), "end", "root").size(), 1u);
  const Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["status"], "running") << "the run is kept for later";
  EXPECT_EQ(OneTask(st, "Review")["state"], "pending");
  EXPECT_EQ(OneTask(st, "Review")["attempts"], 0);
}

// --- timeouts ----------------------------------------------------------------

class WizqTimeoutTest : public WizqCliTest {
 protected:
  void TearDown() override {
    // Whatever survived must not linger for 100s.
    for (const char* f :
         {"grandchild.pid", "grandchild2.pid", "setsid.pid", "stubborn.pid"}) {
      const std::string text = ReadAll(dir_.Join(f));
      if (!text.empty()) kill(std::stoi(text), SIGKILL);
    }
  }
  // Runs timeout.jsonc; the run must end within `limit`.
  WizqResult RunTimeouts() {
    const auto start = test::Clock::now();
    WizqResult r = Run("timeout.jsonc", "");
    EXPECT_LT(test::Clock::now() - start, test::seconds(15))
        << "a 1s timeout took this long to end the task";
    return r;
  }
  pid_t PidFrom(const char* file) {
    const std::string text = ReadAll(dir_.Join(file));
    EXPECT_FALSE(text.empty()) << file << " was not written";
    return text.empty() ? 0 : std::stoi(text);
  }
};

TEST_F(WizqTimeoutTest, TimeoutKillsTheTasksProcessTreeAndFails) {
  const WizqResult r = RunTimeouts();
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  const Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["status"], "failed");
  const Json hang = OneTask(st, "Hang");
  EXPECT_EQ(hang["state"], "failed");
  EXPECT_EQ(hang["attempts"], 1);
  EXPECT_EQ(hang["max_attempts"], 1);
  EXPECT_EQ(hang["error"]["reason"], "timeout") << hang.dump();
  // retry_on_timeout false: attempts left, but not retried.
  const Json no_retry = OneTask(st, "HangNoRetry");
  EXPECT_EQ(no_retry["state"], "failed");
  EXPECT_EQ(no_retry["attempts"], 1);
  EXPECT_EQ(no_retry["max_attempts"], 3);
  EXPECT_EQ(no_retry["error"]["reason"], "timeout") << no_retry.dump();
  const Json stubborn = OneTask(st, "HangStubborn");
  EXPECT_EQ(stubborn["state"], "failed");
  EXPECT_EQ(stubborn["error"]["reason"], "timeout") << stubborn.dump();
  for (const char* f : {"grandchild.pid", "grandchild2.pid", "stubborn.pid"}) {
    const pid_t pid = PidFrom(f);
    EXPECT_TRUE(pid > 0 && test::ProcessDead(pid))
        << "the grandchild in " << f << " (pid " << pid
        << ") outlived its timed-out task";
  }
  // retry_on_timeout (default true): tried again, then failed.
  const Json retry = OneTask(st, "HangRetry");
  EXPECT_EQ(retry["state"], "failed");
  EXPECT_EQ(retry["attempts"], 2);
  EXPECT_EQ(retry["error"]["reason"], "timeout") << retry.dump();
  EXPECT_EQ(test::LedgerFind(Ledger(), "start", "hang-retry").size(), 2u);
  int failures = 0;
  for (const Json& e : test::ReadAudit(dir_.path())) {
    if (e["event"] != "task_failed") continue;
    failures++;
    EXPECT_EQ(e["reason"], "timeout") << e.dump();
    EXPECT_EQ(e["will_retry"], e["id"] == retry["id"] && e["attempt"] == 1)
        << e.dump();
  }
  EXPECT_EQ(failures, 5);
}

// A grandchild that left the task's process group (setsid) but still holds
// the task's inherited descriptors (running.lock) is part of the tree too:
// command_runner.h says such a process can be found, and ReapOrphans does
// find it; a timeout must end it as well.
TEST_F(WizqTimeoutTest, TimeoutAlsoKillsAGrandchildThatLeftTheGroup) {
  const WizqResult r = RunTimeouts();
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  const pid_t pid = PidFrom("setsid.pid");
  EXPECT_TRUE(pid > 0 && test::ProcessDead(pid))
      << "the setsid grandchild (pid " << pid
      << ") outlived its timed-out task";
  EXPECT_EQ(test::HeldLocks(dir_.Join("locks")), std::vector<std::string>{})
      << "a process of the timed-out task still runs";
}

// --- invalid responses -------------------------------------------------------

TEST_F(WizqCliTest, InvalidResponsesAreRetriedThenFailed) {
  const WizqResult r = Run("invalid_responses.jsonc", "");
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "invalid_response")) << r.err;
  const Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["status"], "failed");
  struct Case {
    const char* step;
    const char* role;
    int attempts;
    std::vector<const char*> says;  // in the failure message
  };
  const std::vector<Case> cases = {
      {"NonJson", "non-json", 2, {"not valid JSON", "this is not json"}},
      {"WrongKind", "wrong-kind", 2, {"\"Other\"", "next", "Target"}},
      {"UnknownKind", "unknown-kind", 2, {"NoSuchStep"}},
      {"BadSchema", "bad-schema", 2, {"value_schema", "$.n", "Target"}},
      {"NotAnArray", "not-an-array", 2, {"array"}},
      {"NoRetry", "no-retry", 1, {"not valid JSON"}},
  };
  const std::vector<LedgerLine> ledger = Ledger();
  const std::vector<Json> audit = test::ReadAudit(dir_.path());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.step);
    const Json t = OneTask(st, c.step);
    EXPECT_EQ(t["state"], "failed");
    EXPECT_EQ(t["attempts"], c.attempts);
    EXPECT_EQ(t["max_attempts"], 2);
    EXPECT_EQ(t["error"]["reason"], "invalid_response") << t.dump();
    const std::string message = t["error"].value("message", "");
    for (const char* s : c.says) {
      EXPECT_TRUE(Contains(message, s)) << "'" << s << "' not in: " << message;
    }
    // It ran (to its end) once per attempt.
    const std::vector<LedgerLine> ends =
        test::LedgerFind(ledger, "end", c.role);
    EXPECT_EQ(ends.size(), static_cast<size_t>(c.attempts));
    int failed = 0;
    for (const Json& e : audit) {
      if (e["event"] != "task_failed" || e["id"] != t["id"]) continue;
      failed++;
      EXPECT_EQ(e["reason"], "invalid_response");
      EXPECT_EQ(e["will_retry"], failed < c.attempts) << e.dump();
    }
    EXPECT_EQ(failed, c.attempts);
  }
  // Nothing an invalid response asked for was submitted.
  EXPECT_TRUE(test::FindTasks(st, "Target").empty());
  EXPECT_TRUE(test::FindTasks(st, "Other").empty());
  EXPECT_EQ(st["counts"]["done"], 1);
}

// --- finally hooks -----------------------------------------------------------

class WizqFinallyTest : public WizqCliTest {
 protected:
  WizqResult RunScenario(const std::string& scenario) {
    return Run("finally.jsonc", R"({"scenario":")" + scenario + "\"}");
  }
};

// A child that fails once and then succeeds: the hook fires after its
// success, not after its failure.
TEST_F(WizqFinallyTest, FiresAfterARetriedChildSucceeds) {
  const WizqResult r = RunScenario("retried");
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  const std::vector<LedgerLine> l = Ledger();
  const size_t hook = First(l, "start", "hook-root");
  EXPECT_EQ(test::LedgerFind(l, "start", "hook-root").size(), 1u);
  EXPECT_LT(Last(l, "fail", "flaky"), hook);
  EXPECT_LT(Last(l, "end", "flaky"), hook);
  EXPECT_LT(Last(l, "end", "quick"), hook);
  const Json st = test::StatusJson(dir_.path());
  const Json flaky = OneTask(st, "Flaky");
  EXPECT_EQ(flaky["state"], "done");
  EXPECT_EQ(flaky["attempts"], 2);
  const Json h = OneTask(st, "Root", /*hook=*/true);
  EXPECT_EQ(h["state"], "done");
  const std::vector<Json> audit = test::ReadAudit(dir_.path());
  EXPECT_GT(SeqOf(audit, "task_submitted", h["id"]),
            SeqOf(audit, "task_completed", flaky["id"]));
  // The retry was not claimed before its retry_at.
  int64_t retry_at = 0, reclaimed = 0;
  for (const Json& e : audit) {
    if (e.value("id", int64_t{0}) != flaky["id"]) continue;
    if (e["event"] == "task_failed") {
      EXPECT_EQ(e["will_retry"], true) << e.dump();
      retry_at = e.value("retry_at", int64_t{0});
    }
    if (e["event"] == "task_claimed" && e["attempt"] == 2) reclaimed = e["ts"];
  }
  EXPECT_GT(retry_at, 0);
  EXPECT_GE(reclaimed, retry_at) << "retried before its retry_at";
}

// A child that fails for good counts as finished: the hook still fires,
// and the run ends failed.
TEST_F(WizqFinallyTest, FiresWhenAChildFailsForGood) {
  const WizqResult r = RunScenario("child_fails");
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  const std::vector<LedgerLine> l = Ledger();
  const size_t hook = First(l, "start", "hook-root");
  EXPECT_EQ(test::LedgerFind(l, "fail", "bad").size(), 2u);
  EXPECT_LT(Last(l, "fail", "bad"), hook);
  EXPECT_LT(Last(l, "end", "quick"), hook);
  const Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["status"], "failed");
  const Json bad = OneTask(st, "Bad");
  EXPECT_EQ(bad["state"], "failed");
  EXPECT_EQ(bad["error"]["reason"], "exit_code");
  EXPECT_EQ(OneTask(st, "Root", true)["state"], "done");
}

// Root -> A -> B -> C, hooks on C, B, A and Root; B's hook spawns D (which
// attaches to A), A's spawns three E (attached to Root), Root's two Z (top
// level). Hooks fire innermost first, each after everything below its task
// including what inner hooks spawned.
TEST_F(WizqFinallyTest, NestedHooksFireInnermostFirstAndWaitForHookTasks) {
  const WizqResult r = RunScenario("nested");
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  const std::vector<LedgerLine> l = Ledger();
  for (const LedgerLine& line : l) {
    if (line.kind == "start") {
      EXPECT_EQ(test::LedgerFind(l, "start", line.role).size(), 1u)
          << line.role << " ran more than once";
    }
  }
  EXPECT_LT(Last(l, "end", "c"), First(l, "start", "hook-c"));
  EXPECT_LT(Last(l, "end", "hook-c"), First(l, "start", "hook-b"));
  EXPECT_LT(Last(l, "end", "hook-b"), First(l, "start", "d"));
  EXPECT_LT(Last(l, "end", "d"), First(l, "start", "hook-a"));
  for (const char* e : {"e-e1", "e-e2", "e-e3"}) {
    EXPECT_LT(Last(l, "end", "hook-a"), First(l, "start", e));
    EXPECT_LT(Last(l, "end", e), First(l, "start", "hook-root"));
  }
  for (const char* z : {"z-z1", "z-z2"}) {
    EXPECT_LT(Last(l, "end", "hook-root"), First(l, "start", z));
  }

  const Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["status"], "completed");
  EXPECT_EQ(st["counts"]["done"], 14);
  EXPECT_EQ(st["counts"]["failed"], 0);
  const int64_t root = OneTask(st, "Root")["id"];
  const int64_t a = OneTask(st, "A")["id"];
  const int64_t b = OneTask(st, "B")["id"];
  EXPECT_EQ(test::ParentId(OneTask(st, "C", true)), b);
  EXPECT_EQ(test::ParentId(OneTask(st, "B", true)), a);
  EXPECT_EQ(test::ParentId(OneTask(st, "D")), a)
      << "a hook's tasks attach to its task's parent";
  EXPECT_EQ(test::ParentId(OneTask(st, "A", true)), root);
  const std::vector<Json> es = test::FindTasks(st, "E");
  EXPECT_EQ(es.size(), 3u);
  for (const Json& e : es) EXPECT_EQ(test::ParentId(e), root) << e.dump();
  EXPECT_EQ(test::ParentId(OneTask(st, "Root", true)), 0);
  const std::vector<Json> zs = test::FindTasks(st, "Z");
  EXPECT_EQ(zs.size(), 2u);
  // The run waited for what the root's hook spawned.
  const std::vector<Json> audit = test::ReadAudit(dir_.path());
  int64_t finished = 0;
  for (const Json& e : audit) {
    if (e["event"] == "run_finished") finished = e["seq"];
  }
  for (const Json& z : zs) {
    EXPECT_EQ(test::ParentId(z), 0) << z.dump();
    EXPECT_EQ(z["state"], "done");
    const int64_t done = SeqOf(audit, "task_completed", z["id"]);
    EXPECT_TRUE(done > 0 && done < finished) << z.dump();
  }
}

TEST_F(WizqFinallyTest, FailingHookIsRetried) {
  const WizqResult r = RunScenario("hook_retry");
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  const std::vector<LedgerLine> l = Ledger();
  EXPECT_LT(First(l, "fail", "hook-root"), First(l, "end", "hook-root"));
  const Json h = OneTask(test::StatusJson(dir_.path()), "Root", true);
  EXPECT_EQ(h["state"], "done");
  EXPECT_EQ(h["attempts"], 2);
}

TEST_F(WizqFinallyTest, HookFailingForGoodFailsTheRun) {
  const WizqResult r = RunScenario("hook_fails");
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_EQ(test::LedgerFind(Ledger(), "fail", "hook-root").size(), 2u);
  const Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["status"], "failed");
  const Json h = OneTask(st, "Root", true);
  EXPECT_EQ(h["state"], "failed");
  EXPECT_EQ(h["attempts"], 2);
  EXPECT_EQ(h["error"]["reason"], "exit_code");
}

TEST_F(WizqFinallyTest, TaskSpawnedByAHookFailingFailsTheRun) {
  const WizqResult r = RunScenario("hook_child_fails");
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  const std::vector<LedgerLine> l = Ledger();
  EXPECT_LT(Last(l, "end", "hook-root"), First(l, "start", "bad"));
  const Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["status"], "failed");
  EXPECT_EQ(OneTask(st, "Root", true)["state"], "done");
  const Json bad = OneTask(st, "Bad");
  EXPECT_EQ(bad["state"], "failed");
  EXPECT_EQ(test::ParentId(bad), 0);
}

}  // namespace
}  // namespace wizq::cli_test
