// `wizq crashtest` (tools/crashtest/crashtest.h) driving the real binary on the
// fixtures of tests/data/crashtest/: Reference 002's five-step pipeline
// (Gather, Plan, Build, Verify, Ship), in variants where every step is safe
// to re-run, where Build appends to a file, where Build's mode depends on
// the attempt and where Ship writes the time; a fan-out where one task is
// still running when another's result is committed; two tasks appending to
// one file in parallel; a human gate. The pipeline has 17 kill points; a
// crashtest of all of them takes a few seconds.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Contains;
using test::Json;
using test::ScratchDir;
using test::WizqResult;

std::string Fixture(const std::string& name) {
  return test::SourceDir() + "/tests/data/crashtest/" + name + ".jsonc";
}

class CrashtestTest : public ::testing::Test {
 protected:
  void SetUp() override { test::BecomeSubreaper(); }

  // `wizq crashtest <fixture> <args>`, its scratch directories in tmp_.
  WizqResult Crashtest(const std::string& fixture,
                       std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {"wizq", "crashtest", Fixture(fixture)};
    argv.insert(argv.end(), args.begin(), args.end());
    test::SpawnOptions o;
    o.env = {{"TMPDIR", tmp_.path()}};
    test::WizqProcess p(argv, o);
    return p.Wait(std::chrono::seconds(240));
  }

  // The --json report; fails the test if stdout is not one JSON object.
  static Json Report(const WizqResult& r) {
    Json j = test::ParseJsonOrNull(r.out);
    EXPECT_TRUE(j.is_object()) << r.Describe();
    return j.is_object() ? j : Json::object();
  }

  // Names left in TMPDIR (scratch directories crashtest did not clean).
  std::vector<std::string> Leftovers() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(tmp_.path())) {
      out.push_back(e.path().filename().string());
    }
    return out;
  }

  ScratchDir tmp_;
};

// Kill points where a task ran again, by the report.
int Reexecutions(const Json& report) {
  int n = 0;
  for (const Json& c : report["results"]) {
    n += static_cast<int>(c["reexecuted"].size());
  }
  return n;
}

