// `wizq agent ...` and `wizq run --agent` as agents and scripts use them
// (SPEC §9): the take/heartbeat/done round trip with its exit codes, take
// --wait woken by a `wizq run` that completes the parent, the review
// example driven both ways and resumed after kill -9 of either side, and
// an agent process tree left by a killed `serve` ended before the task's
// next attempt starts.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using test::Contains;
using test::Json;
using test::RunWizq;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

std::string Example(const std::string& name) {
  return test::SourceDir() + "/examples/review/" + name;
}

class AgentCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  void TearDown() override { test::ReapStrays(); }

  std::string Write(const std::string& name, const std::string& text) {
    test::WriteAll(work_.Join(name), text);
    return work_.Join(name);
  }
  // Waits until the run's directory exists (its first commit is durable).
  bool RunExists() {
    return test::WaitFor([&] { return test::HasRun(dir_.path()); },
                         test::seconds(30));
  }
  std::string ReviewMd() { return test::ReadAll(dir_.Join("REVIEW.md")); }

  ScratchDir dir_;   // the install directory
  ScratchDir work_;  // workflows and scripts
};

constexpr const char* kOnePool = R"({
  "entrypoint": "Review",
  "options": {"max_retries": 2, "lease": 60},
  "steps": [{"name": "Review", "next": [],
             "action": {"kind": "Pool", "instructions": "Look."}}]})";

TEST_F(AgentCliTest, TakeHeartbeatDoneRoundTrip) {
  const std::string wf = Write("wf.json", kOnePool);
  WizqProcess run({"wizq", "run", wf, "--dir", dir_.path()});
  ASSERT_TRUE(RunExists());
  WizqResult r = RunWizq({"wizq", "agent", "take", "--dir", dir_.path(),
                          "--agent", "me", "--wait", "30"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const Json p = Json::parse(r.out);
  const std::string id = std::to_string(p["task_id"].get<int>());
  const std::string lease = p["lease"];
  EXPECT_EQ(p["task"]["kind"], "Review");

  r = RunWizq({"wizq", "agent", "take", "--dir", dir_.path()});
  EXPECT_TRUE(r.exited && r.code == 5) << r.Describe();
  EXPECT_EQ(Json::parse(r.out), Json::parse(R"({"status":"idle"})"));

  r = RunWizq({"wizq", "status", "--dir", dir_.path()});
  EXPECT_TRUE(Contains(r.out, "leased by me, lapses in")) << r.out;

  r = RunWizq({"wizq", "agent", "heartbeat", "--dir", dir_.path(), "--task", id,
               "--lease", lease});
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  r = RunWizq({"wizq", "agent", "heartbeat", "--dir", dir_.path(), "--task", id,
               "--lease", "wrong"});
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err,
                       "wizq agent heartbeat: task 1 is held by another lease "
                       "(agent me) now, in attempt 1"))
      << r.err;

  // An invalid response from a file: exit 1, retried per the policy.
  const std::string bad = Write("bad.json", "[{\"kind\": \"Nope\"}]");
  r = RunWizq({"wizq", "agent", "done", "--dir", dir_.path(), "--task", id,
               "--lease", lease, "--response-file", bad});
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "invalid response for task 1")) << r.err;

  // Taken again (after the retry backoff); the response from stdin.
  r = RunWizq({"wizq", "agent", "take", "--dir", dir_.path(), "--wait", "30"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const Json p2 = Json::parse(r.out);
  EXPECT_EQ(p2["attempt"], 2);
  r = RunWizq({"/bin/sh", "-c",
               "echo '[]' | " + test::WizqPath() + " agent done --dir " +
                   dir_.path() + " --task " + id + " --lease " +
                   p2["lease"].get<std::string>()});
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();

  const WizqResult& end = run.Wait();
  EXPECT_TRUE(end.exited && end.code == 0) << end.Describe();
  r = RunWizq({"wizq", "agent", "take", "--dir", dir_.path()});
  EXPECT_TRUE(r.exited && r.code == 5) << r.Describe();
  EXPECT_EQ(Json::parse(r.out),
            Json::parse(R"({"status":"finished","run_status":"completed"})"));
}

TEST_F(AgentCliTest, BadArgumentsExit2) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"wizq", "agent"},
           {"wizq", "agent", "done", "--task", "1"},
           {"wizq", "agent", "heartbeat", "--task", "x", "--lease", "l"},
           {"wizq", "agent", "take", "--wait", "-1"},
           {"wizq", "agent", "serve"}}) {
    const WizqResult r = RunWizq(args);
    EXPECT_TRUE(r.exited && r.code == 2) << args.back() << r.Describe();
  }
  const WizqResult r = RunWizq({"wizq", "agent", "take", "--dir", dir_.path()});
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "no run in")) << r.err;
}

