// Tests of the `wizq` command as users and scripts see it (SPEC §2, §3, §5,
// §7): the real binary runs the workflows of tests/data/cli/, whose tasks
// record what they do in a ledger (tests/data/cli/lib.sh); the tests check
// exit codes, output, `.wizard/` and the ledger.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"
#include "tests/wizq_cli_fixture.h"

namespace wizq::cli_test {
namespace {

// --- exit codes, arguments, validation ---------------------------------------

TEST_F(WizqCliTest, CompletedRunExits0) {
  const WizqResult r = Run("basic.jsonc", R"({"n":3})");
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["status"], "completed");
  EXPECT_EQ(st["counts"]["done"], 4);
  EXPECT_EQ(test::LedgerFind(Ledger(), "end").size(), 4u);
}

// The run id comes from the workflow and the canonical input: --input-file
// and an --input spelled differently name the same run, which is finished.
TEST_F(WizqCliTest, InputFileAndInputNameTheSameRun) {
  test::WriteAll(dir_.Join("in.json"), "{ \"n\" : 1.0 }\n");
  const WizqResult r =
      RunWizq({"wizq", "run", DataFile("basic.jsonc"), "--dir", dir_.path(),
               "--input-file", dir_.Join("in.json")});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(test::LedgerFind(Ledger(), "end").size(), 2u);
  const WizqResult again = Run("basic.jsonc", R"({"n":1})");
  EXPECT_TRUE(again.exited && again.code == 0) << again.Describe();
  EXPECT_TRUE(Contains(again.err, "already finished")) << again.err;
  EXPECT_EQ(test::LedgerFind(Ledger(), "end").size(), 2u);
}

TEST_F(WizqCliTest, InvalidWorkflowExits2AndWritesNothing) {
  const std::string inst = dir_.Join("install");
  const WizqResult r = RunWizq(
      {"wizq", "run", DataFile("invalid_workflow.jsonc"), "--dir", inst});
  EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "$.steps[0].bogus")) << r.err;
  EXPECT_FALSE(fs::exists(inst)) << "the install directory was created";
  // An existing install directory gets no .wizard/ either.
  const WizqResult r2 =
      RunWizq({"wizq", "run", DataFile("invalid_workflow.jsonc"), "--dir",
               dir_.path()});
  EXPECT_TRUE(r2.exited && r2.code == 2) << r2.Describe();
  EXPECT_FALSE(fs::exists(Wizard()));
  // A workflow file that does not exist.
  const WizqResult r3 =
      RunWizq({"wizq", "run", dir_.Join("nope.json"), "--dir", inst});
  EXPECT_TRUE(r3.exited && r3.code == 2) << r3.Describe();
  EXPECT_FALSE(fs::exists(inst));
}

TEST_F(WizqCliTest, InvalidInputExits2AndWritesNothing) {
  const std::string inst = dir_.Join("install");
  const std::string wf = DataFile("basic.jsonc");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--input", R"({"n":"three"})"}, "$.n"},  // schema violation
      {{"--input", R"({"n":3,"extra":1})"}, "extra"},
      {{"--input", "{}"}, "n"},           // required field
      {{"--input", R"({"n":)"}, "JSON"},  // not JSON
      {{"--input-file", dir_.Join("missing.json")}, "missing.json"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"wizq", "run", wf, "--dir", inst};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const WizqResult r = RunWizq(args);
    EXPECT_TRUE(r.exited && r.code == 2)
        << c.args.back() << ": " << r.Describe();
    EXPECT_TRUE(Contains(r.err, c.says)) << c.args.back() << ": " << r.err;
    EXPECT_FALSE(fs::exists(inst)) << c.args.back();
  }
  EXPECT_FALSE(fs::exists(dir_.Join("ledger"))) << "a task ran";
}