TEST_F(CrashtestTest, PassesOnAWorkflowSafeToReRun) {
  const WizqResult r = Crashtest("idempotent", {"--json"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const Json j = Report(r);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["kill_points_tested"], j["kill_points_total"]);
  EXPECT_GE(j["kill_points_total"].get<int>(), 12);
  for (const Json& c : j["results"]) {
    EXPECT_TRUE(c["crashed"].get<bool>()) << c.dump();
    EXPECT_EQ(c["status"], "completed") << c.dump();
    EXPECT_TRUE(c["differences"].empty()) << c.dump();
  }
  // Killed after a body finished and before its result was durable, a step
  // runs twice (a power cut): the test must have caused re-runs and counted
  // them, or passing proves nothing.
  EXPECT_GE(Reexecutions(j), 5) << r.out;
  EXPECT_EQ(j["unsafe_steps"], Json::array());
  EXPECT_TRUE(Leftovers().empty()) << "scratch directories not cleaned";
}

// The verdict line of a crashtest's table.
std::string Verdict(const std::string& out) {
  for (const std::string& line : test::SplitLines(out)) {
    if (line.rfind("verdict: ", 0) == 0) return line;
  }
  return "";
}

TEST_F(CrashtestTest, FailsNamingTheStepThatAppends) {
  const WizqResult r = Crashtest("append");
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_EQ(Verdict(r.out),
            "verdict: NOT SAFE: step Build is not safe to re-run")
      << r.out;
  EXPECT_TRUE(Contains(r.out,
                       "step Build ran again at before task_completed #3 "
                       "Build, which ends with steps.log: 1 line added: "
                       "\"build\""))
      << r.out;
  for (const char* safe : {"Gather", "Plan", "Verify", "Ship"}) {
    EXPECT_FALSE(Contains(r.out, std::string("step ") + safe + " ")) << r.out;
  }
  const WizqResult j = Crashtest("append", {"--json"});
  ASSERT_TRUE(j.exited && j.code == 1) << j.Describe();
  EXPECT_EQ(Report(j)["unsafe_steps"], Json::array({"Build"}));
}

// The result at the kill point named `name`.
Json ResultAt(const Json& report, const std::string& name) {
  for (const Json& c : report["results"]) {
    if (c["kill_point"] == name) return c;
  }
  ADD_FAILURE() << "no kill point " << name << " in " << report.dump();
  return Json::object();
}

// Fast's result is committed while Slow sleeps: "after task_completed #3
// Fast", a power cut kills Slow mid-body, and Slow runs again (crashtest
// kills the task trees: a Slow left running would be waited for and
// adopted, not run again).
TEST_F(CrashtestTest, PowerCutReRunsATaskThatWasRunning) {
  const WizqResult r = Crashtest("fanout", {"--json"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const Json j = Report(r);
  const Json c = ResultAt(j, "after task_completed #3 Fast");
  EXPECT_EQ(c["at"], "done Fast#3") << c.dump();
  EXPECT_EQ(c["crashed"], true) << c.dump();
  ASSERT_EQ(c["reexecuted"].size(), 1u) << c.dump();
  EXPECT_EQ(c["reexecuted"][0]["task"], "Slow#2");
  EXPECT_EQ(c["reexecuted"][0]["executions"], 2);
  EXPECT_EQ(c["matches"], true);
}

// Whether the JSON array `list` holds the string `s`.
bool Holds(const Json& list, const std::string& s) {
  return list.is_array() &&
         std::find(list.begin(), list.end(), Json(s)) != list.end();
}

// With only wizq killed, a task whose body had finished, or was still
// running, is adopted on resume instead of run again (SPEC §15), so even
// the appending step leaves the same file and no task runs twice. Every
// kill point must have crashed its run, and the resumes must have adopted
// where the test says they do, or zero re-executions proves nothing: each
// task killed "before task_completed" (its body finished, its result not
// durable) and fanout's Slow, still running when Fast's result committed.
TEST_F(CrashtestTest, OrchestratorOnlyAdoptsInsteadOfReRunning) {
  const std::regex finished("before task_completed #([0-9]+) (\\S+)");
  const std::pair<const char*, int> fixtures[] = {{"append", 5}, {"fanout", 3}};
  for (const auto& [fixture, tasks] : fixtures) {
    SCOPED_TRACE(fixture);
    const WizqResult r = Crashtest(fixture, {"--orchestrator-only", "--json"});
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
    const Json j = Report(r);
    EXPECT_EQ(j["mode"], "orchestrator_only");
    EXPECT_EQ(j["ok"], true);
    EXPECT_EQ(Reexecutions(j), 0) << r.out;
    int finished_points = 0;
    for (const Json& c : j["results"]) {
      EXPECT_TRUE(c.value("crashed", false)) << c.dump();
      std::smatch m;
      const std::string point = c.value("kill_point", "");
      if (!std::regex_match(point, m, finished)) continue;
      finished_points++;
      const std::string task = m[2].str() + "#" + m[1].str();
      EXPECT_TRUE(Holds(c.value("adopted", Json()), task))
          << task << " not adopted: " << c.dump();
    }
    EXPECT_EQ(finished_points, tasks) << r.out;
    if (std::string(fixture) == "fanout") {
      const Json c = ResultAt(j, "after task_completed #3 Fast");
      EXPECT_TRUE(Holds(c.value("adopted", Json()), "Slow#2")) << c.dump();
    }
  }
}

// Two Append tasks append to one file in parallel, in either order, so the
// undisturbed runs differ in the order of its lines (not a difference) and
// kill points name events, not commit indexes. Run three times, crashtest
// gives the same verdict and kill points, names the appending step (run
// again, it adds its line again) and never Root, which only fans out.
TEST_F(CrashtestTest, RacyAppendsGetTheSameVerdictEveryTime) {
  std::vector<std::string> first_points;
  for (int i = 0; i < 3; i++) {
    SCOPED_TRACE("crashtest #" + std::to_string(i + 1));
    const WizqResult r = Crashtest("racy");
    ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
    EXPECT_EQ(Verdict(r.out),
              "verdict: NOT SAFE: step Append is not safe to re-run")
        << r.out;
    // Where else it ran again (killed mid-body while another's result
    // was committed) depends on timing; these two never do.
    for (const char* at : {"before task_completed #2 Append",
                           "before task_completed #3 Append"}) {
      EXPECT_TRUE(std::regex_search(
          r.out,
          std::regex(std::string("step Append ran again at [^\\n]*") + at)))
          << at << "\n"
          << r.out;
    }
    EXPECT_TRUE(
        std::regex_search(r.out, std::regex("steps.log: [12] lines? added")))
        << r.out;
    EXPECT_FALSE(Contains(r.out, "step Root")) << r.out;
    EXPECT_FALSE(Contains(r.out, "not compared")) << r.out;
    std::vector<std::string> points;  // from the progress lines
    for (const std::string& line : test::SplitLines(r.err)) {
      const size_t slash = line.find("/11 ");
      if (slash != std::string::npos) {
        points.push_back(line.substr(slash + 4, line.rfind(": ") - slash - 4));
      }
    }
    ASSERT_EQ(points.size(), 11u) << r.err;
    if (i == 0) first_points = points;
    EXPECT_EQ(points, first_points);
  }
  EXPECT_EQ(first_points.front(), "after run_started");
  EXPECT_EQ(first_points[5], "before task_completed #2 Append");
}

// A Pool step without --agent, a Prompt without a default nor an --answer
// naming its step, an --answer by task id: refused at once, exit 2, nothing
// run, each message naming the step and the flag to use.
TEST_F(CrashtestTest, RefusesWhatItCannotRunUnattended) {
  const std::string review =
      test::SourceDir() + "/examples/review/workflow.jsonc";
  test::SpawnOptions o;
  o.env = {{"TMPDIR", tmp_.path()}};
  WizqResult r = test::WizqProcess({"wizq", "crashtest", review}, o).Wait();
  EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err,
                       "step Review is a Pool step: give --agent "
                       "COMMAND"))
      << r.err;
  r = Crashtest("gate");
  EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "step Confirm is a Prompt without a default"))
      << r.err;
  EXPECT_TRUE(Contains(r.err, "give --answer Confirm=VALUE")) << r.err;
  r = Crashtest("gate", {"--answer", "2=true"});
  EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "--answer 2=true: name a Prompt step")) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Leftovers().empty());
}

