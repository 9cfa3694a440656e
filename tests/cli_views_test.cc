// What a person reads about a run, through the real `wizq` binary (issue
// 21, items 12 and 13): `log --table`, `status` and `report` keep two long
// values with a common prefix apart; the report opens with the failures,
// greys a done task's earlier error, tells failed from lost attempts and
// gives each agent a lane; `export` reads a copy without writing; `status`
// of an embedded run names the program, of an archived unfinished run says
// `unfinished`; `validate` refuses a NUL in a script; the report file has
// the umask's mode; a Barnum import does not count Barnum's tasks as ran.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
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
using test::Json;
using test::RunWizq;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

// Two values that differ only in their last characters, after a prefix
// longer than any view's column.
const char kPrefix[] =
    "/srv/data/projects/installer/assets/images/large/thumbnails/generated/"
    "2026/november/batch";

class CliViewsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  void TearDown() override { test::ReapStrays(); }

  std::string Write(const std::string& name, const std::string& text) {
    test::WriteAll(work_.Join(name), text);
    return work_.Join(name);
  }
  WizqResult Wizq(std::vector<std::string> args) {
    args.insert(args.begin(), "wizq");
    return RunWizq(args);
  }
  // `wizq report` of `dir` (or of an archived run), the page.
  std::string Report(const std::string& dir, const std::string& archived = "") {
    std::vector<std::string> args = {"report", "--dir", dir, "-o", "-"};
    if (!archived.empty()) args.insert(args.end(), {"--archived", archived});
    const WizqResult r = Wizq(args);
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
    return r.out;
  }
  // The lines of `text` that contain `part`.
  static std::vector<std::string> LinesWith(const std::string& text,
                                            const std::string& part) {
    std::vector<std::string> out;
    for (const std::string& l : test::SplitLines(text)) {
      if (Contains(l, part)) out.push_back(l);
    }
    return out;
  }
  std::string EventsReport(int64_t* bad, int64_t* flaky);
  // The first `<tag ...>` of `html` with `attr`, up to its text's end.
  static std::string Element(const std::string& html, const std::string& attr,
                             const std::string& end) {
    const size_t at = html.find(attr);
    if (at == std::string::npos) return "";
    return html.substr(at, html.find(end, at) - at);
  }

  ScratchDir dir_;   // the install directory
  ScratchDir work_;  // workflows
};

// Root spawns two Items whose values share kPrefix.
std::string TwoLongValues() {
  const std::string item = R"({\"kind\":\"Item\",\"value\":{\"path\":\")" +
                           std::string(kPrefix) + "/file-";
  return R"({"entrypoint": "Root", "steps": [
    {"name": "Root", "next": ["Item"], "action": {"kind": "Command",
     "script": "echo '[)" +
         item + R"(a.txt\"}},)" + item + R"(b.txt\"}}]'"}},
    {"name": "Item", "next": [],
     "action": {"kind": "Command", "script": "echo '[]'"}}]})";
}

TEST_F(CliViewsTest, LogTableStatusAndReportKeepLongValuesApart) {
  const WizqResult run =
      Wizq({"run", Write("wf.json", TwoLongValues()), "--dir", dir_.path()});
  ASSERT_TRUE(run.exited && run.code == 0) << run.Describe();
  // Each view names the task of file-a and the one of file-b apart: their
  // rows differ where the values do (the end), not only in the task id.
  const WizqResult table = Wizq({"log", "--table", "--dir", dir_.path()});
  ASSERT_EQ(table.code, 0) << table.Describe();
  const WizqResult status = Wizq({"status", "--dir", dir_.path()});
  ASSERT_EQ(status.code, 0) << status.Describe();
  for (const std::string& out : {table.out, status.out}) {
    std::vector<std::string> rows = LinesWith(out, " Item ");
    ASSERT_EQ(rows.size(), 2u) << out;
    EXPECT_TRUE(Contains(rows[0], "a.txt")) << out;
    EXPECT_TRUE(Contains(rows[1], "b.txt")) << out;
    // Cut in the middle: the value's start stays too.
    EXPECT_TRUE(Contains(rows[0], "{\"path\":\"/s")) << out;
  }
  const std::string page = Report(dir_.path());
  for (const char* id : {"2", "3"}) {
    const std::string li = Element(
        page, std::string("data-task-id=\"") + id + "\" data-state", "</li>");
    const std::string file = id == std::string("2") ? "file-a" : "file-b";
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        li, m, std::regex("<span class=\"val\" title=\"([^\"]*)\">([^<]*)<")))
        << li;
    EXPECT_TRUE(Contains(m[1], std::string(kPrefix) + "/" + file)) << li;
    EXPECT_TRUE(Contains(m[2], file.substr(4) + ".txt")) << li;  // "-a.txt"
  }
}

