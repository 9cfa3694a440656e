// The human gate under kill -9 and on a real terminal (SPEC §10).
//
// GateSweep: for each crash point of the gate's lifecycle (util/crash_point.h:
// gate.*, answer.*) and n = 1..2, the sequence a user goes through —
// `wizq run` (pauses, exit 4), `wizq answer` or `wizq run --answer`
// (resumes), `wizq run` — runs with WIZQ_CRASH_AT armed; a command that
// crashes is run again, the same way, until it gives its expected exit
// code. At the end: the run completed, the answer was recorded once and is
// the one given, Install got it exactly once, every Work task ran once
// per crash at most, and the recorded "no" cannot be turned into a "yes".
//
// Terminal: wizq runs on a pseudo-terminal (forkpty) and the test answers
// its confirm, input and choice questions as a person would, including
// replies it cannot read; end of input pauses; a kill at "prompt.asking"
// (a question on the screen) loses nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/prompt_util.h"
#include "util/crash_point.h"

namespace wizq {
namespace {

using test::Json;
using test::ScratchDir;
using test::WizqResult;

const char kSweepRoot[] =
    R"([{"kind":"Work","value":{"i":1}},{"kind":"Ask","value":{"n":1}},)"
    R"({"kind":"Work","value":{"i":2}}])";

test::SpawnOptions Armed(const std::string& spec) {
  test::SpawnOptions o;
  o.env = {{"WIZQ_CRASH_AT", spec}};
  return o;
}

class GateSweep : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
};

// Runs `args` armed with `spec` until it exits with `want` (a crash exits
// 86 and is run again, unarmed). Returns how many times it crashed.
int RunUntil(const std::vector<std::string>& args, const std::string& spec,
             int want) {
  int crashes = 0;
  WizqResult r = test::RunWizq(args, Armed(spec));
  for (int i = 0; i < 3 && r.exited && r.code == kCrashExitCode; i++) {
    crashes++;
    r = test::RunWizq(args, Armed(""));
  }
  EXPECT_TRUE(r.exited && r.code == want)
      << args[1] << " (" << spec << "): " << r.Describe();
  return crashes;
}

TEST_P(GateSweep, Point) {
  const std::string point = GetParam();
  int reached = 0;
  for (int n = 1; n <= 2; n++) {
    SCOPED_TRACE(point + ":" + std::to_string(n));
    ScratchDir scratch;
    const std::string wf = scratch.Join("wf.json");
    const std::string dir = scratch.Join("install");
    test::WriteAll(wf, test::GateWorkflow(kSweepRoot, test::kConfirmAsk));
    const std::string spec = point + ":" + std::to_string(n);
    const std::vector<std::string> run = {"wizq", "run", wf, "--dir", dir};
    int crashes = RunUntil(run, spec, 4);
    if (point == "answer.after_commit") {
      crashes += RunUntil({"wizq", "answer", "--dir", dir, "Ask=no"}, spec, 0);
      crashes += RunUntil(run, spec, 0);
    } else {
      std::vector<std::string> answered = run;
      answered.insert(answered.end(), {"--answer", "3=no"});
      crashes += RunUntil(answered, spec, 0);
    }
    reached += crashes > 0 ? 1 : 0;
    // Everything once, the answer once and as given.
    EXPECT_EQ(test::StatusJson(dir)["status"], "completed");
    const std::vector<Json> answers = test::Events(dir, "task_answered");
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_EQ(answers[0]["answer"], false);
    const std::vector<Json> installs = test::InstallLines(dir);
    ASSERT_EQ(installs.size(), 1u);
    EXPECT_EQ(installs[0]["value"]["answer"], false);
    const std::string ledger = test::ReadAll(dir + "/ledger");
    EXPECT_EQ(ledger.size(), 14u) << ledger;  // "work 2\nwork 4\n"
    WizqResult yes =
        test::RunWizq({"wizq", "run", wf, "--dir", dir, "--answer", "Ask=yes"});
    EXPECT_TRUE(yes.exited && yes.code == 2) << yes.Describe();
    test::ReapStrays();
  }
  EXPECT_GT(reached, 0) << point << " was never reached";
}

std::vector<const char*> GatePoints() {
  std::vector<const char*> out;
  for (const char* p : kCrashPoints) {
    if (IsGateCrashPoint(p) && std::string(p) != "prompt.asking") {
      out.push_back(p);
    }
  }
  return out;
}

std::string PointName(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(GatePoints, GateSweep,
                         ::testing::ValuesIn(GatePoints()), PointName);

// --- on a terminal
// -------------------------------------------------------------

// wizq on a pseudo-terminal: stdin, stdout and stderr are its slave side.
class Tty {
 public:
  Tty(const std::vector<std::string>& args, const std::string& crash_at = "") {
    std::vector<std::string> a = args;
    a[0] = test::WizqPath();
    pid_ = forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      if (!crash_at.empty()) setenv("WIZQ_CRASH_AT", crash_at.c_str(), 1);
      std::vector<char*> argv;
      for (std::string& s : a) argv.push_back(s.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Tty() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      Exit();
    }
    if (master_ >= 0) close(master_);
  }
  // Reads until `text` has appeared after what earlier calls consumed.
  bool Expect(const std::string& text, int timeout_ms = 20000) {
    for (int waited = 0; waited < timeout_ms;) {
      const size_t at = seen_.find(text, consumed_);
      if (at != std::string::npos) {
        consumed_ = at + text.size();
        return true;
      }
      struct pollfd p = {master_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) {
        waited += 50;
        continue;
      }
      char buf[1024];
      const ssize_t n = read(master_, buf, sizeof(buf));
      if (n <= 0) return false;  // the child is gone
      seen_.append(buf, static_cast<size_t>(n));
    }
    return false;
  }
  void Send(const std::string& text) {
    ASSERT_EQ(write(master_, text.data(), text.size()),
              static_cast<ssize_t>(text.size()));
  }
  // Waits for the exit code (reading what is left meanwhile).
  int Exit() {
    for (int i = 0; i < 6000; i++) {  // 60 s at most
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        Expect("\x01never\x01", 100);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      if (!Expect("\x01never\x01", 10)) usleep(10000);
    }
    return -2;
  }
  const std::string& seen() const { return seen_; }

 private:
  pid_t pid_ = -1;
  int master_ = -1;
  bool exited_ = false;
  std::string seen_;
  size_t consumed_ = 0;
};

class PromptTtyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    wf_ = scratch_.Join("wf.json");
    dir_ = scratch_.Join("install");
  }
  std::vector<Json> Installs() { return test::InstallLines(dir_); }
  std::vector<std::string> Args() {
    return {"wizq", "run", wf_, "--dir", dir_};
  }
  ScratchDir scratch_;
  std::string wf_, dir_;
};