// --answer and --agent are passed to every run: a workflow with a human
// gate, and the review example with its Pool step, run to the end at every
// kill point tested.
TEST_F(CrashtestTest, AnswersAndAgentsArePassedToEveryRun) {
  WizqResult r = Crashtest("gate", {"--answer", "Confirm=true", "--json"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  Json j = Report(r);
  EXPECT_EQ(j["ok"], true);
  for (const Json& c : j["results"]) {
    EXPECT_TRUE(c["crashed"].get<bool>()) << c.dump();
  }
  const std::string review = test::SourceDir() + "/examples/review/";
  test::SpawnOptions o;
  o.env = {{"TMPDIR", tmp_.path()}};
  test::WizqProcess p(
      {"wizq", "crashtest", review + "workflow.jsonc", "--agent",
       review + "agent.sh", "--kills", "2", "--baseline-runs", "1", "--json"},
      o);
  r = p.Wait(std::chrono::seconds(240));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  j = Report(r);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["undisturbed"]["status"], "completed");
}

TEST_F(CrashtestTest, JsonShape) {
  const WizqResult r = Crashtest("append", {"--kills", "3", "--json"});
  ASSERT_TRUE(r.exited) << r.Describe();
  const Json j = Report(r);
  for (const char* key :
       {"workflow", "mode", "kill_points_total", "kill_points_tested",
        "undisturbed", "nondeterministic", "results", "unsafe_steps", "scratch",
        "ok"}) {
    EXPECT_TRUE(j.contains(key)) << key << " missing: " << r.out;
  }
  EXPECT_EQ(j["mode"], "power_cut");
  EXPECT_EQ(j["kill_points_tested"], 3);
  EXPECT_EQ(j["kill_points_total"], 17);
  EXPECT_TRUE(j["scratch"].is_null());
  EXPECT_EQ(j["undisturbed"]["status"], "completed");
  EXPECT_EQ(j["undisturbed"]["tasks"], 5);
  EXPECT_EQ(j["undisturbed"]["runs"], 3);
  EXPECT_EQ(j["nondeterministic"], Json::array());
  EXPECT_TRUE(j["undisturbed"]["duration_ms"].is_number_integer());
  ASSERT_EQ(j["results"].size(), 3u);
  std::vector<std::string> points;
  for (const Json& c : j["results"]) {
    for (const char* key :
         {"kill_point", "crash_at", "crash_if", "at", "crashed", "resumes",
          "status", "exit_code", "reexecuted", "adopted", "differences", "diff",
          "reordered", "failed_tasks", "error", "matches"}) {
      EXPECT_TRUE(c.contains(key)) << key << " missing: " << c.dump();
    }
    for (const Json& t : c["reexecuted"]) {
      EXPECT_TRUE(t["task"].is_string() && t["step"].is_string() &&
                  t["executions"].is_number_integer())
          << t.dump();
    }
    for (const Json& d : c["diff"]) {
      EXPECT_EQ(d["path"], "steps.log") << d.dump();
      EXPECT_EQ(d["what"], "lines") << d.dump();
      EXPECT_EQ(d["added"], Json::array({"build"})) << d.dump();
      EXPECT_EQ(d["missing"], Json::array()) << d.dump();
    }
    points.push_back(c["kill_point"].get<std::string>());
  }
  // --kills samples evenly and always the same points.
  const Json again = Report(Crashtest("append", {"--kills", "3", "--json"}));
  std::vector<std::string> points_again;
  for (const Json& c : again["results"]) {
    points_again.push_back(c["kill_point"].get<std::string>());
  }
  EXPECT_EQ(points, points_again);
}

TEST_F(CrashtestTest, ComparesModes) {
  const WizqResult r = Crashtest("chmod");
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "build.done: mode 0644 -> 0600")) << r.out;
  EXPECT_TRUE(Contains(r.out, "step Build is not safe to re-run")) << r.out;
}

