// The read-only views of a run, through the real `wizq` binary: `wizq
// status` tells whether a worker lives and calls a killed run interrupted
// (and its resume command works), reads a read-only mount and a copy without
// writing, filters, lists archived runs; `wizq log --table` has a row per
// attempt; `wizq report` renders in headless Chromium with every task and
// the crash markers where the audit log puts them; `wizq prune` keeps the
// failed task's files.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "fs/env.h"
#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Contains;
using test::DataFile;
using test::Json;
using test::kWizqDeadline;
using test::RunWizq;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

class StatusReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }

  WizqResult Wizq(std::vector<std::string> args,
                  const test::SpawnOptions& opts = {}) {
    args.insert(args.begin(), "wizq");
    return RunWizq(args, opts);
  }

  // Runs `workflow` again and again until it exits by itself; returns how
  // many times it was SIGKILLed (by its own Crash or Poison task).
  int RunUntilExit(const std::string& workflow, WizqResult* last) {
    int killed = 0;
    for (int i = 0; i < 10; i++) {
      *last = RunWizq(
          {"wizq", "run", DataFile(workflow), "--dir", dir_.path(), "-q"});
      if (last->timed_out || last->exited) break;
      EXPECT_EQ(last->signal, SIGKILL) << last->Describe();
      killed++;
    }
    return killed;
  }

  // Every file and directory under `root`, with its size.
  static std::map<std::string, uintmax_t> Listing(const std::string& root) {
    std::map<std::string, uintmax_t> out;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      out[e.path().string()] = e.is_regular_file() ? e.file_size() : 0;
    }
    return out;
  }

  // The worker each worker_lost event names, with the first such event.
  std::map<std::string, int64_t> LostWorkers() {
    std::map<std::string, int64_t> lost;
    for (const Json& e : test::ReadAudit(dir_.path())) {
      if ((e["event"] == "task_reset" || e["event"] == "task_failed") &&
          e.value("reason", "") == "worker_lost") {
        const std::string w = e["worker"];
        if (!lost.count(w)) lost[w] = e["seq"].get<int64_t>();
      }
    }
    return lost;
  }

  ScratchDir dir_;
};

// While wizq runs, status names its pid; after kill -9, no worker lives and
// the unfinished run is `interrupted`, with a resume command that works.
TEST_F(StatusReportTest, KilledRunIsInterruptedWithNoLiveWorker) {
  WizqProcess run({"wizq", "run", DataFile("basic.jsonc"), "--dir", dir_.path(),
                   "--input", R"({"n":3})", "-q"},
                  test::SpawnOptions{"", {{"ITEM_NAP_MS", "20000"}}});
  ASSERT_TRUE(test::WaitFor(
      [&] {
        return !test::LedgerFind(test::ReadLedger(dir_.path()), "start",
                                 "item-i0")
                    .empty() ||
               run.Poll();
      },
      test::seconds(30)));
  ASSERT_FALSE(run.Poll()) << run.result().Describe();
  Json st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["live_status"], "running") << st.dump();
  EXPECT_EQ(st["interrupted"], false);
  ASSERT_EQ(st["live_workers"], 1) << st.dump();
  bool found = false;
  for (const Json& w : st["workers"]) {
    if (w["alive"] == true) {
      EXPECT_EQ(w["pid"], run.pid());
      EXPECT_GT(w["started_ms"].get<int64_t>(), 0);
      found = true;
    }
  }
  EXPECT_TRUE(found) << st.dump();
  WizqResult text = Wizq({"status", "--dir", dir_.path()});
  EXPECT_TRUE(
      Contains(text.out, "workers: 1 alive: pid " + std::to_string(run.pid())))
      << text.out;

  run.Kill(SIGKILL);
  run.Wait();
  st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["status"], "running") << "the recorded status is kept";
  EXPECT_EQ(st["live_status"], "interrupted") << st.dump();
  EXPECT_EQ(st["interrupted"], true);
  EXPECT_EQ(st["live_workers"], 0);
  const std::string resume = st.value("resume_command", "");
  EXPECT_TRUE(Contains(resume, "--run-id " + st["run_id"].get<std::string>()))
      << resume;
  text = Wizq({"status", "--dir", dir_.path()});
  EXPECT_EQ(text.out.rfind("interrupted: ", 0), 0u) << text.out;
  EXPECT_TRUE(Contains(text.out, "workers: none alive")) << text.out;
  EXPECT_TRUE(Contains(text.out, "Resume it with\n  " + resume)) << text.out;

  // The printed command resumes it. The killed run's tasks nap for up to
  // 20s: end them first, so that their attempts are lost, not waited for.
  for (const test::LedgerLine& l : test::ReadLedger(dir_.path())) {
    const pid_t pgid = getpgid(static_cast<pid_t>(l.pid));
    if (l.kind == "start" && pgid > 1) kill(-pgid, SIGKILL);
  }
  const std::string cmd =
      std::regex_replace(resume, std::regex("^wizq run WORKFLOW"),
                         test::WizqPath() + " run " + DataFile("basic.jsonc"));
  const int rc = system(("ITEM_NAP_MS=0 " + cmd + " -q").c_str());
  EXPECT_EQ(rc, 0) << cmd;
  st = test::StatusJson(dir_.path());
  EXPECT_EQ(st["live_status"], "completed") << st.dump();
  EXPECT_EQ(st["resumes"], 1);
}