// Three questions, one at a time, answered on the terminal; unreadable
// replies are asked again.
TEST_F(PromptTtyTest, AnswersConfirmInputAndChoice) {
  test::WriteAll(
      wf_, test::GateWorkflow(
               R"([{"kind":"Ask","value":{"n":1}},{"kind":"Pick","value":{}},)"
               R"({"kind":"Work","value":{"i":1}}])",
               R"("mode": "input", "message": "Site name?",)"
               R"( "answer_schema": {"type": "string", "minLength": 3})"));
  Tty tty(Args());
  // The questions come in task order: Ask (2), then Pick (3).
  ASSERT_TRUE(tty.Expect("Site name? ")) << tty.seen();
  tty.Send("ab\n");  // too short for the answer_schema: asked again
  ASSERT_TRUE(tty.Expect("\n? ")) << tty.seen();
  tty.Send("acme\n");
  ASSERT_TRUE(tty.Expect("choose 1-2: ")) << tty.seen();
  tty.Send("3\n");  // not a choice: asked again
  ASSERT_TRUE(tty.Expect("please type one of")) << tty.seen();
  tty.Send("2\n");
  EXPECT_EQ(tty.Exit(), 0) << tty.seen();
  std::multiset<std::string> got;
  for (const Json& i : Installs()) got.insert(i["value"]["answer"].dump());
  EXPECT_EQ(got, (std::multiset<std::string>{"\"acme\"", "\"full\""}));
  for (const Json& e : test::Events(dir_, "task_answered")) {
    EXPECT_EQ(e["source"], "terminal");
  }
}