TEST_F(WizqCliTest, BadArgumentsExit2) {
  const std::string wf = DataFile("basic.jsonc");
  const std::string inst = dir_.Join("install");
  const std::vector<std::vector<std::string>> cases = {
      {"wizq"},
      {"wizq", "frobnicate"},
      {"wizq", "run"},
      {"wizq", "run", wf, "--dir", inst, "--jobs", "0"},
      {"wizq", "run", wf, "--dir", inst, "--jobs", "many"},
      {"wizq", "run", wf, "--dir", inst, "--no-such-flag"},
      {"wizq", "run", wf, "--dir", inst, "--input", "{}", "--input-file",
       dir_.Join("in.json")},
      {"wizq", "run", wf, "--dir"},
      {"wizq", "log", "--dir", inst, "--task", "-3"},
      {"wizq", "validate"},
  };
  for (const auto& args : cases) {
    std::string line;
    for (const std::string& a : args) line += a + " ";
    const WizqResult r = RunWizq(args);
    EXPECT_TRUE(r.exited && r.code == 2) << line << ": " << r.Describe();
    EXPECT_FALSE(r.err.empty()) << line << ": no message";
  }
  EXPECT_FALSE(fs::exists(inst));
}

TEST_F(WizqCliTest, VersionAndHelpWorkOnEveryCommand) {
  const std::regex version(R"(wizq \d+\.\d+\.\d+)");
  for (const std::string cmd :
       {"", "run", "status", "log", "validate", "agent"}) {
    std::vector<std::string> args = {"wizq"};
    if (!cmd.empty()) args.push_back(cmd);
    args.push_back("--version");
    const WizqResult v = RunWizq(args);
    EXPECT_TRUE(v.exited && v.code == 0)
        << "wizq " << cmd << " --version: " << v.Describe();
    EXPECT_TRUE(std::regex_search(v.out, version))
        << "wizq " << cmd << " --version printed: " << v.out;
    args.back() = "--help";
    const WizqResult h = RunWizq(args);
    EXPECT_TRUE(h.exited && h.code == 0)
        << "wizq " << cmd << " --help: " << h.Describe();
    EXPECT_TRUE(Contains(h.out, "Usage") || Contains(h.out, "usage"))
        << "wizq " << cmd << " --help printed: " << h.out;
    if (!cmd.empty()) {
      EXPECT_TRUE(Contains(h.out, cmd))
          << "wizq " << cmd << " --help: " << h.out;
    }
  }
}

TEST_F(WizqCliTest, ValidateReportsEveryFindingWithItsJsonPath) {
  const WizqResult r =
      RunWizq({"wizq", "validate", DataFile("invalid_workflow.jsonc")});
  EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
  const std::string all = r.out + r.err;
  for (const char* path :
       {"$.entrypoint", "$.options.colour", "$.options.max_retries",
        "$.steps[0].bogus", "$.steps[0].next[0]", "$.steps[1].action.kind"}) {
    EXPECT_TRUE(Contains(all, path)) << path << " missing from:\n" << all;
  }
  EXPECT_TRUE(Contains(all, "Nowhere")) << all;
  EXPECT_TRUE(Contains(all, "Telepathy")) << all;

  for (const char* good :
       {"basic.jsonc", "fanout.jsonc", "finally.jsonc", "poison.jsonc",
        "timeout.jsonc", "invalid_responses.jsonc", "sleeper.jsonc"}) {
    const WizqResult ok = RunWizq({"wizq", "validate", DataFile(good)});
    EXPECT_TRUE(ok.exited && ok.code == 0) << good << ": " << ok.Describe();
  }
  const WizqResult missing =
      RunWizq({"wizq", "validate", dir_.Join("missing.jsonc")});
  EXPECT_TRUE(missing.exited && missing.code == 2) << missing.Describe();
  EXPECT_TRUE(Contains(missing.out + missing.err, "missing.jsonc"))
      << missing.Describe();
}

// --- environment errors (exit 3) ---------------------------------------------

TEST_F(WizqCliTest, InstallDirUnderAFileExits3) {
  test::WriteAll(dir_.Join("file"), "x");
  const WizqResult r =
      RunWizq({"wizq", "run", DataFile("basic.jsonc"), "--dir",
               dir_.Join("file/install"), "--input", R"({"n":1})"});
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, dir_.Join("file"))) << r.err;
  // .wizard (with a store: .wizq-local, the local workspace) itself a file.
  const std::string inst = dir_.Join("install");
  const std::string own = test::OnPgStore() ? "/.wizq-local" : "/.wizard";
  fs::create_directory(inst);
  test::WriteAll(inst + own, "x");
  const WizqResult r2 = RunWizq({"wizq", "run", DataFile("basic.jsonc"),
                                 "--dir", inst, "--input", R"({"n":1})"});
  EXPECT_TRUE(r2.exited && r2.code == 3) << r2.Describe();
  EXPECT_TRUE(Contains(r2.err, own.substr(1))) << r2.err;
  EXPECT_EQ(ReadAll(inst + own), "x");
  EXPECT_FALSE(fs::exists(dir_.Join("ledger"))) << "a task ran";
}

