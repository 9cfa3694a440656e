// Security tests of the real `wizq` binary (docs/RELIABILITY.md, "Crash
// points, security and resource bounds"):
//   - .wizard/ is 0700 and every file in it 0600, even under umask 0;
//   - a .wizard that is a symlink, or owned by another user, is refused
//     (exit 3, naming it) and left alone; symlinks planted inside it are
//     never followed;
//   - task inputs reach a command only on stdin: shell metacharacters,
//     quotes and newlines in inputs, step names and run ids are never
//     executed and arrive byte for byte;
//   - no step name, input or --run-id makes wizq write outside .wizard/;
//   - a task printing 50 MiB leaves wizq's memory bounded, and a task that
//     leaves a process holding its stdout open does not hang wizq.
// The workflows are in tests/data/security/; each test copies them into its
// scratch directory, so that a command that did run would leave its traces
// there (the scripts run in the workflow file's directory).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
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
using test::WizqResult;

std::string SecurityData() {
  return test::SourceDir() + "/tests/data/security";
}

// Copies tests/data/security to <scratch>/wf and returns that path.
std::string CopyWorkflows(const ScratchDir& scratch) {
  const std::string wf = scratch.Join("wf");
  fs::copy(SecurityData(), wf, fs::copy_options::recursive);
  return wf;
}