TEST_F(PromptTtyTest, ConfirmTakesYesNoInAnyCaseAndEmptyMeansNo) {
  for (const std::string reply : {"YES", "", "n", "True"}) {
    SCOPED_TRACE("reply \"" + reply + "\"");
    ScratchDir s;
    wf_ = s.Join("wf.json");
    dir_ = s.Join("install");
    test::WriteAll(wf_, test::GateWorkflow(R"([{"kind":"Ask","value":{}}])",
                                           test::kConfirmAsk));
    Tty tty(Args());
    ASSERT_TRUE(tty.Expect("Install into the directory? [y/N] ")) << tty.seen();
    tty.Send("maybe\n");  // unreadable: asked again
    ASSERT_TRUE(tty.Expect("please answer y or n")) << tty.seen();
    tty.Send(reply + "\n");
    EXPECT_EQ(tty.Exit(), 0) << tty.seen();
    ASSERT_EQ(Installs().size(), 1u);
    EXPECT_EQ(Installs()[0]["value"]["answer"],
              reply == "YES" || reply == "True");
  }
}

// Three unreadable replies, or the end of input: the durable pause stands
// once everything else has run.
TEST_F(PromptTtyTest, ThreeMissesOrEndOfInputPause) {
  test::WriteAll(
      wf_, test::GateWorkflow(
               R"([{"kind":"Ask","value":{}},{"kind":"Work","value":{"i":1}}])",
               test::kConfirmAsk));
  {
    Tty tty(Args());
    for (int i = 0; i < 3; i++) {
      ASSERT_TRUE(tty.Expect("? ")) << tty.seen();
      tty.Send("what\n");
    }
    EXPECT_EQ(tty.Exit(), 4) << tty.seen();
    EXPECT_TRUE(test::Contains(tty.seen(), "--answer 2=yes")) << tty.seen();
  }
  EXPECT_EQ(test::ReadAll(dir_ + "/ledger"), "work 3\n");
  EXPECT_EQ(test::StatusJson(dir_)["status"], "paused");
  {
    Tty tty(Args());
    ASSERT_TRUE(tty.Expect("[y/N] ")) << tty.seen();
    tty.Send("\x04");  // end of input
    EXPECT_EQ(tty.Exit(), 4) << tty.seen();
  }
  EXPECT_EQ(test::Events(dir_, "task_answered").size(), 0u);
  Tty tty(Args());
  ASSERT_TRUE(tty.Expect("[y/N] ")) << tty.seen();
  tty.Send("y\n");
  EXPECT_EQ(tty.Exit(), 0) << tty.seen();
  EXPECT_EQ(test::ReadAll(dir_ + "/ledger"), "work 3\n") << "work ran again";
}

// Killed while a question is on the screen: nothing was recorded, the
// question is asked again; once answered, it is never asked again.
TEST_F(PromptTtyTest, KilledWhileAskingAsksAgain) {
  test::WriteAll(wf_, test::GateWorkflow(R"([{"kind":"Ask","value":{}}])",
                                         test::kConfirmAsk));
  {
    Tty tty(Args(), "prompt.asking:1");
    EXPECT_EQ(tty.Exit(), kCrashExitCode) << tty.seen();
  }
  {
    Tty tty(Args(), "run.before_result_commit:1");
    ASSERT_TRUE(tty.Expect("[y/N] ")) << tty.seen();
    tty.Send("y\n");
    EXPECT_EQ(tty.Exit(), kCrashExitCode) << tty.seen();
  }
  EXPECT_EQ(test::Events(dir_, "task_answered").size(), 0u);
  {
    Tty tty(Args(), "run.after_result_commit:1");
    ASSERT_TRUE(tty.Expect("[y/N] ")) << tty.seen();
    tty.Send("y\n");
    EXPECT_EQ(tty.Exit(), kCrashExitCode) << tty.seen();
  }
  EXPECT_EQ(test::Events(dir_, "task_answered").size(), 1u);
  Tty tty(Args());
  EXPECT_EQ(tty.Exit(), 0) << tty.seen();
  EXPECT_FALSE(test::Contains(tty.seen(), "[y/N]")) << "asked twice";
  ASSERT_EQ(Installs().size(), 1u);
  EXPECT_EQ(Installs()[0]["value"]["answer"], true);
}

}  // namespace
}  // namespace wizq