// The first attempt of task Flaky fails, then it succeeds; task Bad fails
// for good, printing "bad" on stderr (tests/data/json/events.jsonc). Runs
// it and returns the report; *bad and *flaky get their ids.
std::string CliViewsTest::EventsReport(int64_t* bad, int64_t* flaky) {
  const WizqResult run = Wizq({"run", test::DataFile("../json/events.jsonc"),
                               "--dir", dir_.path(), "--quiet"});
  EXPECT_TRUE(run.exited && run.code == 1) << run.Describe();
  const Json st = test::StatusJson(dir_.path());
  for (const Json& t : st["tasks"]) {
    if (t["type"] == "Bad") *bad = t["id"];
    if (t["type"] == "Flaky") *flaky = t["id"];
  }
  EXPECT_TRUE(*bad != 0 && *flaky != 0) << st.dump();
  return Report(dir_.path());
}

// What a person opens the page for comes first: the failed task, with its
// reason, its stderr and that file.
TEST_F(CliViewsTest, ReportOpensWithAFailuresSection) {
  int64_t bad = 0, flaky = 0;
  const std::string page = EventsReport(&bad, &flaky);
  const size_t failures = page.find("<section id=\"failures\">");
  ASSERT_NE(failures, std::string::npos) << page;
  EXPECT_LT(failures, page.find("<h2>Timeline")) << "the failures come first";
  const std::string section =
      page.substr(failures, page.find("</section>", failures) - failures);
  EXPECT_TRUE(Contains(section, "1 task(s) failed")) << section;
  EXPECT_TRUE(Contains(section, "href=\"#task-" + std::to_string(bad)))
      << section;
  EXPECT_TRUE(Contains(page, "id=\"task-" + std::to_string(bad) + "\""));
  EXPECT_TRUE(Contains(section, "exit_code: exit code 1")) << section;
  EXPECT_TRUE(Contains(section, "<pre>bad\n</pre>")) << section;
  EXPECT_TRUE(Contains(section, "stderr: " + dir_.path() + "/.wizard/tasks/" +
                                    std::to_string(bad) + ".1.stderr"))
      << section;
  EXPECT_FALSE(Contains(section, "Flaky")) << section;  // done in the end
}

// A done task's error is an earlier attempt's: kept, in grey, not red.
TEST_F(CliViewsTest, ReportShowsADoneTasksEarlierErrorInGrey) {
  int64_t bad = 0, flaky = 0;
  const std::string page = EventsReport(&bad, &flaky);
  const std::string li =
      Element(page, "data-task-id=\"" + std::to_string(flaky) + "\" data-state",
              "</li>");
  EXPECT_TRUE(Contains(li, "data-state=\"done\"")) << li;
  EXPECT_TRUE(Contains(li, "<span class=\"old-err\"")) << li;
  EXPECT_TRUE(Contains(li, "earlier: exit_code: exit code 3")) << li;
  EXPECT_FALSE(Contains(li, "class=\"err\"")) << li;
  EXPECT_TRUE(Contains(page, ".old-err{color:#8c959f}")) << "grey";
  // The failed task's error stays red.
  const std::string failed = Element(
      page, "data-task-id=\"" + std::to_string(bad) + "\" data-state", "</li>");
  EXPECT_TRUE(Contains(failed, "<span class=\"err\">exit_code")) << failed;
}