TEST_F(WizqCliTest, UnwritableInstallDirExits3) {
  if (geteuid() == 0) GTEST_SKIP() << "root may write anywhere";
  const std::string inst = dir_.Join("readonly");
  fs::create_directory(inst);
  chmod(inst.c_str(), 0500);
  const WizqResult r = RunWizq({"wizq", "run", DataFile("basic.jsonc"), "--dir",
                                inst, "--input", R"({"n":1})"});
  chmod(inst.c_str(), 0700);
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_FALSE(fs::exists(inst + "/.wizard"));
}

// A different workflow on a directory whose run is alive: exit 3 naming that
// run and its pid. Then SIGTERM stops the live run (its task's process tree
// ends, the task goes back to pending, exit 130), and the other workflow may
// take the directory: the old run is archived, not deleted.
TEST_F(WizqCliTest, ForeignLiveRunExits3NamingItsRunAndPid) {
  WizqProcess a(
      {"wizq", "run", DataFile("sleeper.jsonc"), "--dir", dir_.path()});
  ASSERT_TRUE(test::WaitFor(
      [&] {
        return !test::LedgerFind(Ledger(), "start", "sleeper").empty() ||
               a.Poll();
      },
      test::seconds(20)))
      << "run A never started its task";
  ASSERT_FALSE(a.Poll()) << a.result().Describe();
  const Json st = test::StatusJson(dir_.path());
  const std::string run_a = st.value("run_id", "");
  ASSERT_FALSE(run_a.empty());
  EXPECT_EQ(st["status"], "running");

  const WizqResult b = Run("basic.jsonc", R"({"n":1})");
  EXPECT_TRUE(b.exited && b.code == 3) << b.Describe();
  EXPECT_TRUE(Contains(b.err, run_a)) << b.err;
  EXPECT_TRUE(Contains(b.err, std::to_string(a.pid()))) << b.err;
  EXPECT_EQ(test::LedgerFind(Ledger(), "start").size(), 1u) << "B ran a task";
  EXPECT_FALSE(fs::exists(Wizard("archive")));

  a.Kill(SIGTERM);
  const WizqResult& ra = a.Wait(test::seconds(20));
  EXPECT_TRUE(ra.exited && ra.code == 130) << ra.Describe();
  EXPECT_EQ(test::HeldLocks(dir_.Join("locks")), std::vector<std::string>{})
      << "the interrupted task's processes outlived wizq";
  bool put_back = false;
  for (const Json& e : test::ReadAudit(dir_.path())) {
    if (e["event"] == "task_reset") {
      put_back = true;
      EXPECT_EQ(e["reason"], "interrupted") << e.dump();
    }
  }
  EXPECT_TRUE(put_back) << "the interrupted task was not put back";

  const WizqResult b2 = Run("basic.jsonc", R"({"n":1})");
  EXPECT_TRUE(b2.exited && b2.code == 0) << b2.Describe();
  ASSERT_TRUE(fs::is_directory(Wizard("archive")));
  int archived = 0;
  for (const auto& e : fs::directory_iterator(Wizard("archive"))) {
    archived++;
    const std::vector<Json> old =
        test::ParseJsonLines(ReadAll((e.path() / "audit.jsonl").string()));
    ASSERT_FALSE(old.empty()) << e.path();
    EXPECT_EQ(old[0]["run_id"], run_a) << e.path();
  }
  EXPECT_EQ(archived, 1);
  const std::vector<Json> audit = test::ReadAudit(dir_.path());
  ASSERT_FALSE(audit.empty());
  EXPECT_EQ(audit[0]["event"], "run_started");
  bool logged = false;
  for (const Json& e : audit) logged |= e["event"] == "queue_archived";
  EXPECT_TRUE(logged) << "no queue_archived event";
}

TEST_F(WizqCliTest, QueueOfANewerFormatIsRefusedUntouched) {
  ASSERT_EQ(Run("basic.jsonc", R"({"n":1})").code, 0);
  std::string q = ReadAll(Wizard("queue.json"));
  const size_t at = q.find("\"version\":1");
  ASSERT_NE(at, std::string::npos) << q.substr(0, 200);
  q.replace(at, 11, "\"version\":7");
  test::WriteAll(Wizard("queue.json"), q);
  const std::string log = ReadAll(Wizard("audit.jsonl"));
  const WizqResult r = Run("basic.jsonc", R"({"n":1})");
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "newer")) << r.err;
  EXPECT_EQ(ReadAll(Wizard("queue.json")), q);
  EXPECT_EQ(ReadAll(Wizard("audit.jsonl")), log);
  EXPECT_FALSE(fs::exists(Wizard("archive")));
}