// Killed right after its claims became durable (none of them started),
// wizq leaves tasks held that lost no work: status says so instead of
// "put back"; the resume records their resets as never_started (no
// charge), log --table says "never started", and the report draws them
// hollow, never as lost with their worker.
TEST_F(StatusReportTest, NeverStartedClaimsAreNotLostWork) {
  const std::vector<std::string> run = {
      "wizq",       "run",       DataFile("basic.jsonc"),
      "--dir",      dir_.path(), "--input",
      R"({"n":4})", "-q"};
  test::SpawnOptions crash{"", {{"WIZQ_CRASH_AT", "run.after_claim_commit:2"}}};
  WizqResult r = RunWizq(run, crash);
  ASSERT_TRUE(r.exited && r.code == 86) << r.Describe();
  const WizqResult st = Wizq({"status", "--dir", dir_.path()});
  EXPECT_TRUE(Contains(st.out, "its attempt never started")) << st.out;
  EXPECT_FALSE(Contains(st.out, "(dead: put back")) << st.out;
  r = RunWizq(run);
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  std::set<int64_t> unstarted;
  for (const Json& e : test::ReadAudit(dir_.path())) {
    if (e["event"] != "task_reset") continue;
    EXPECT_EQ(e["reason"], "worker_lost") << e.dump();
    EXPECT_EQ(e.value("refund", false), true) << e.dump();
    EXPECT_EQ(e.value("never_started", false), true) << e.dump();
    unstarted.insert(e["id"].get<int64_t>());
  }
  ASSERT_EQ(unstarted.size(), 2u) << "-j 2: the two Items claimed";
  const WizqResult table = Wizq({"log", "--table", "--dir", dir_.path()});
  EXPECT_EQ(test::CountOf(table.out, "never started (not charged)"), 2)
      << table.out;
  const std::string html = dir_.path() + "/r.html";
  ASSERT_EQ(Wizq({"report", "--dir", dir_.path(), "-o", html}).code, 0);
  const std::string page = test::ReadAll(html);
  EXPECT_EQ(test::CountOf(page, "class=\"attempt reset unstarted\""), 2);
  EXPECT_FALSE(Contains(page, "class=\"attempt reset lost")) << page;
}