// Failed and lost attempts in colours far apart (not two reds), the same in
// the legend as on the bars.
TEST_F(CliViewsTest, ReportColoursFailedAndLostAttemptsApart) {
  int64_t bad = 0, flaky = 0;
  const std::string page = EventsReport(&bad, &flaky);
  auto fill = [&](const std::string& cls) -> std::vector<int> {
    std::smatch m;
    const std::regex re("rect\\.attempt\\." + cls +
                        "\\{fill:#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})\\}");
    if (!std::regex_search(page, m, re)) return {};
    return {std::stoi(m[1], nullptr, 16), std::stoi(m[2], nullptr, 16),
            std::stoi(m[3], nullptr, 16)};
  };
  const std::vector<int> failed = fill("failed"), lost = fill("lost");
  ASSERT_EQ(failed.size(), 3u);
  ASSERT_EQ(lost.size(), 3u);
  double d = 0;
  for (int i = 0; i < 3; i++) d += std::pow(failed[i] - lost[i], 2);
  EXPECT_GT(std::sqrt(d), 150) << "failed and lost look alike";
  for (const auto& [rgb, label] : std::map<std::vector<int>, std::string>{
           {failed, "failed"}, {lost, "lost with its worker"}}) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
    EXPECT_TRUE(
        Contains(page, std::string("background:") + hex + "\"></i>" + label))
        << "the legend's colour for " << label;
  }
}

TEST_F(CliViewsTest, ReportGivesEachAgentItsOwnLane) {
  const std::string wf = Write("wf.json", R"({"entrypoint": "Root", "steps": [
    {"name": "Root", "next": ["Review"], "action": {"kind": "Command",
     "script": "echo '[{\"kind\":\"Review\",\"value\":{\"n\":1}},{\"kind\":\"Review\",\"value\":{\"n\":2}}]'"}},
    {"name": "Review", "next": [],
     "action": {"kind": "Pool", "instructions": "Look."}}]})");
  WizqProcess run({"wizq", "run", wf, "--dir", dir_.path(), "--quiet"});
  ASSERT_TRUE(test::WaitFor(
      [&] { return fs::exists(dir_.Join(".wizard/audit.jsonl")); },
      test::seconds(30)));
  std::map<std::string, int64_t> took;  // agent -> task
  for (const char* agent : {"alice", "bob"}) {
    WizqResult r = Wizq({"agent", "take", "--dir", dir_.path(), "--agent",
                         agent, "--wait", "30"});
    ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
    const Json p = Json::parse(r.out);
    took[agent] = p["task_id"];
    r = Wizq({"agent", "done", "--dir", dir_.path(), "--task",
              std::to_string(took[agent]), "--lease", p["lease"], "--response",
              "[]"});
    ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  }
  const WizqResult& done = run.Wait();
  ASSERT_TRUE(done.exited && done.code == 0) << done.Describe();
  const std::string page = Report(dir_.path());
  for (const auto& [agent, task] : took) {
    const std::string lane =
        Element(page, "<g class=\"lane\" data-worker=\"lease:" + agent + "\">",
                "</g>\n");
    ASSERT_FALSE(lane.empty()) << agent << " has no lane:\n" << page;
    EXPECT_TRUE(Contains(lane, ">agent " + agent + "</text>")) << lane;
    // Its attempt, and only its.
    for (const auto& [who, id] : took) {
      EXPECT_EQ(Contains(lane,
                         "<rect class=\"attempt completed\" "
                         "data-task-id=\"" +
                             std::to_string(id) + "\""),
                who == agent)
          << lane;
    }
  }
}

// Like `wizq status`: a copy without its lock file, and a read-only mount,
// are exported without a byte written.
TEST_F(CliViewsTest, ExportReadsACopyAndAReadOnlyMountWithoutWriting) {
  const WizqResult run =
      Wizq({"run", test::DataFile("basic.jsonc"), "--dir", dir_.path(),
            "--input", R"({"n":3})", "--quiet"});
  ASSERT_TRUE(run.exited && run.code == 0) << run.Describe();
  const WizqResult want =
      Wizq({"export", "--dir", dir_.path(), "--format", "barnum"});
  ASSERT_TRUE(want.exited && want.code == 0) << want.Describe();
  ASSERT_FALSE(want.out.empty());

  ScratchDir copy;
  fs::copy(dir_.path() + "/.wizard", copy.path() + "/.wizard",
           fs::copy_options::recursive);
  fs::remove(copy.path() + "/.wizard/lock");
  const WizqResult got =
      Wizq({"export", "--dir", copy.path(), "--format", "barnum"});
  ASSERT_TRUE(got.exited && got.code == 0) << got.Describe();
  EXPECT_EQ(got.out, want.out);
  EXPECT_FALSE(fs::exists(copy.path() + "/.wizard/lock"))
      << "export created the lock file in the copy";

  ScratchDir mnt;
  const std::string script = "mount --bind -o ro " + dir_.path() + " " +
                             mnt.path() + " || exit 99; exec " +
                             test::WizqPath() +
                             " export --format barnum --dir " + mnt.path();
  WizqResult ro = RunWizq({"/usr/bin/unshare", "-m", "/bin/sh", "-c", script});
  if (ro.exited && ro.code == 99) {
    ro = RunWizq({"/usr/bin/unshare", "-rm", "/bin/sh", "-c", script});
  }
  if (ro.exited && ro.code == 99) {
    GTEST_SKIP() << "cannot make a read-only mount here: " << ro.Describe();
  }
  ASSERT_TRUE(ro.exited && ro.code == 0) << ro.Describe();
  EXPECT_EQ(ro.out, want.out);
}