// A corrupt line in the middle of the log (not a torn tail) is an error
// naming the file and the offset; nothing is changed, nothing runs.
TEST_F(WizqCliTest, CorruptAuditLineIsAnErrorNamingFileAndOffset) {
  ASSERT_EQ(Run("basic.jsonc", R"({"n":2})").code, 0);
  fs::remove(Wizard("queue.json"));  // the log alone is the state
  std::string log = ReadAll(Wizard("audit.jsonl"));
  const size_t line3 = log.find("\"seq\":3,");
  ASSERT_NE(line3, std::string::npos);
  log.replace(line3, 8, "\"seq\":9,");
  test::WriteAll(Wizard("audit.jsonl"), log);
  const size_t ledger = Ledger().size();
  const WizqResult r = Run("basic.jsonc", R"({"n":2})");
  EXPECT_TRUE(r.exited && r.code == 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "audit.jsonl")) << r.err;
  EXPECT_TRUE(Contains(r.err, "offset")) << r.err;
  EXPECT_EQ(ReadAll(Wizard("audit.jsonl")), log);
  EXPECT_FALSE(fs::exists(Wizard("queue.json")));
  EXPECT_FALSE(fs::exists(Wizard("archive")));
  EXPECT_EQ(Ledger().size(), ledger);
  const WizqResult s = RunWizq({"wizq", "status", "--dir", dir_.path()});
  EXPECT_TRUE(s.exited && s.code == 3) << s.Describe();
}

// --- re-running, resuming, joining -------------------------------------------

TEST_F(WizqCliTest, CompletedRunIsNotRunAgainAndFreshStartsOver) {
  ASSERT_EQ(Run("basic.jsonc", R"({"n":2})").code, 0);
  const std::string ledger = ReadAll(dir_.Join("ledger"));
  const auto state = test::RunState(dir_.path());
  ASSERT_EQ(test::LedgerFind(Ledger(), "start").size(), 3u);

  const WizqResult again = Run("basic.jsonc", R"({"n":2})");
  EXPECT_TRUE(again.exited && again.code == 0) << again.Describe();
  EXPECT_TRUE(Contains(again.err, "already finished")) << again.err;
  EXPECT_EQ(ReadAll(dir_.Join("ledger")), ledger) << "a task ran again";
  EXPECT_EQ(test::RunState(dir_.path()), state) << "the run was written";

  // --no-reuse: without it the unchanged tasks would be reused
  // (tests/reuse_test.cc).
  const WizqResult fresh =
      Run("basic.jsonc", R"({"n":2})", {"--fresh", "--no-reuse"});
  EXPECT_TRUE(fresh.exited && fresh.code == 0) << fresh.Describe();
  EXPECT_EQ(test::LedgerFind(Ledger(), "end").size(), 6u)
      << "--fresh did not run the tasks again";
  EXPECT_EQ(test::StatusJson(dir_.path())["status"], "completed");
  if (test::OnPgStore()) {  // the archived run is the store's
    const WizqResult runs = RunWizq({"wizq", "runs", "--archived", "--json"});
    const Json list = test::ParseJsonOrNull(runs.out);
    ASSERT_TRUE(list.is_array() && list.size() == 2) << runs.Describe();
    int archived = 0;
    for (const Json& run : list) archived += run["archived"].get<bool>();
    EXPECT_EQ(archived, 1) << list.dump();
    return;
  }
  ASSERT_TRUE(fs::is_directory(Wizard("archive")));
  std::vector<fs::path> archived;
  for (const auto& e : fs::directory_iterator(Wizard("archive"))) {
    archived.push_back(e.path());
  }
  ASSERT_EQ(archived.size(), 1u);
  EXPECT_EQ(ReadAll((archived[0] / "audit.jsonl").string()),
            state.at("/audit.jsonl"));
  EXPECT_EQ(ReadAll((archived[0] / "queue.json").string()),
            state.at("/queue.json"));
}