// Every path under `root` (relative to it), recursively.
std::set<std::string> ListTree(const std::string& root) {
  std::set<std::string> out;
  std::error_code ec;
  // Lexically relative: nothing here may stat what it lists (a test
  // running beside this one may mount /proc under the build directory).
  for (auto it = fs::recursive_directory_iterator(
           root, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    out.insert(it->path().lexically_relative(root).string());
  }
  return out;
}

// Everything under `root` whose file name starts with "pwned".
std::vector<std::string> FindPwned(const std::string& root) {
  std::vector<std::string> out;
  for (const std::string& p : ListTree(root)) {
    if (fs::path(p).filename().string().rfind("pwned", 0) == 0) {
      out.push_back(root + "/" + p);
    }
  }
  return out;
}

int Mode(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  void TearDown() override { test::ReapStrays(); }
};

// --- permissions
// ---------------------------------------------------------------

TEST_F(SecurityTest, WizardIsPrivateEvenUnderUmaskZero) {
  ScratchDir scratch;
  const std::string wf = CopyWorkflows(scratch) + "/inject.jsonc";
  const std::string dir = scratch.Join("inst");
  const auto umask0 = [] { umask(0); };
  const std::vector<std::string> run = {
      "wizq", "run", wf, "--dir", dir, "--input", "{\"s\":\"x\"}", "-q"};
  Measured m = RunMeasured(run, umask0);
  ASSERT_TRUE(m.exited && m.code == 0) << Describe(m);
  // A torn tail set aside, and the run archived: more kinds of files.
  const std::string log = dir + "/.wizard/audit.jsonl";
  test::WriteAll(log, test::ReadAll(log) + "{\"seq\":");
  std::vector<std::string> fresh = run;
  fresh.push_back("--fresh");
  fresh.push_back("--no-reuse");  // the tasks run again: their files too
  m = RunMeasured(fresh, umask0);
  ASSERT_TRUE(m.exited && m.code == 0) << Describe(m);

  EXPECT_EQ(Mode(dir + "/.wizard"), 0700);
  EXPECT_EQ(Mode(dir + "/.wizard/queue.json"), 0600);
  EXPECT_EQ(Mode(dir + "/.wizard/audit.jsonl"), 0600);
  EXPECT_EQ(Mode(dir + "/.wizard/tasks/1.1.stdout"), 0600);
  EXPECT_EQ(Mode(dir + "/.wizard/tasks/1.1.stderr"), 0600);
  EXPECT_EQ(Mode(dir + "/.wizard/tasks/attempts.journal"), 0600);
  int files = 0, dirs = 0;
  bool saw_torn = false, saw_archive = false;
  for (const std::string& rel : ListTree(dir + "/.wizard")) {
    const std::string p = dir + "/.wizard/" + rel;
    saw_torn |= rel.find("audit.torn-") != std::string::npos;
    saw_archive |= rel.rfind("archive/", 0) == 0;
    if (fs::is_directory(fs::symlink_status(p))) {
      dirs++;
      EXPECT_EQ(Mode(p), 0700) << p;
    } else {
      files++;
      EXPECT_EQ(Mode(p), 0600) << p;
    }
  }
  EXPECT_TRUE(saw_torn && saw_archive);
  RecordProperty("files", files);
  RecordProperty("dirs", dirs);
}

// --- refusing a .wizard that is not ours
// ---------------------------------------

TEST_F(SecurityTest, SymlinkedWizardIsRefusedAndItsTargetUntouched) {
  ScratchDir scratch;
  const std::string wf = CopyWorkflows(scratch) + "/inject.jsonc";
  const std::string dir = scratch.Join("inst");
  const std::string target = scratch.Join("elsewhere");
  fs::create_directories(dir);
  fs::create_directories(target + "/sub");
  test::WriteAll(target + "/keep", "precious\n");
  fs::create_directory_symlink(target, dir + "/.wizard");
  const std::set<std::string> before = ListTree(target);

  const Measured run = RunMeasured(
      {"wizq", "run", wf, "--dir", dir, "--input", "{\"s\":\"x\"}", "-q"});
  EXPECT_TRUE(run.exited && run.code == 3) << Describe(run);
  EXPECT_TRUE(test::Contains(run.err, ".wizard")) << run.err;
  const Measured status = RunMeasured({"wizq", "status", "--dir", dir});
  EXPECT_TRUE(status.exited && status.code == 3) << Describe(status);
  EXPECT_TRUE(test::Contains(status.err, ".wizard")) << status.err;

  EXPECT_EQ(ListTree(target), before);
  EXPECT_EQ(test::ReadAll(target + "/keep"), "precious\n");
  EXPECT_TRUE(fs::is_symlink(dir + "/.wizard"));
  EXPECT_FALSE(fs::exists(dir + "/seen")) << "a task ran";
}

TEST_F(SecurityTest, WizardOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  ScratchDir scratch;
  const std::string wf = CopyWorkflows(scratch) + "/inject.jsonc";
  const std::string dir = scratch.Join("inst");
  fs::create_directories(dir + "/.wizard");
  chmod((dir + "/.wizard").c_str(), 0700);
  ASSERT_EQ(chown((dir + "/.wizard").c_str(), 65534, 65534), 0)
      << strerror(errno);

  const Measured run = RunMeasured(
      {"wizq", "run", wf, "--dir", dir, "--input", "{\"s\":\"x\"}", "-q"});
  EXPECT_TRUE(run.exited && run.code == 3) << Describe(run);
  EXPECT_TRUE(test::Contains(run.err, ".wizard")) << run.err;
  EXPECT_TRUE(test::Contains(run.err, "another user")) << run.err;
  const Measured status = RunMeasured({"wizq", "status", "--dir", dir});
  EXPECT_TRUE(status.exited && status.code == 3) << Describe(status);
  EXPECT_TRUE(ListTree(dir + "/.wizard").empty()) << "wizq wrote into it";
  EXPECT_FALSE(fs::exists(dir + "/seen")) << "a task ran";
}

// Symlinks planted inside .wizard/ (a task directory, the log, the temp
// snapshot) are refused, not followed: what they point at is untouched.
TEST_F(SecurityTest, SymlinksPlantedInsideWizardAreNotFollowed) {
  ScratchDir scratch;
  const std::string wf = CopyWorkflows(scratch) + "/inject.jsonc";
  const std::string target = scratch.Join("elsewhere");
  fs::create_directories(target);
  test::WriteAll(target + "/victim", "precious\n");
  struct Plant {
    std::string name;  // under .wizard/
    std::string to;
  };
  const std::vector<Plant> plants = {
      {"tasks/1.1.stdout", target + "/victim"},
      {"tasks/attempts.journal", target + "/victim"},
      {"audit.jsonl", target + "/victim"},
      {"queue.json.tmp", target + "/victim"},
      {"queue.json", target + "/victim"},
  };
  for (size_t i = 0; i < plants.size(); i++) {
    const Plant& plant = plants[i];
    SCOPED_TRACE(".wizard/" + plant.name + " -> " + plant.to);
    const std::string dir = scratch.Join("inst-" + std::to_string(i));
    fs::create_directories(dir + "/.wizard/tasks");
    chmod((dir + "/.wizard").c_str(), 0700);
    chmod((dir + "/.wizard/tasks").c_str(), 0700);
    fs::create_symlink(plant.to, dir + "/.wizard/" + plant.name);
    const Measured run = RunMeasured(
        {"wizq", "run", wf, "--dir", dir, "--input", "{\"s\":\"x\"}", "-q"});
    EXPECT_TRUE(run.exited && run.code != 0 && run.code != 2)
        << "expected a refusal: " << Describe(run);
    EXPECT_EQ(ListTree(target), std::set<std::string>{"victim"});
    EXPECT_EQ(test::ReadAll(target + "/victim"), "precious\n");
  }
}

// --- inputs are data, never code
// -------------------------------------------------

TEST_F(SecurityTest, HostileInputsArriveOnlyOnStdinByteForByte) {
  ScratchDir scratch;
  const std::string wf = CopyWorkflows(scratch) + "/inject.jsonc";
  const std::string dir = scratch.Join("inst");
  const std::string cwd = scratch.Join("cwd");
  fs::create_directories(cwd);
  const std::string evil =
      "$(touch pwned1) `touch pwned2` ; touch pwned3 && touch pwned4 | "
      "touch pwned4b\n'\"\\ ' \" \nline 2\r\n\t$HOME ${PATH} %s %n -- "
      "\xc3\xa9\xe2\x80\xa8\x01 ../../etc/passwd $(touch pwned1b)";
  const Json input = {{"s", evil},
                      {"list", {evil, "../../etc", "`touch pwned12`"}},
                      {"$(touch pwned10)", "`touch pwned11`"}};
  const std::string run_id = "$(touch pwned8);`touch pwned9`\n'\"";
  test::SpawnOptions opts;
  opts.cwd = cwd;
  const WizqResult r =
      test::RunWizq({"wizq", "run", wf, "--dir", dir, "--input", input.dump(),
                     "--run-id", run_id, "-q"},
                    opts);
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();

  const std::vector<std::string> steps = {"Start", "../../etc",
                                          "$(touch pwned5)", "`touch pwned6`",
                                          "/tmp/x; touch pwned7"};
  const Json st = test::StatusJson(dir);
  EXPECT_EQ(st["run_id"], run_id);
  ASSERT_EQ(st["tasks"].size(), steps.size());
  for (const Json& t : st["tasks"]) {
    const int64_t id = t["id"];
    SCOPED_TRACE("task " + std::to_string(id));
    EXPECT_EQ(t["state"], "done");
    EXPECT_EQ(t["type"], steps[static_cast<size_t>(id - 1)]);
    const std::string seen = dir + "/seen/" + std::to_string(id);
    EXPECT_EQ(test::ReadAll(seen + ".s"), evil) << "the bytes of .value.s";
    EXPECT_EQ(test::ReadAll(seen + ".step"), t["type"].get<std::string>());
    const Json in = test::ReadJsonFile(seen + ".stdin");
    ASSERT_FALSE(in.is_discarded()) << test::ReadAll(seen + ".stdin");
    EXPECT_EQ(in["kind"], t["type"]);
    EXPECT_EQ(in["value"], input);
  }
  for (const std::string& root :
       {scratch.path(), SecurityData(), std::string(".")}) {
    EXPECT_EQ(FindPwned(root), std::vector<std::string>{})
        << "a command from an input was executed (" << root << ")";
  }
}

// --- paths
// ---------------------------------------------------------------------

TEST_F(SecurityTest, NoStepNameInputOrRunIdWritesOutsideWizard) {
  ScratchDir scratch;
  const std::string wf = CopyWorkflows(scratch) + "/inject.jsonc";
  const std::string dir = scratch.Join("inst");
  const std::string escape =
      "wizq-escape-" + std::to_string(getpid()) + "-probe";
  const std::vector<std::string> run_ids = {
      "../x", "/", "a/../../b",      "../../../../../../../tmp/" + escape,
      "..",   ".", "/tmp/" + escape, "tasks/../../../" + escape};
  const std::set<std::string> before = ListTree(scratch.path());
  // Where an escaping id would land outside the scratch directory. One
  // that already exists (a stray /tmp/x of something else) cannot tell.
  const std::string parent = fs::path(scratch.path()).parent_path().string();
  std::vector<std::string> outside;
  for (const std::string& p :
       {"/tmp/" + escape, "/" + escape, parent + "/" + escape,
        std::string("/b"), std::string("/x"), parent + "/x", parent + "/b"}) {
    if (!fs::exists(p)) outside.push_back(p);
  }
  for (const std::string& id : run_ids) {
    SCOPED_TRACE("--run-id " + id);
    const Json input = {{"s", "../../etc/" + escape}};
    const WizqResult r =
        test::RunWizq({"wizq", "run", wf, "--dir", dir, "--input", input.dump(),
                       "--run-id", id, "-q"});
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
    const Json st = test::StatusJson(dir);
    EXPECT_EQ(st["run_id"], id);
    EXPECT_EQ(st["status"], "completed");
  }
  // Outside inst/: nothing new. Inside it: only .wizard/ and what the
  // tasks themselves wrote (seen/).
  std::set<std::string> added;
  for (const std::string& p : ListTree(scratch.path())) {
    if (before.count(p)) continue;
    if (p == "inst" || p.rfind("inst/.wizard", 0) == 0 ||
        p.rfind("inst/seen", 0) == 0) {
      continue;
    }
    added.insert(p);
  }
  EXPECT_EQ(added, std::set<std::string>{});
  // Every archived run is one directory right under archive/.
  int archived = 0;
  for (const auto& e : fs::directory_iterator(dir + "/.wizard/archive")) {
    EXPECT_TRUE(e.is_directory()) << e.path();
    EXPECT_TRUE(fs::exists(e.path() / "queue.json")) << e.path();
    archived++;
  }
  EXPECT_EQ(archived, static_cast<int>(run_ids.size()) - 1);
  ASSERT_GE(outside.size(), 3u) << "the escape probes exist already";
  for (const std::string& p : outside) {
    EXPECT_FALSE(fs::exists(p)) << p;
  }
}

// --- hostile output
// ------------------------------------------------------------

// Budget for wizq's peak RSS while a task prints 50 MiB: what it reads back
// is capped at 16 MiB (+ its own few MiB), far below the 50 MiB printed.
constexpr long kBigStdoutBudgetKb = 48 * 1024;

TEST_F(SecurityTest, FiftyMegabytesOfStdoutKeepWizqMemoryBounded) {
  ScratchDir scratch;
  const std::string wf = CopyWorkflows(scratch) + "/big_stdout.jsonc";
  const std::string dir = scratch.Join("inst");
  const Measured m = RunMeasured({"wizq", "run", wf, "--dir", dir, "-q"});
  ASSERT_TRUE(m.exited && m.code == 1) << Describe(m);
  EXPECT_EQ(fs::file_size(dir + "/.wizard/tasks/1.1.stdout"), 50u << 20);
  const Json st = test::StatusJson(dir);
  ASSERT_EQ(st["tasks"].size(), 1u);
  EXPECT_EQ(st["tasks"][0]["state"], "failed");
  EXPECT_EQ(st["tasks"][0]["error"]["reason"], "invalid_response");
  EXPECT_TRUE(test::Contains(st["tasks"][0]["error"]["message"], "larger than"))
      << st.dump();
  RecordProperty("wizq_peak_rss_kb", static_cast<int>(m.maxrss_kb));
  std::printf(
      "[ memory   ] wizq run, a task printing 50 MiB: peak RSS %ld KiB"
      " (%.2fs)\n",
      m.maxrss_kb, m.seconds);
  if (test::UnderSanitizer())
    GTEST_SKIP() << "memory figures mean nothing here";
  EXPECT_LT(m.maxrss_kb, kBigStdoutBudgetKb);
}

TEST_F(SecurityTest, ProcessLeftHoldingStdoutDoesNotHangWizq) {
  ScratchDir scratch;
  const std::string wf = CopyWorkflows(scratch) + "/hang_stdout.jsonc";
  const std::string dir = scratch.Join("inst");
  const Measured m = RunMeasured({"wizq", "run", wf, "--dir", dir, "-q"},
                                 nullptr, nullptr, test::seconds(30));
  EXPECT_TRUE(m.exited && m.code == 0) << Describe(m);
  EXPECT_LT(m.seconds, 10) << "wizq waited for the background process";
  const pid_t stay = atoi(test::ReadAll(dir + "/stay.pid").c_str());
  const pid_t escaped = atoi(test::ReadAll(dir + "/escape.pid").c_str());
  ASSERT_GT(stay, 1);
  ASSERT_GT(escaped, 1);
  // The one in the task's process group was ended with it.
  EXPECT_TRUE(
      test::WaitFor([&] { return test::ProcessDead(stay); }, test::seconds(5)))
      << "the backgrounded sleep " << stay << " outlived its task";
  // The one that left for its own session is out of wizq's reach (a
  // daemon a task starts on purpose); it must merely not block wizq.
  if (!test::ProcessDead(escaped)) kill(escaped, SIGKILL);
  test::WaitFor([&] { return test::ProcessDead(escaped); }, test::seconds(5));
}

}  // namespace
}  // namespace wizq