// Ship writes the time: the undisturbed runs already differ there, so the
// file is named with its lines and not compared, and no step is blamed.
// With one undisturbed run, the kill points differ without a re-run: not
// reproducible; --ignore leaves the file out.
TEST_F(CrashtestTest, NotReproducibleEndStateAndIgnore) {
  WizqResult r = Crashtest("stamp", {"--kills", "2"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out,
                       "not compared: 1 path(s) differ between the 3 "
                       "undisturbed runs"))
      << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("  ship.stamp: 1 line added: \"[0-9]+\", 1 line "
                        "missing: \"[0-9]+\" \\(undisturbed run 2")))
      << r.out;
  EXPECT_FALSE(Contains(r.out, "not safe")) << r.out;
  r = Crashtest("stamp", {"--kills", "2", "--baseline-runs", "1"});
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "ship.stamp: 1 line added")) << r.out;
  EXPECT_TRUE(Contains(r.out, "although no task ran again")) << r.out;
  r = Crashtest(
      "stamp", {"--kills", "2", "--baseline-runs", "1", "--ignore", "*.stamp"});
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
}

TEST_F(CrashtestTest, TemplateIsCopiedAndKeepLeavesTheRuns) {
  ScratchDir tmpl;
  fs::create_directories(tmpl.Join("etc/deep"));
  test::WriteAll(tmpl.Join("etc/deep/seed.conf"), "seed\n");
  chmod(tmpl.Join("etc/deep/seed.conf").c_str(), 0640);
  fs::create_directory_symlink("etc", tmpl.Join("link"));
  const WizqResult r = Crashtest(
      "idempotent",
      {"--template", tmpl.path(), "--kills", "2", "--keep", "--json"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const Json j = Report(r);
  // 5 .done files + etc, etc/deep, etc/deep/seed.conf, link.
  EXPECT_EQ(j["undisturbed"]["paths"], 9) << r.out;
  ASSERT_TRUE(j["scratch"].is_string()) << r.out;
  const std::string kept = j["scratch"];
  for (const char* run :
       {"undisturbed", "undisturbed-2", "undisturbed-3", "kill-1", "kill-2"}) {
    const std::string seed = kept + "/" + run + "/etc/deep/seed.conf";
    EXPECT_EQ(test::ReadAll(seed), "seed\n") << seed;
    struct stat st;
    ASSERT_EQ(stat(seed.c_str(), &st), 0) << seed;
    EXPECT_EQ(st.st_mode & 07777, 0640u) << seed;
    EXPECT_TRUE(fs::is_symlink(kept + "/" + run + "/link")) << run;
    EXPECT_TRUE(fs::exists(kept + "/" + run + "/.wizard/audit.jsonl")) << run;
  }
}

// The installer example's steps are written to be safe to re-run (see the
// comments in examples/installer/steps/); a few of its 50-odd kill points,
// with tasks in parallel, keep it that way (`make crashtest-example`, or
// the command below without --kills, tests them all).
TEST_F(CrashtestTest, InstallerExampleIsSafeToReRun) {
  const std::string wf =
      test::SourceDir() + "/examples/installer/workflow.jsonc";
  test::SpawnOptions o;
  o.env = {{"TMPDIR", tmp_.path()}};
  test::WizqProcess p({"wizq", "crashtest", wf, "--input", R"({"delay":0.05})",
                       "--kills", "3", "--json"},
                      o);
  const WizqResult r = p.Wait(std::chrono::seconds(240));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Report(r)["ok"], true);
}

TEST_F(CrashtestTest, AFailingUndisturbedRunStopsWithItsExitCode) {
  const WizqResult r = Crashtest("fail");
  EXPECT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_TRUE(
      Contains(r.err, "the undisturbed run 1 of 3 did not complete (exit 1)"))
      << r.err;
  EXPECT_TRUE(Contains(r.err, "Broken#1 (exit_code)")) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Leftovers().empty());
}