// docs/FORMAT.md: a run set aside goes to archive/<UTC time>-<run id>/.
TEST_F(WizqCliTest, ArchiveDirectoryNamesTheFullRunId) {
  ASSERT_EQ(Run("basic.jsonc", R"({"n":0})").code, 0);
  const std::string run_id = test::StatusJson(dir_.path())["run_id"];
  ASSERT_EQ(Run("basic.jsonc", R"({"n":0})", {"--fresh"}).code, 0);
  ASSERT_TRUE(fs::is_directory(Wizard("archive")));
  for (const auto& e : fs::directory_iterator(Wizard("archive"))) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(
        name.size() > run_id.size() &&
        name.compare(name.size() - run_id.size(), run_id.size(), run_id) == 0)
        << name << " does not end with the run id " << run_id;
  }
}

// SIGKILL mid-run, run again: it resumes, says so on stderr with the
// counts, and run_finished records resumed: true.
TEST_F(WizqCliTest, ResumeAfterKillSaysSoWithCounts) {
  const test::SpawnOptions slow{
      "", {{"NAP_FLOOR_MS", "200"}, {"ITEM_NAP_MS", "200"}}};
  {
    WizqProcess p({"wizq", "run", DataFile("basic.jsonc"), "--dir", dir_.path(),
                   "--input", R"({"n":6})"},
                  slow);
    ASSERT_TRUE(test::WaitFor(
        [&] {
          return test::LedgerFind(Ledger(), "end").size() >= 2 || p.Poll();
        },
        test::seconds(20)));
    ASSERT_FALSE(p.Poll()) << "finished before the kill: "
                           << p.result().Describe();
    p.Kill(SIGKILL);
    p.Wait();
  }
  const WizqResult r = Run("basic.jsonc", R"({"n":6})", {}, slow);
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  std::smatch m;
  const std::regex resumed(
      R"(resum\w* run \S+: (\d+) pending(?: \([^)]*\))?, (\d+) done)");
  ASSERT_TRUE(std::regex_search(r.err, m, resumed)) << r.err;
  EXPECT_GE(std::stoi(m[2]), 1) << "the root was done";
  EXPECT_EQ(std::stoi(m[1]) + std::stoi(m[2]) <= 7, true) << m[0];

  const std::vector<Json> audit = test::ReadAudit(dir_.path());
  int resumes = 0;
  Json finished;
  for (const Json& e : audit) {
    if (e["event"] == "run_resumed") {
      resumes++;
      EXPECT_EQ(e["tasks_done"], std::stoi(m[2])) << e.dump();
      EXPECT_EQ(e["tasks_pending"], std::stoi(m[1])) << e.dump();
      EXPECT_TRUE(e.contains("tasks_reset")) << e.dump();
    }
    if (e["event"] == "run_finished") finished = e;
  }
  EXPECT_EQ(resumes, 1);
  ASSERT_TRUE(finished.is_object());
  EXPECT_EQ(finished["resumed"], true) << finished.dump();
  EXPECT_EQ(finished["status"], "completed");
  EXPECT_EQ(test::StatusJson(dir_.path())["counts"]["done"], 7);
}

// A second `wizq run` of the same run while the first is alive joins it:
// both exit 0 and every task ran once.
TEST_F(WizqCliTest, SecondProcessJoinsALiveRun) {
  const test::SpawnOptions slow{
      "", {{"NAP_FLOOR_MS", "200"}, {"ITEM_NAP_MS", "200"}}};
  const std::vector<std::string> cmd = {
      "wizq",        "run",       DataFile("basic.jsonc"),
      "--dir",       dir_.path(), "--input",
      R"({"n":10})", "--jobs",    "2"};
  WizqProcess first(cmd, slow);
  ASSERT_TRUE(test::WaitFor(
      [&] {
        return !test::LedgerFind(Ledger(), "end", "root").empty() ||
               first.Poll();
      },
      test::seconds(20)));
  WizqProcess second(cmd, slow);
  const WizqResult& r1 = first.Wait();
  const WizqResult& r2 = second.Wait();
  EXPECT_TRUE(r1.exited && r1.code == 0) << r1.Describe();
  EXPECT_TRUE(r2.exited && r2.code == 0) << r2.Describe();
  EXPECT_TRUE(Contains(r2.err, "joined")) << r2.err;

  const std::vector<LedgerLine> ledger = Ledger();
  std::set<std::string> roles;
  for (const LedgerLine& l : test::LedgerFind(ledger, "start")) {
    EXPECT_TRUE(roles.insert(l.role).second) << l.role << " ran twice";
  }
  EXPECT_EQ(roles.size(), 11u);
  std::set<int64_t> pids;
  for (const Json& e : test::ReadAudit(dir_.path())) {
    EXPECT_NE(e["event"], "task_reset") << e.dump();
    if (e["event"] == "worker_joined") pids.insert(e["pid"].get<int64_t>());
  }
  EXPECT_EQ(pids, (std::set<int64_t>{first.pid(), second.pid()}));
  EXPECT_EQ(test::StatusJson(dir_.path())["counts"]["done"], 11);
}