// A run with Function steps is resumed by the program that embeds wizq,
// never by `wizq run`: status says so instead of a command that fails.
TEST_F(CliViewsTest, StatusOfAnInterruptedEmbeddedRunNamesTheProgram) {
  // Its only task SIGKILLs the program (tests/helpers/embed_worker.cc).
  const WizqResult killed =
      RunWizq({test::BuildDir() + "/embed_worker", "--dir", dir_.path(),
               "--ledger", work_.Join("ledger"), "--mode", "suicide"});
  ASSERT_TRUE(!killed.exited && killed.signal == SIGKILL) << killed.Describe();
  const WizqResult st = Wizq({"status", "--dir", dir_.path()});
  ASSERT_TRUE(st.exited && st.code == 0) << st.Describe();
  EXPECT_EQ(st.out.rfind("interrupted:", 0), 0u) << st.out;
  EXPECT_TRUE(Contains(st.out, "only the program that embeds wizq")) << st.out;
  EXPECT_FALSE(Contains(st.out, "wizq run WORKFLOW")) << st.out;
  const Json j = test::StatusJson(dir_.path());
  EXPECT_EQ(j["live_status"], "interrupted");
  EXPECT_EQ(j["embedded"], true);
  EXPECT_FALSE(j.contains("resume_command")) << j.dump();
}

// An archived run that had not finished is `unfinished` (nothing runs it,
// nothing resumes it), never `running`.
TEST_F(CliViewsTest, ArchivedUnfinishedRunIsNotCalledRunning) {
  const std::string wf = Write("wf.json", R"({"entrypoint": "Slow", "steps": [
    {"name": "Slow", "next": [], "action": {"kind": "Command",
     "script": "[ -e \"$WIZQ_INSTALL_DIR/slow\" ] && sleep 30; echo '[]'"}}]})");
  test::WriteAll(dir_.Join("slow"), "");
  WizqProcess p({"wizq", "run", wf, "--dir", dir_.path(), "--quiet"});
  ASSERT_TRUE(test::WaitFor(
      [&] {
        return Contains(test::ReadAll(dir_.Join(".wizard/audit.jsonl")),
                        "\"task_claimed\"");
      },
      test::seconds(30)));
  p.Kill(SIGKILL);
  p.Wait(test::seconds(10));
  for (long pgid : test::AttemptGroups(dir_.path())) {
    kill(-static_cast<pid_t>(pgid), SIGKILL);
  }
  fs::remove(dir_.Join("slow"));
  const WizqResult fresh =
      Wizq({"run", wf, "--dir", dir_.path(), "--fresh", "--quiet"});
  ASSERT_TRUE(fresh.exited && fresh.code == 0) << fresh.Describe();

  const WizqResult list = Wizq({"status", "--dir", dir_.path(), "--archived"});
  ASSERT_TRUE(list.exited && list.code == 0) << list.Describe();
  const std::vector<std::string> rows = LinesWith(list.out, "  run ");
  ASSERT_EQ(rows.size(), 1u) << list.out;
  EXPECT_TRUE(Contains(rows[0], "  unfinished  ")) << list.out;
  EXPECT_FALSE(Contains(rows[0], "running")) << list.out;
  const std::string name = rows[0].substr(2, rows[0].find("  run ") - 2);
  const WizqResult json =
      Wizq({"status", "--dir", dir_.path(), "--archived", "--json"});
  const Json arr = Json::parse(json.out);
  ASSERT_EQ(arr.size(), 1u) << json.out;
  EXPECT_EQ(arr[0]["status"], "running");  // as recorded
  EXPECT_EQ(arr[0]["live_status"], "unfinished");

  const WizqResult one =
      Wizq({"status", "--dir", dir_.path(), "--archived", name});
  ASSERT_TRUE(one.exited && one.code == 0) << one.Describe();
  EXPECT_EQ(one.out.rfind("unfinished:", 0), 0u) << one.out;
  const WizqResult one_json =
      Wizq({"status", "--dir", dir_.path(), "--archived", name, "--json"});
  EXPECT_EQ(Json::parse(one_json.out)["live_status"], "unfinished");
  EXPECT_TRUE(Contains(Report(dir_.path(), name),
                       "class=\"st-unfinished\">unfinished</b>"));
}

