// Tests of the `wizq` command as users and scripts see it (SPEC §2, §3, §5,
// §7): the real binary runs the workflows of tests/data/cli/, whose tasks
// record what they do in a ledger (tests/data/cli/lib.sh); the tests check
// exit codes, output, `.wizard/` and the ledger.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Contains;
using test::DataFile;
using test::Json;
using test::LedgerLine;
using test::ReadAll;
using test::RunWizq;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

constexpr size_t kNone = SIZE_MAX;

class WizqCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }

  // `wizq run WORKFLOW --dir <scratch> [--input INPUT] [extra...]`.
  WizqResult Run(const std::string& workflow, const std::string& input,
                 std::vector<std::string> extra = {},
                 const test::SpawnOptions& opts = {}) {
    std::vector<std::string> args = {"wizq", "run", DataFile(workflow), "--dir",
                                     dir_.path()};
    if (!input.empty()) {
      args.push_back("--input");
      args.push_back(input);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return RunWizq(args, opts);
  }
  std::vector<LedgerLine> Ledger() const {
    return test::ReadLedger(dir_.path());
  }
  std::string Wizard(const std::string& name = "") const {
    return dir_.path() + "/.wizard" + (name.empty() ? "" : "/" + name);
  }

  ScratchDir dir_;
};

// Index of the first (or last) ledger line of `kind` and `role`; kNone,
// with a test failure, if there is none.
size_t First(const std::vector<LedgerLine>& ledger, const std::string& kind,
             const std::string& role) {
  for (const LedgerLine& l : ledger) {
    if (l.kind == kind && l.role == role) return l.index;
  }
  ADD_FAILURE() << "no '" << kind << "' line for " << role << " in the ledger";
  return kNone;
}
size_t Last(const std::vector<LedgerLine>& ledger, const std::string& kind,
            const std::string& role) {
  size_t found = kNone;
  for (const LedgerLine& l : ledger) {
    if (l.kind == kind && l.role == role) found = l.index;
  }
  if (found == kNone) {
    ADD_FAILURE() << "no '" << kind << "' line for " << role
                  << " in the ledger";
  }
  return found;
}

// The one task of `type` in a status document that is (or is not) a
// finally hook; null, with a test failure, if there is not exactly one.
Json OneTask(const Json& st, const std::string& type, bool hook = false) {
  std::vector<Json> found;
  for (const Json& t : test::FindTasks(st, type)) {
    if ((t["origin"] == "Finally") == hook) found.push_back(t);
  }
  if (found.size() != 1) {
    ADD_FAILURE() << found.size() << " tasks of type " << type
                  << (hook ? " (finally)" : "") << " in " << st.dump();
    return Json();
  }
  return found[0];
}

// seq of the first audit event `event` about task `id` (0 if none).
int64_t SeqOf(const std::vector<Json>& audit, const std::string& event,
              int64_t id) {
  for (const Json& e : audit) {
    if (e["event"] == event && e.value("id", int64_t{0}) == id) {
      return e["seq"];
    }
  }
  return 0;
}

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

// --- the task protocol
// ---------------------------------------------------------

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
}  // namespace wizq