// A torn last line (a crash mid-append) is set aside and the run resumes.
TEST_F(WizqCliTest, TornAuditTailIsSetAsideAndTheRunResumes) {
  {
    WizqProcess p({"wizq", "run", DataFile("basic.jsonc"), "--dir", dir_.path(),
                   "--input", R"({"n":4})"},
                  {"", {{"NAP_FLOOR_MS", "300"}}});
    ASSERT_TRUE(test::WaitFor(
        [&] { return !test::LedgerFind(Ledger(), "end").empty() || p.Poll(); },
        test::seconds(20)));
    p.Kill(SIGKILL);
    p.Wait();
  }
  const std::string torn = R"({"seq":99999,"ts":1,"event":"task_compl)";
  {
    std::string log = ReadAll(Wizard("audit.jsonl"));
    test::WriteAll(Wizard("audit.jsonl"), log + torn);
  }
  // Reading is not recovering: status and log change nothing.
  const std::string before = ReadAll(Wizard("audit.jsonl"));
  const WizqResult s = RunWizq({"wizq", "status", "--dir", dir_.path()});
  EXPECT_TRUE(s.exited && s.code == 0) << s.Describe();
  const WizqResult l = RunWizq({"wizq", "log", "--dir", dir_.path()});
  EXPECT_TRUE(l.exited && l.code == 0) << l.Describe();
  EXPECT_EQ(ReadAll(Wizard("audit.jsonl")), before);

  const WizqResult r = Run("basic.jsonc", R"({"n":4})");
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "torn")) << r.err;
  int aside = 0;
  for (const auto& e : fs::directory_iterator(Wizard())) {
    const std::string name = e.path().filename().string();
    if (name.rfind("audit.torn-", 0) == 0) {
      aside++;
      EXPECT_EQ(ReadAll(e.path().string()), torn);
    }
  }
  EXPECT_EQ(aside, 1);
  for (const Json& e : test::ReadAudit(dir_.path())) {
    EXPECT_FALSE(e.is_discarded());
  }
  EXPECT_EQ(test::StatusJson(dir_.path())["counts"]["done"], 5);
}

// --- output ------------------------------------------------------------------