TEST_F(CliViewsTest, ValidateAndRunRefuseANulInAScript) {
  for (const char* where : {"action", "finally"}) {
    SCOPED_TRACE(where);
    const std::string nul =
        R"({"kind": "Command", "script": "echo []\u0000rm -rf x"})";
    const std::string ok = R"({"kind": "Command", "script": "echo []"})";
    const bool hook = where == std::string("finally");
    const std::string wf = Write(
        "wf.json", R"({"entrypoint": "A", "steps": [{"name": "A", "next": [],
          "action": )" +
                       (hook ? ok : nul) + R"(, "finally": )" +
                       (hook ? nul : ok) + "}]}");
    const std::string field =
        std::string("$.steps[0].") + (hook ? "finally" : "action") + ".script";
    WizqResult r = Wizq({"validate", wf});
    EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
    EXPECT_TRUE(Contains(r.out + r.err, field)) << r.Describe();
    EXPECT_TRUE(Contains(r.out + r.err, "NUL character")) << r.Describe();
    r = Wizq({"run", wf, "--dir", dir_.path()});
    EXPECT_TRUE(r.exited && r.code == 2) << r.Describe();
    EXPECT_FALSE(fs::exists(dir_.Join(".wizard"))) << "a run was written";
  }
}

// The page is the user's file: mode 0666 less the umask, as any tool's.
TEST_F(CliViewsTest, ReportFileHasTheUmasksMode) {
  const WizqResult run =
      Wizq({"run", test::DataFile("basic.jsonc"), "--dir", dir_.path(),
            "--input", R"({"n":3})", "--quiet"});
  ASSERT_TRUE(run.exited && run.code == 0) << run.Describe();
  for (const auto& [umask, mode] :
       std::map<std::string, int>{{"022", 0644}, {"027", 0640}}) {
    const std::string out = work_.Join("report-" + umask + ".html");
    const WizqResult r =
        RunWizq({"/bin/sh", "-c",
                 "umask " + umask + "; exec " + test::WizqPath() +
                     " report --dir " + dir_.path() + " -o " + out});
    ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
    struct stat s;
    ASSERT_EQ(stat(out.c_str(), &s), 0);
    EXPECT_EQ(s.st_mode & 0777, mode) << "umask " << umask;
  }
}

// Barnum's fan-out example continued (tests/data/barnum): ListFiles and
// file-a were done by Barnum; wizq runs file-b, file-c and the hook.
TEST_F(CliViewsTest, BarnumImportDoesNotCountBarnumsTasksAsRan) {
  test::SpawnOptions in_data;
  in_data.cwd = test::SourceDir() + "/tests/data/barnum";
  const WizqResult r = RunWizq(
      {"wizq", "run", "--resume-from", in_data.cwd + "/fanout.v2.ndjson",
       "--dir", dir_.path(), "--json"},
      in_data);
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "5 done, 0 running, 0 pending, 0 failed"))
      << r.err;
  EXPECT_TRUE(
      Contains(r.err, "; 0 reused, 3 ran, 2 finished before the import"))
      << r.err;
  Json finished;
  for (const Json& e : test::ParseJsonLines(r.out)) {
    if (e["event"] == "run_finished") finished = e;
  }
  EXPECT_EQ(finished["live"], 3) << r.out;
  EXPECT_EQ(finished["imported"], 2) << r.out;
  std::set<int64_t> barnums;  // the tasks of the attempts Barnum made
  for (const Json& e : test::ReadAudit(dir_.path())) {
    if (e["event"] == "task_claimed" && e["worker"] == "import") {
      barnums.insert(e["id"].get<int64_t>());
    }
    if (e["event"] != "run_finished") continue;
    EXPECT_EQ(e["tasks_live"], 3) << e.dump();
    EXPECT_EQ(e["tasks_imported"], 2) << e.dump();
  }
  EXPECT_EQ(barnums.size(), 2u);
}

}  // namespace
}  // namespace wizq