// status reads a read-only mount of a run and a plain copy: it works and
// writes nothing (not even the lock file).
TEST_F(StatusReportTest, StatusReadsAReadOnlyMountAndACopyWithoutWriting) {
  WizqResult last;
  ASSERT_EQ(RunUntilExit("killed_twice.jsonc", &last), 2);
  const Json want = test::StatusJson(dir_.path());

  ScratchDir copy;
  fs::copy(dir_.path() + "/.wizard", copy.path() + "/.wizard",
           fs::copy_options::recursive);
  fs::remove(copy.path() + "/.wizard/lock");
  const auto before = Listing(copy.path());
  const Json got = test::StatusJson(copy.path());
  EXPECT_EQ(got["run_id"], want["run_id"]);
  EXPECT_EQ(got["tasks"].size(), want["tasks"].size());
  EXPECT_EQ(got["live_status"], "completed");
  EXPECT_EQ(Listing(copy.path()), before) << "status wrote into the copy";
  EXPECT_TRUE(Wizq({"log", "--table", "--dir", copy.path()}).code == 0);

  // A read-only bind mount, in a mount namespace of its own.
  ScratchDir mnt;
  const std::string script = "mount --bind -o ro " + dir_.path() + " " +
                             mnt.path() + " || exit 99; exec " +
                             test::WizqPath() + " status --json --dir " +
                             mnt.path();
  WizqResult ro = RunWizq({"/usr/bin/unshare", "-m", "/bin/sh", "-c", script});
  if (ro.exited && (ro.code == 99 || ro.code == 1) && ro.out.empty()) {
    ro = RunWizq({"/usr/bin/unshare", "-rm", "/bin/sh", "-c", script});
  }
  if (ro.exited && (ro.code == 99 || ro.code == 1) && ro.out.empty()) {
    GTEST_SKIP() << "cannot make a read-only mount here: " << ro.Describe();
  }
  ASSERT_TRUE(ro.exited && ro.code == 0) << ro.Describe();
  const Json j = test::ParseJsonOrNull(ro.out);
  EXPECT_EQ(j["run_id"], want["run_id"]) << ro.out;
  EXPECT_EQ(j["tasks"].size(), want["tasks"].size());
}

// --json carries the run's times, resumes, workers and per-task values; the
// filters select; the summary line comes first.
TEST_F(StatusReportTest, StatusJsonFieldsFiltersAndSummary) {
  WizqResult last;
  EXPECT_EQ(RunUntilExit("poison.jsonc", &last), 3);
  const Json st = test::StatusJson(dir_.path());
  for (const char* key : {"started_ms", "finished_ms", "resumes", "workers",
                          "live_workers", "live_status", "interrupted",
                          "task_output_bytes", "adopted", "wizq_version"}) {
    EXPECT_TRUE(st.contains(key)) << key << " missing: " << st.dump();
  }
  EXPECT_EQ(st["resumes"], 3);
  EXPECT_EQ(st["live_status"], "failed");
  EXPECT_GT(st["finished_ms"].get<int64_t>(), st["started_ms"].get<int64_t>());
  EXPECT_GT(st["task_output_bytes"].get<int64_t>(), 0);
  for (const Json& t : st["tasks"]) {
    EXPECT_TRUE(t.contains("inputs") && t.contains("created_ms") &&
                t.contains("updated_ms") && t.contains("claimed_by"))
        << t.dump();
  }
  const WizqResult text = Wizq({"status", "--dir", dir_.path()});
  EXPECT_EQ(
      test::SplitLines(text.out)[0].rfind(
          "failed: 9 total, 8 done, 1 failed, 0 in progress, 0 pending", 0),
      0u)
      << text.out;

  auto ids = [&](std::vector<std::string> filter) {
    filter.insert(filter.begin(), {"status", "--json", "--dir", dir_.path()});
    const WizqResult r = Wizq(filter);
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
    std::set<std::string> types;
    const Json j = test::ParseJsonOrNull(r.out);
    EXPECT_EQ(j["counts"]["done"], 8) << "counts stay the whole run's";
    for (const Json& t : j["tasks"]) types.insert(t["type"]);
    return std::make_pair(j["tasks"].size(), types);
  };
  EXPECT_EQ(ids({"--failed"}),
            std::make_pair(size_t{1}, std::set<std::string>{"Poison"}));
  EXPECT_EQ(ids({"--step", "Ok"}),
            std::make_pair(size_t{6}, std::set<std::string>{"Ok"}));
  EXPECT_EQ(ids({"--state", "done", "--step", "Root"}),
            std::make_pair(size_t{2}, std::set<std::string>{"Root"}));
  const WizqResult human = Wizq({"status", "--dir", dir_.path(), "--failed"});
  EXPECT_TRUE(Contains(human.out, "1 task(s) selected:\n#8 Poison  failed"))
      << human.out;
  const WizqResult bad_state =
      Wizq({"status", "--dir", dir_.path(), "--state", "sleeping"});
  EXPECT_TRUE(bad_state.exited && bad_state.code == 2) << bad_state.Describe();
  const WizqResult bad_step =
      Wizq({"status", "--dir", dir_.path(), "--step", "Nope"});
  EXPECT_TRUE(bad_step.exited && bad_step.code == 2) << bad_step.Describe();
  EXPECT_TRUE(Contains(bad_step.err, "Root, Ok, Poison")) << bad_step.err;
}

