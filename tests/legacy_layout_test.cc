// Runs written by the previous layout of the attempt files (a directory per
// task: <n>.stdin, <n>.stdout, <n>.stderr, running.lock, pgid; see
// tasks/exec/attempt_files.h) still resume: an attempt that finished on its own
// is adopted from its `pgid` record and its stdout in the task directory,
// an older wizq's tree (no exit record, "<pid> <start> <boot>") holding
// running.lock is ended and run again, and `wizq log --task` shows them.
//
// The old run directory is generated: a run of this wizq, killed, then
// rewritten into the previous layout (ToPreviousLayout).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/process_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Json;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

// Five steps, each appending its name to `log`; "build" (task 3) sleeps.
std::string FiveSteps(const std::string& build_body) {
  auto step = [](const std::string& name, const std::string& next,
                 const std::string& body) {
    return "{\"name\":\"" + name +
           "\",\"action\":{\"kind\":\"Command\",\"script\":\"echo " + name +
           " >> log; " + body + "echo '" +
           (next.empty()
                ? std::string("[]")
                : "[{\\\"kind\\\":\\\"" + next + "\\\",\\\"value\\\":{}}]") +
           "'\"},\"next\":[" + (next.empty() ? "" : "\"" + next + "\"") + "]}";
  };
  return "{\"entrypoint\":\"gather\",\"options\":{\"max_retries\":1},"
         "\"steps\":[" +
         step("gather", "plan", "") + "," + step("plan", "build", "") + "," +
         step("build", "verify", build_body) + "," +
         step("verify", "ship", "") + "," + step("ship", "", "") + "]}";
}

// Field 22 of /proc/<pid>/stat: its start time in clock ticks.
std::string StartTicks(pid_t pid) {
  const std::string stat =
      test::ReadAll("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) rest >> field;
  return field;
}

std::string BootId() {
  std::string boot = test::ReadAll("/proc/sys/kernel/random/boot_id");
  if (!boot.empty()) boot.pop_back();
  return boot;
}

// Rewrites the run in `inst` into the previous layout: each task's
// <id>.<n>.stdout/.stderr moved into .wizard/tasks/<id>/ as <n>.stdout/
// .stderr, with a <n>.stdin, a running.lock and a `pgid` file holding the
// journal's record of its latest attempt ("<pid> <start> <boot> <attempt>
// <wall>\n" and "end <attempt> exit|signal <value> <synced>\n"); the
// journal removed.
void ToPreviousLayout(const std::string& inst) {
  const std::string tasks = inst + "/.wizard/tasks";
  std::map<std::string, std::string> records;  // by task key
  std::istringstream journal(test::ReadAll(tasks + "/attempts.journal"));
  std::string line;
  while (std::getline(journal, line)) {
    std::istringstream f(line);
    std::string kind, key, attempt, pid, a, b, c;
    f >> kind >> key >> attempt >> pid >> a >> b >> c;
    if (kind == "start") {
      records[key] = pid + " " + a + " " + b + " " + attempt + " " + c + "\n";
    } else if (kind == "end") {
      records[key] += "end " + attempt + " " + a + " " + b + " " + c + "\n";
    }
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(tasks)) files.push_back(e.path());
  for (const fs::path& p : files) {
    const std::string name = p.filename().string();  // <id>.<n>.<stream>
    const size_t dot = name.find('.');
    if (name == "attempts.journal" || dot == std::string::npos) continue;
    const std::string id = name.substr(0, dot);
    const std::string rest = name.substr(dot + 1);  // <n>.<stream>
    fs::create_directories(tasks + "/" + id);
    fs::rename(p, tasks + "/" + id + "/" + rest);
    const std::string n = rest.substr(0, rest.find('.'));
    test::WriteAll(tasks + "/" + id + "/" + n + ".stdin", "{}");
    test::WriteAll(tasks + "/" + id + "/running.lock", "");
    test::WriteAll(tasks + "/" + id + "/pgid", records[id]);
  }
  fs::remove(tasks + "/attempts.journal");
}

class LegacyLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override { test::BecomeSubreaper(); }
  void TearDown() override {
    if (old_tree_ > 0) kill(-old_tree_, SIGKILL);
    for (long pid : test::AttemptGroups(Inst())) {
      kill(-static_cast<pid_t>(pid), SIGKILL);
    }
    test::ReapStrays();
  }
  std::string Inst() const { return dir_.Join("inst"); }
  std::string Workflow(const std::string& json) {
    const std::string path = dir_.Join("wf.json");
    test::WriteAll(path, json);
    return path;
  }
  std::vector<std::string> Run(const std::string& wf) const {
    return {"wizq", "run", wf, "--dir", Inst(), "--quiet"};
  }
  int Count(const std::string& name) const {
    int n = 0;
    for (const std::string& l :
         test::SplitLines(test::ReadAll(dir_.Join("log"))))
      n += l == name ? 1 : 0;
    return n;
  }
  bool WaitForLine(const std::string& name) const {
    return test::WaitFor([&] { return Count(name) > 0; },
                         std::chrono::seconds(20));
  }
  // Runs until "build" starts, then SIGKILLs wizq alone.
  void KillDuringBuild(const std::string& wf) {
    WizqProcess p(Run(wf));
    ASSERT_TRUE(WaitForLine("build"));
    p.Kill(SIGKILL);
    p.Wait();
  }
  std::vector<Json> Events(const std::string& name) const {
    std::vector<Json> out;
    for (const Json& e : test::ReadAudit(Inst())) {
      if (e["event"] == name) out.push_back(e);
    }
    return out;
  }
  std::string TaskLog(int id) const {
    const WizqResult log = test::RunWizq(
        {"wizq", "log", "--dir", Inst(), "--task", std::to_string(id)});
    EXPECT_TRUE(log.exited && log.code == 0) << log.Describe();
    return log.out;
  }

  ScratchDir dir_;
  pid_t old_tree_ = -1;
};