TEST_F(WizqCliTest, JsonPrintsNdjsonEventsOnStdout) {
  const WizqResult r = Run("basic.jsonc", R"({"n":2})", {"--json"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  std::multiset<std::string> events;
  const std::vector<std::string> lines = test::SplitLines(r.out);
  ASSERT_FALSE(lines.empty());
  for (const std::string& line : lines) {
    const Json j = test::ParseJsonOrNull(line);
    ASSERT_TRUE(j.is_object()) << "not a JSON object: " << line;
    ASSERT_TRUE(j.contains("event") && j["event"].is_string()) << line;
    events.insert(j["event"].get<std::string>());
    if (j["event"] == "run_finished") {
      EXPECT_EQ(j["status"], "completed") << line;
    }
  }
  EXPECT_EQ(events.count("run_opened"), 1u) << r.out;
  EXPECT_EQ(events.count("task_started"), 3u) << r.out;
  EXPECT_EQ(events.count("task_finished"), 3u) << r.out;
  EXPECT_EQ(events.count("run_finished"), 1u) << r.out;
}

TEST_F(WizqCliTest, QuietPrintsNothingForASuccessfulRun) {
  const WizqResult r = Run("basic.jsonc", R"({"n":2})", {"--quiet"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "");
  // Without --quiet it does report progress.
  const WizqResult loud = Run("basic.jsonc", R"({"n":2})", {"--fresh"});
  ASSERT_TRUE(loud.exited && loud.code == 0) << loud.Describe();
  EXPECT_FALSE(loud.err.empty());
}

TEST_F(WizqCliTest, StatusAndLogShowTheRun) {
  ASSERT_EQ(Run("basic.jsonc", R"({"n":2})").code, 0);
  const Json st = test::StatusJson(dir_.path());
  const WizqResult text = RunWizq({"wizq", "status", "--dir", dir_.path()});
  EXPECT_TRUE(text.exited && text.code == 0) << text.Describe();
  EXPECT_TRUE(Contains(text.out, st["run_id"].get<std::string>())) << text.out;
  EXPECT_TRUE(Contains(text.out, "completed")) << text.out;

  const WizqResult log = RunWizq({"wizq", "log", "--dir", dir_.path()});
  EXPECT_TRUE(log.exited && log.code == 0) << log.Describe();
  for (const char* ev :
       {"run_started", "task_claimed", "task_completed", "run_finished"}) {
    EXPECT_TRUE(Contains(log.out, ev)) << ev << " missing:\n" << log.out;
  }
  const WizqResult one =
      RunWizq({"wizq", "log", "--dir", dir_.path(), "--task", "2", "--json"});
  EXPECT_TRUE(one.exited && one.code == 0) << one.Describe();
  const std::vector<Json> events = test::ParseJsonLines(one.out);
  EXPECT_GE(events.size(), 3u) << one.out;  // submitted, claimed, completed
  for (const Json& e : events) {
    ASSERT_TRUE(e.is_object()) << one.out;
    EXPECT_TRUE(e.value("id", 0) == 2 || e.value("existing_id", 0) == 2)
        << e.dump();
  }
  // No run in a directory: an error, not an empty report.
  ScratchDir empty;
  test::StartOver(empty.path());  // with a store: the store emptied
  const WizqResult none = RunWizq({"wizq", "status", "--dir", empty.path()});
  EXPECT_TRUE(none.exited && none.code != 0) << none.Describe();
  EXPECT_FALSE(fs::exists(empty.path() + "/.wizard"));
}

// `wizq status` prints the first 50 lines of the tree (read in statements
// that do not grow with the run: views/status_bounded.cc), says how many
// more there are, and lists the failed tasks; --all prints all of it.
TEST_F(WizqCliTest, StatusPrintsTheTreesFirst50LinesAndAllWithAll) {
  const std::string wf = dir_.Join("tree.json");
  test::WriteAll(wf, R"({ "entrypoint": "Root", "steps": [
    { "name": "Root", "action": { "kind": "Command", "script": "jq -c '[range(30) | {kind: \"Mid\", value: {m: .}}]'" }, "next": ["Mid"] },
    { "name": "Mid", "action": { "kind": "Command", "script": "jq -c '.value.m as $m | if $m == 25 then error(\"no\") else [range(3) | {kind: \"Leaf\", value: {m: $m, i: .}}] end'" }, "next": ["Leaf"] },
    { "name": "Leaf", "action": { "kind": "Command", "script": "echo '[]'" }, "next": [] } ] })");
  const std::string inst = dir_.Join("tree");
  const WizqResult r = RunWizq({"wizq", "run", wf, "--dir", inst, "-j", "4"});
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();  // Mid 25 failed
  const WizqResult some = RunWizq({"wizq", "status", "--dir", inst});
  const WizqResult all = RunWizq({"wizq", "status", "--dir", inst, "--all"});
  ASSERT_EQ(some.code, 0) << some.Describe();
  ASSERT_EQ(all.code, 0) << all.Describe();
  // 1 Root + 30 Mids + 29 * 3 Leaves = 118 tasks, one line each.
  const std::vector<std::string> a = test::SplitLines(all.out);
  const std::vector<std::string> b = test::SplitLines(some.out);
  size_t tree = 0;  // the first line of the tree
  while (tree < a.size() && a[tree].rfind("#1 Root", 0) != 0) tree++;
  ASSERT_EQ(a.size(), tree + 118) << all.out;
  ASSERT_GE(b.size(), tree + 51) << some.out;
  for (size_t i = 0; i < tree + 50; i++) EXPECT_EQ(b[i], a[i]) << i;
  EXPECT_EQ(b[tree + 50], "... and 68 more task(s): wizq status --all");
  EXPECT_TRUE(Contains(some.out, "\nfailed:\n  #27 Mid {\"m\":25}  failed"))
      << some.out;
}

}  // namespace
}  // namespace wizq::cli_test