// log --table: one row per task_claimed, the lost attempts with their
// reason; the human log prints times, not epoch milliseconds.
TEST_F(StatusReportTest, LogTableHasARowPerAttemptWithWorkerLost) {
  WizqResult last;
  EXPECT_EQ(RunUntilExit("poison.jsonc", &last), 3);
  int claims = 0;
  for (const Json& e : test::ReadAudit(dir_.path())) {
    claims += e["event"] == "task_claimed" ? 1 : 0;
  }
  const WizqResult r = Wizq({"log", "--table", "--json", "--dir", dir_.path()});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const std::vector<Json> rows = test::ParseJsonLines(r.out);
  EXPECT_EQ(static_cast<int>(rows.size()), claims);
  std::vector<std::string> poison;
  for (const Json& row : rows) {
    for (const char* key :
         {"task", "step", "value", "attempt", "worker", "start_ms", "end_ms",
          "duration_ms", "outcome", "reason", "exit_code"}) {
      EXPECT_TRUE(row.contains(key)) << key << ": " << row.dump();
    }
    if (row["step"] == "Poison") {
      poison.push_back(row["outcome"].get<std::string>() + "/" +
                       row["reason"].get<std::string>() + "/" +
                       std::to_string(row["attempt"].get<int>()));
    }
  }
  EXPECT_EQ(poison, (std::vector<std::string>{"reset/worker_lost/1",
                                              "reset/worker_lost/2",
                                              "failed/worker_lost/3"}));
  const WizqResult table = Wizq({"log", "--table", "--dir", dir_.path()});
  EXPECT_TRUE(Contains(table.out, "TASK STEP")) << table.out;
  EXPECT_TRUE(Contains(table.out, "worker_lost, failed")) << table.out;

  const WizqResult log = Wizq({"log", "--dir", dir_.path()});
  const std::regex line(R"(^ *\d+ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \w+)");
  for (const std::string& l : test::SplitLines(log.out)) {
    EXPECT_TRUE(std::regex_search(l, line)) << l;
  }
  EXPECT_FALSE(std::regex_search(log.out, std::regex(R"(=\d{13}\b)")))
      << "an epoch ms in the human log:\n"
      << log.out;
}