// take --wait returns as soon as a task becomes ready: here when `wizq
// run` completes the Command that spawns it.
TEST_F(AgentCliTest, TakeWaitWakesWhenAnotherProcessCompletesTheParent) {
  const std::string wf = Write("wf.json", R"({
    "entrypoint": "Root",
    "steps": [
      {"name": "Root", "next": ["Review"],
       "action": {"kind": "Command",
                  "script": "sleep 1; echo '[{\"kind\":\"Review\",\"value\":1}]'"}},
      {"name": "Review", "action": {"kind": "Pool", "instructions": "x"}}]})");
  WizqProcess run({"wizq", "run", wf, "--dir", dir_.path()});
  ASSERT_TRUE(RunExists());
  WizqProcess take(
      {"wizq", "agent", "take", "--dir", dir_.path(), "--wait", "60"});
  const WizqResult& r = take.Wait();
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Json::parse(r.out)["task"]["value"], 1);
  EXPECT_LT(test::Clock::now() - take.start_time(), test::seconds(20));
}

TEST_F(AgentCliTest, ReviewExampleRunsWithRunAgent) {
  const WizqResult r =
      RunWizq({"wizq", "run", Example("workflow.jsonc"), "--dir", dir_.path(),
               "--agent", Example("agent.sh")});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const std::string md = ReviewMd();
  EXPECT_TRUE(Contains(md, "- src/beta.c: request_changes")) << md;
  EXPECT_TRUE(Contains(md, "- src/alpha.c: approve")) << md;
  EXPECT_EQ(test::SplitLines(md).size(), 7u) << md;
}

// kill -9 of `wizq run --agent` while its agents work: the same command
// resumes (the killed run's agents are ended before their tasks run
// again, as for Command tasks) and finishes.
TEST_F(AgentCliTest, ReviewExampleWithRunAgentResumesAfterKill) {
  test::SpawnOptions slow;
  slow.env = {{"WIZQ_REVIEW_AGENT_DELAY", "0.5"}};
  const std::vector<std::string> cmd = {
      "wizq",      "run",     Example("workflow.jsonc"), "--dir",
      dir_.path(), "--agent", Example("agent.sh")};
  {
    WizqProcess run(cmd, slow);
    ASSERT_TRUE(
        test::WaitFor([&] { return Contains(run.Stderr(), "Review started"); },
                      test::seconds(30)))
        << run.Stderr();
    run.Kill(SIGKILL);
    run.Wait();
  }
  const WizqResult r = RunWizq(cmd, slow, test::seconds(90));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "resuming run")) << r.err;
  EXPECT_EQ(test::SplitLines(ReviewMd()).size(), 7u) << ReviewMd();
}

// Separate `wizq agent serve`s, with kill -9 of an agent and of the run
// halfway: restarting both resumes, and every file is reviewed.
TEST_F(AgentCliTest, ReviewExampleWithServesResumesAfterKills) {
  test::SpawnOptions slow;
  slow.env = {{"WIZQ_REVIEW_AGENT_DELAY", "0.5"}};
  {
    WizqProcess run({"wizq", "run", Example("workflow.jsonc"), "--dir",
                     dir_.path(), "--quiet"});
    WizqProcess serve({"wizq", "agent", "serve", "--dir", dir_.path(), "--",
                       Example("agent.sh")},
                      slow);
    ASSERT_TRUE(test::WaitFor(
        [&] { return Contains(serve.Stderr(), "attempt 1: started"); },
        test::seconds(30)))
        << serve.Stderr();
    serve.Kill(SIGKILL);
    run.Kill(SIGKILL);
    serve.Wait();
    run.Wait();
  }
  EXPECT_TRUE(ReviewMd().empty());
  WizqProcess run({"wizq", "run", Example("workflow.jsonc"), "--dir",
                   dir_.path(), "--quiet"});
  WizqProcess a({"wizq", "agent", "serve", "--dir", dir_.path(), "--",
                 Example("agent.sh")});
  WizqProcess b({"wizq", "agent", "serve", "--dir", dir_.path(), "--jobs", "2",
                 "--", Example("agent.sh")});
  const WizqResult& r = run.Wait(test::seconds(90));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(a.Wait().exited && a.result().code == 0) << a.result().Describe();
  EXPECT_TRUE(b.Wait().exited && b.result().code == 0) << b.result().Describe();
  EXPECT_EQ(test::SplitLines(ReviewMd()).size(), 7u) << ReviewMd();
}