// SIGTERM (or Ctrl+C) mid-way: every wizq and task process is killed, the
// scratch directory removed, exit 130.
TEST_F(CrashtestTest, InterruptedCleansUp) {
  test::SpawnOptions o;
  o.env = {{"TMPDIR", tmp_.path()}};
  test::WizqProcess p({"wizq", "crashtest", Fixture("fanout")}, o);
  // Until the run of kill point 6 is under way.
  const auto deadline = test::Clock::now() + std::chrono::seconds(60);
  while (!Contains(p.Stderr(), "5/11") && test::Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  p.Kill(SIGTERM);
  const WizqResult r = p.Wait();
  EXPECT_TRUE(r.exited && r.code == 130) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "interrupted")) << r.err;
  EXPECT_TRUE(Leftovers().empty());
  // Nothing of it is left running: a wizq run has its --dir under TMPDIR in
  // its command line, a task its WIZQ_INSTALL_DIR in its environment.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  test::ReapStrays();
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string cmd = test::ReadAll(e.path().string() + "/cmdline");
    const std::string env = test::ReadAll(e.path().string() + "/environ");
    EXPECT_FALSE(Contains(cmd + env, tmp_.path() + "/wizq-crashtest-"))
        << "left running: " << e.path() << " " << cmd;
  }
}

TEST_F(CrashtestTest, BadArgumentsExit2AndRunNothing) {
  const std::string bad =
      test::SourceDir() + "/tests/data/cli/invalid_workflow.jsonc";
  test::SpawnOptions o;
  o.env = {{"TMPDIR", tmp_.path()}};
  test::WizqProcess p({"wizq", "crashtest", bad}, o);
  WizqResult r = p.Wait();
  EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
  r = Crashtest("idempotent", {"--template", tmp_.Join("missing")});
  EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "is not a directory")) << r.err;
  r = Crashtest("idempotent", {"--power-cut", "--orchestrator-only"});
  EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
  EXPECT_TRUE(Leftovers().empty());
}

}  // namespace
}  // namespace wizq