// Runs set aside by --fresh are listed and shown.
TEST_F(StatusReportTest, ArchivedRunsAreListedAndShown) {
  const std::vector<std::string> run = {"run",     DataFile("basic.jsonc"),
                                        "--dir",   dir_.path(),
                                        "--input", R"({"n":2})",
                                        "-q"};
  ASSERT_EQ(Wizq(run).code, 0);
  const std::string first = test::StatusJson(dir_.path())["run_id"];
  std::vector<std::string> fresh = run;
  fresh.push_back("--fresh");
  ASSERT_EQ(Wizq(fresh).code, 0);
  const WizqResult list =
      Wizq({"status", "--archived", "--json", "--dir", dir_.path()});
  ASSERT_TRUE(list.exited && list.code == 0) << list.Describe();
  const Json arr = test::ParseJsonOrNull(list.out);
  ASSERT_EQ(arr.size(), 1u) << list.out;
  EXPECT_EQ(arr[0]["run_id"], first);
  EXPECT_EQ(arr[0]["status"], "completed");
  EXPECT_EQ(arr[0]["total"], 3);
  const std::string name = arr[0]["name"];
  const WizqResult text = Wizq({"status", "--archived", "--dir", dir_.path()});
  EXPECT_TRUE(Contains(text.out, name)) << text.out;

  const WizqResult one =
      Wizq({"status", "--archived", name, "--json", "--dir", dir_.path()});
  ASSERT_TRUE(one.exited && one.code == 0) << one.Describe();
  const Json j = test::ParseJsonOrNull(one.out);
  EXPECT_EQ(j["run_id"], first);
  EXPECT_EQ(j["tasks"].size(), 3u);
  EXPECT_TRUE(Contains(j.value("archive", ""), "/archive/" + name));
  const WizqResult by_id =
      Wizq({"status", "--archived", first, "--json", "--dir", dir_.path()});
  EXPECT_EQ(test::ParseJsonOrNull(by_id.out)["archive"], j["archive"])
      << by_id.Describe();
  const WizqResult missing =
      Wizq({"status", "--archived", "nope", "--dir", dir_.path()});
  EXPECT_TRUE(missing.exited && missing.code == 2) << missing.Describe();
  // ".." is not an archived run's name (it would be the live run).
  const std::string html = dir_.path() + "/r.html";
  const WizqResult up =
      Wizq({"report", "--archived", "..", "--dir", dir_.path(), "-o", html});
  EXPECT_TRUE(up.exited && up.code == 2) << up.Describe();
  EXPECT_FALSE(fs::exists(html));
  const WizqResult rep =
      Wizq({"report", "--archived", name, "--dir", dir_.path(), "-o", html});
  EXPECT_TRUE(rep.exited && rep.code == 0) << rep.Describe();
}

// prune removes the files of finished tasks and keeps the failed one's;
// status reports what is kept, and the run is still readable.
TEST_F(StatusReportTest, PruneKeepsFailedTasksOutput) {
  const WizqResult r =
      Wizq({"run", DataFile("one_fails.jsonc"), "--dir", dir_.path(), "-q"});
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  const std::string tasks = dir_.path() + "/.wizard/tasks/";
  const Json st = test::StatusJson(dir_.path());
  int64_t bad = 0;
  for (const Json& t : st["tasks"]) {
    if (t["type"] == "Bad") bad = t["id"];
    ASSERT_TRUE(fs::exists(tasks + std::to_string(t["id"].get<int64_t>()) +
                           ".1.stdout"));
  }
  ASSERT_GT(bad, 0);
  const WizqResult rows = Wizq({"log", "--table", "--json", "--dir",
                                dir_.path(), "--task", std::to_string(bad)});
  EXPECT_EQ(test::ParseJsonOrNull(rows.out)["exit_code"], 3) << rows.out;

  const WizqResult p = Wizq({"prune", "--json", "--dir", dir_.path()});
  ASSERT_TRUE(p.exited && p.code == 0) << p.Describe();
  const Json pj = test::ParseJsonOrNull(p.out);
  EXPECT_EQ(pj["pruned_tasks"], 2) << p.out;
  EXPECT_EQ(pj["kept_failed_tasks"], 1);
  for (const Json& t : st["tasks"]) {
    const std::string id = std::to_string(t["id"].get<int64_t>());
    for (const char* ext : {".1.stdout", ".1.stderr"}) {
      EXPECT_EQ(fs::exists(tasks + id + ext), t["id"] == bad) << id << ext;
    }
  }
  EXPECT_TRUE(fs::exists(tasks + "attempts.journal")) << "the journal stays";
  EXPECT_TRUE(Contains(test::ReadAll(tasks + std::to_string(bad) + ".1.stderr"),
                       "boom-from-bad"));
  const Json after = test::StatusJson(dir_.path());
  EXPECT_EQ(after["task_output_bytes"], pj["kept_bytes"]);
  EXPECT_LT(after["task_output_bytes"].get<int64_t>(),
            st["task_output_bytes"].get<int64_t>());
  EXPECT_EQ(after["tasks"].size(), st["tasks"].size());
}

// Whether process `pid` waits for a flock (a "->" line of /proc/locks).
bool WaitsForFlock(pid_t pid) {
  const std::string locks = test::ReadAll("/proc/locks");
  const std::regex waiting("-> FLOCK +ADVISORY +WRITE +" + std::to_string(pid) +
                           " ");
  return std::regex_search(locks, waiting);
}