// Build finished on its own after wizq died; its record and stdout are in
// the previous layout: adopted, not run again.
TEST_F(LegacyLayoutTest, AFinishedAttemptIsAdopted) {
  const std::string wf = Workflow(FiveSteps("sleep 1; "));
  KillDuringBuild(wf);
  const std::string tasks = Inst() + "/.wizard/tasks";
  ASSERT_TRUE(test::WaitFor(
      [&] {
        return test::ReadAll(tasks + "/attempts.journal").find("end 3 1 ") !=
               std::string::npos;
      },
      std::chrono::seconds(20)));
  ToPreviousLayout(Inst());
  ASSERT_TRUE(fs::is_directory(tasks + "/3"));
  ASSERT_NE(test::ReadAll(tasks + "/3/1.stdout").find("verify"),
            std::string::npos);
  const WizqResult r = test::RunWizq(Run(wf));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  for (const char* name : {"gather", "plan", "build", "verify", "ship"}) {
    EXPECT_EQ(Count(name), 1) << name;
  }
  const std::vector<Json> adopted = Events("task_adopted");
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0]["id"], 3);
  // The old tasks' files stay where they were; the new ones are the
  // current layout's.
  EXPECT_TRUE(fs::exists(tasks + "/1/1.stdout"));
  EXPECT_TRUE(fs::exists(tasks + "/4.1.stdout"));
  const std::string log = TaskLog(3);
  EXPECT_TRUE(test::Contains(log, "task_adopted")) << log;
  // Its response, read from the old stdout file, spawned task 4.
  EXPECT_TRUE(test::Contains(log, "spawned=[4]")) << log;
}

// What an older wizq (before exit records) left running: its shell leading
// its own group and holding running.lock, recorded as "<pid> <start time>
// <boot id>". It can leave no exit record: it is ended, and the task runs
// again (a lost attempt, charged).
TEST_F(LegacyLayoutTest, AnOlderWizqsTreeIsEndedAndRunAgain) {
  const std::string wf = Workflow(FiveSteps("sleep 1; "));
  KillDuringBuild(wf);
  const std::string tasks = Inst() + "/.wizard/tasks";
  // This wizq's build tree goes (as if it never was); an older wizq's
  // tree takes its place.
  for (long pid : test::AttemptGroups(Inst())) {
    kill(-static_cast<pid_t>(pid), SIGKILL);
  }
  ToPreviousLayout(Inst());
  old_tree_ = fork();
  ASSERT_GE(old_tree_, 0);
  if (old_tree_ == 0) {
    setpgid(0, 0);
    const int fd = open((tasks + "/3/running.lock").c_str(), O_RDWR);
    if (fd < 0 || dup2(fd, 3) != 3 || flock(3, LOCK_EX) != 0) _exit(127);
    execl("/bin/sh", "sh", "-c", "sleep 100", static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(old_tree_, old_tree_);
  ASSERT_TRUE(test::WaitFor([&] { return StartTicks(old_tree_) != ""; },
                            std::chrono::seconds(5)));
  test::WriteAll(tasks + "/3/pgid", std::to_string(old_tree_) + " " +
                                        StartTicks(old_tree_) + " " + BootId() +
                                        "\n");
  const WizqResult r = test::RunWizq(Run(wf));
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_EQ(Count("build"), 2);  // the old tree was ended, then re-run
  EXPECT_TRUE(Events("task_adopted").empty());
  for (const char* name : {"gather", "plan", "verify", "ship"}) {
    EXPECT_EQ(Count(name), 1) << name;
  }
  EXPECT_TRUE(test::WaitFor([&] { return kill(old_tree_, 0) != 0; },
                            std::chrono::seconds(5)));
  EXPECT_EQ(test::ReadAll(tasks + "/1/1.stdout"),
            "[{\"kind\":\"plan\",\"value\":{}}]\n");
  const std::string log = TaskLog(3);
  EXPECT_TRUE(test::Contains(log, "worker_lost")) << log;
  EXPECT_TRUE(test::Contains(log, "completed")) << log;
}

}  // namespace
}  // namespace wizq