// An agent COMMAND whose `serve` was killed keeps running as an orphan;
// once its lease lapses the next taker ends it before handing the task
// out, so the two attempts never overlap (SPEC §6.3, §9).
TEST_F(AgentCliTest, OrphanOfAKilledServeEndsBeforeTheNextAttempt) {
  const std::string wf = Write("wf.json", R"({
    "entrypoint": "Review", "options": {"max_retries": 2, "lease": 1},
    "steps": [{"name": "Review", "next": [],
               "action": {"kind": "Pool", "instructions": "x"}}]})");
  // Attempt 1 sleeps; every attempt first checks that no earlier
  // attempt's process is alive.
  const std::string agent = Write("agent.sh", R"(#!/bin/sh
d="$WIZQ_INSTALL_DIR"
for f in "$d"/agent.*.pid; do
  [ -f "$f" ] || continue
  state=$(cut -d' ' -f3 "/proc/$(cat "$f")/stat" 2>/dev/null || true)
  [ -n "$state" ] && [ "$state" != Z ] && echo "$f" >> "$d/overlap"
done
echo $$ > "$d/agent.$WIZQ_ATTEMPT.pid"
cat > /dev/null
[ "$WIZQ_ATTEMPT" = 1 ] && exec sleep 60
echo '[]'
)");
  chmod(agent.c_str(), 0755);
  WizqProcess run({"wizq", "run", wf, "--dir", dir_.path(), "--quiet"});
  ASSERT_TRUE(RunExists());
  {
    WizqProcess serve(
        {"wizq", "agent", "serve", "--dir", dir_.path(), "--", agent});
    ASSERT_TRUE(test::WaitFor(
        [&] { return !test::ReadAll(dir_.Join("agent.1.pid")).empty(); },
        test::seconds(30)));
    serve.Kill(SIGKILL);
    serve.Wait();
  }
  const pid_t orphan = std::stoi(test::ReadAll(dir_.Join("agent.1.pid")));
  ASSERT_FALSE(test::ProcessDead(orphan)) << "the orphan should live on";
  // A remote agent (a script calling take) is the next taker: by the time
  // take hands the task out, the orphan is gone.
  const WizqResult t =
      RunWizq({"wizq", "agent", "take", "--dir", dir_.path(), "--wait", "30"});
  ASSERT_TRUE(t.exited && t.code == 0) << t.Describe();
  EXPECT_TRUE(test::ProcessDead(orphan)) << "attempt 2 handed out while "
                                            "attempt 1's process runs";
  const Json p = Json::parse(t.out);
  EXPECT_EQ(p["attempt"], 2);
  // And a serve as the next taker (attempt 3).
  const WizqResult f =
      RunWizq({"wizq", "agent", "fail", "--dir", dir_.path(), "--task", "1",
               "--lease", p["lease"].get<std::string>()});
  // Within the 1 s lease as a rule; on a slow machine (a sanitizer build)
  // the lease may lapse first: attempt 2 is then put back, charged, all
  // the same.
  EXPECT_TRUE(
      f.exited &&
      (f.code == 0 || (f.code == 3 && test::Contains(f.err, "lease lost"))))
      << f.Describe();
  WizqProcess serve(
      {"wizq", "agent", "serve", "--dir", dir_.path(), "--", agent});
  const WizqResult& r = run.Wait(test::seconds(60));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe() << serve.Stderr();
  EXPECT_TRUE(test::ReadAll(dir_.Join("overlap")).empty())
      << "two attempts overlapped";
  const Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["tasks"][0]["attempts"], 3);
}

}  // namespace
}  // namespace wizq