// A new run replacing the pruned one while prune works (an archive renames
// `.wizard/tasks` away and starts a new one, whose task ids name other
// tasks): prune must not remove the new run's files under the ids of the
// old run's finished tasks. The archive is played by the test under the
// directory lock, while prune waits for that lock to read the old state.
TEST_F(StatusReportTest, PruneNeverRemovesTheFilesOfARunThatReplacedIt) {
  const WizqResult r =
      Wizq({"run", DataFile("one_fails.jsonc"), "--dir", dir_.path(), "-q"});
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  const std::string wizard = dir_.path() + "/.wizard";
  std::unique_ptr<FileLock> lock;
  ASSERT_TRUE(Env::Posix()->LockFile(wizard + "/lock", true, &lock).ok());
  WizqProcess prune({"wizq", "prune", "--json", "--dir", dir_.path()});
  const auto deadline = std::chrono::steady_clock::now() + kWizqDeadline;
  while (!WaitsForFlock(prune.pid()) && !prune.Poll() &&
         std::chrono::steady_clock::now() < deadline) {
    usleep(10000);
  }
  ASSERT_TRUE(WaitsForFlock(prune.pid())) << "prune never waited for the lock";
  // The "archive": the old run's task files go; the new run's task 1 runs.
  fs::rename(wizard + "/tasks", wizard + "/old-tasks");
  fs::create_directories(wizard + "/tasks/1");
  test::WriteAll(wizard + "/tasks/1/1.stdout", "the new run's task 1\n");
  lock.reset();
  const WizqResult& p = prune.Wait();
  EXPECT_TRUE(fs::exists(wizard + "/tasks/1/1.stdout")) << p.Describe();
  EXPECT_TRUE(p.exited && p.code != 0) << p.Describe();
  EXPECT_TRUE(Contains(p.err, "replaced")) << p.err;
}

// A finished run says how much of its attempts' files it keeps, and how to
// free it; after a prune the line reports less.
TEST_F(StatusReportTest, AFinishedRunSaysWhatItKeeps) {
  const WizqResult r =
      Wizq({"run", DataFile("one_fails.jsonc"), "--dir", dir_.path()});
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "task files kept: ")) << r.err;
  EXPECT_TRUE(Contains(r.err, "(wizq prune removes those of done tasks)"))
      << r.err;
  const WizqResult q =
      Wizq({"run", DataFile("one_fails.jsonc"), "--dir", dir_.path(), "-q"});
  EXPECT_FALSE(Contains(q.err, "task files kept")) << "--quiet: " << q.err;
}

// The report of a run killed twice and resumed, rendered by headless
// Chromium: every task in the DOM, the two crash markers at the workers and
// log positions the audit log gives, the resumes, and a screenshot.
TEST_F(StatusReportTest, ReportRendersInChromiumWithTheCrashMarkers) {
  if (system("command -v chromium >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium is not installed (`make deps` installs the "
                    "Debian package chromium); the report was not rendered";
  }
  WizqResult last;
  ASSERT_EQ(RunUntilExit("killed_twice.jsonc", &last), 2);
  ASSERT_TRUE(last.exited && last.code == 0) << last.Describe();
  const std::string out_dir =
      test::BuildDir() + "/test-output/StatusReportTest";
  fs::create_directories(out_dir);
  const std::string html = out_dir + "/report.html";
  const std::string png = out_dir + "/report.png";
  fs::remove(png);
  const WizqResult rep = Wizq({"report", "--dir", dir_.path(), "-o", html});
  ASSERT_TRUE(rep.exited && rep.code == 0) << rep.Describe();
  const std::string page = test::ReadAll(html);
  for (const char* remote : {"src=", "href=", "<link", "url(", "@import"}) {
    EXPECT_FALSE(Contains(page, remote)) << "fetches something: " << remote;
  }

  ScratchDir profile;  // Chromium's own files, removed afterwards
  const std::vector<std::string> chrome = {"chromium", "--headless",
                                           "--no-sandbox", "--disable-gpu",
                                           "--user-data-dir=" + profile.path()};
  std::vector<std::string> dump = chrome;
  dump.push_back("--dump-dom");
  dump.push_back("file://" + html);
  dump[0] = "/usr/bin/chromium";
  const WizqResult dom = RunWizq(dump, {}, test::seconds(120));
  ASSERT_TRUE(dom.exited && dom.code == 0) << dom.Describe();
  std::vector<std::string> shot = chrome;
  shot[0] = "/usr/bin/chromium";
  shot.push_back("--screenshot=" + png);
  shot.push_back("--window-size=1280,1400");
  shot.push_back("file://" + html);
  const WizqResult s = RunWizq(shot, {}, test::seconds(120));
  EXPECT_TRUE(s.exited && s.code == 0) << s.Describe();
  EXPECT_EQ(test::ReadAll(png).substr(0, 8), "\x89PNG\r\n\x1a\n")
      << "no screenshot at " << png;

  const Json st = test::StatusJson(dir_.path());
  ASSERT_EQ(st["tasks"].size(), 5u);
  for (const Json& t : st["tasks"]) {
    const std::string id = std::to_string(t["id"].get<int64_t>());
    const std::string li = "class=\"task\" id=\"task-" + id +
                           "\" data-task-id=\"" + id + "\" data-state=\"" +
                           t["state"].get<std::string>() + "\"";
    EXPECT_TRUE(Contains(dom.out, li)) << li;
  }
  const std::map<std::string, int64_t> lost = LostWorkers();
  EXPECT_EQ(lost.size(), 2u);
  const std::regex crash(
      R"re(class="marker crash" data-worker="([^"]+)" data-seq="(\d+)")re");
  std::map<std::string, int64_t> marked;
  for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), crash);
       it != std::sregex_iterator(); ++it) {
    marked[(*it)[1]] = std::stoll((*it)[2]);
  }
  EXPECT_EQ(marked, lost);
  std::set<int64_t> resumes, resume_marks;
  for (const Json& e : test::ReadAudit(dir_.path())) {
    if (e["event"] == "run_resumed") resumes.insert(e["seq"].get<int64_t>());
  }
  const std::regex resume(R"re(class="marker resume" data-seq="(\d+)")re");
  for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), resume);
       it != std::sregex_iterator(); ++it) {
    resume_marks.insert(std::stoll((*it)[1]));
  }
  EXPECT_EQ(resume_marks, resumes);
  EXPECT_EQ(resumes.size(), 2u);
  EXPECT_TRUE(Contains(dom.out, "class=\"marker retry\"")) << "Items retried";
}

}  // namespace
// An unfinished write at the end of the log (a crash mid-append) is left
// out by the readers and said: `wizq log` on stderr, `wizq report` on the
// page (the directory store's OpenReport::torn_tail_bytes).
TEST_F(StatusReportTest, ReadersSayWhatAnUnfinishedWriteLeftOut) {
  const WizqResult r = Wizq({"run", DataFile("basic.jsonc"), "--dir",
                             dir_.path(), "--input", R"({"n":2})", "-q"});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const std::string log = dir_.path() + "/.wizard/audit.jsonl";
  const std::string torn = R"({"seq":99999,"ts":1,"event":"task_compl)";
  test::WriteAll(log, test::ReadAll(log) + torn);
  const WizqResult l = Wizq({"log", "--dir", dir_.path()});
  ASSERT_TRUE(l.exited && l.code == 0) << l.Describe();
  EXPECT_TRUE(Contains(l.err, "bytes of an unfinished write")) << l.err;
  EXPECT_FALSE(Contains(l.out, "99999")) << l.out;
  const std::string html = dir_.path() + "/r.html";
  const WizqResult rep = Wizq({"report", "--dir", dir_.path(), "-o", html});
  ASSERT_TRUE(rep.exited && rep.code == 0) << rep.Describe();
  EXPECT_TRUE(Contains(test::ReadAll(html), "bytes of an unfinished write"));
  EXPECT_TRUE(Contains(test::ReadAll(log), torn)) << "a reader repaired it";
}

}  // namespace wizq
