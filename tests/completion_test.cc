// Shell completion through the real binary (cli/docgen/completion.h): what
// `wizq __complete SHELL WORD...` prints for commands, options, fixed
// values, workflow files, step names and the tasks waiting for an answer,
// that it prints nothing on an error, gives up after 200 ms and never
// writes to the run; and the scripts `wizq completion SHELL` prints.
// tests/packaging/completion_shells.sh drives the scripts in real shells.
#include <sys/file.h>

#include <string>
#include <vector>

#include "tests/integration_util.h"

namespace wizq {
namespace {

using test::Contains;
using test::RunWizq;
using test::WizqResult;

// Two confirm gates without a default: off a terminal the run pauses with
// both waiting (tasks 2 and 3).
constexpr char kGates[] = R"({
  "entrypoint": "Start",
  "steps": [
    {"name": "Start", "next": ["Ask"],
     "action": {"kind": "Command",
                "script": "echo '[{\"kind\": \"Ask\", \"value\": 1}, {\"kind\": \"Ask\", \"value\": 2}]'"}},
    {"name": "Ask", "next": [],
     "action": {"kind": "Prompt", "mode": "confirm", "message": "Go on?"}}
  ]
})";

class CompletionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }

  // What `wizq __complete bash WORDS...` prints; it must exit 0 with
  // nothing on stderr.
  std::string Complete(const std::vector<std::string>& words) {
    std::vector<std::string> args = {"wizq", "__complete", "bash"};
    args.insert(args.end(), words.begin(), words.end());
    const WizqResult r = RunWizq(args, {dir_.path(), {}, false});
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
    EXPECT_EQ(r.err, "");
    return r.out;
  }

  // A run of kGates in dir_/run, paused with tasks 2 and 3 waiting.
  void PausedRun() {
    test::WriteAll(dir_.Join("gates.json"), kGates);
    const WizqResult r = RunWizq(
        {"wizq", "run", dir_.Join("gates.json"), "--dir", dir_.Join("run")});
    ASSERT_TRUE(r.exited && r.code == 4) << r.Describe();
  }

  test::ScratchDir dir_;
};

const std::string kInstaller =
    test::SourceDir() + "/examples/installer/workflow.jsonc";

TEST_F(CompletionTest, CommandsAndSubcommands) {
  EXPECT_EQ(Complete({"ru"}),
            "words\nrun\tRun, resume or join a workflow run\nruns\tList the "
            "runs in a store: status, counts, live workers\n");
  const std::string all = Complete({""});
  for (const char* c : {"run\t", "answer\t", "status\t", "agent\t",
                        "crashtest\t", "completion\t"}) {
    EXPECT_TRUE(Contains(all, std::string("\n") + c)) << c << "\n" << all;
  }
  EXPECT_FALSE(Contains(all, "__")) << all;  // the hidden entry points
  const std::string agent = Complete({"agent", ""});
  for (const char* c : {"take", "heartbeat", "done", "fail", "serve"}) {
    EXPECT_TRUE(Contains(agent, std::string("\n") + c + "\t")) << agent;
  }
}

TEST_F(CompletionTest, OptionsOfTheCommand) {
  EXPECT_EQ(Complete({"run", "--ha"}),
            "words\n--halt\tsoon|now,fail=N: stop after N failed tasks (soon: "
            "let the running ones finish; now: stop them, uncounted); the "
            "rest stays pending\n");
  const std::string status = Complete({"status", "--"});
  EXPECT_TRUE(Contains(status, "\n--state\t")) << status;
  EXPECT_FALSE(Contains(status, "--halt")) << status;
  // After a subcommand's options, still that subcommand's.
  EXPECT_TRUE(
      Contains(Complete({"agent", "take", "--dir", ".", "--w"}), "\n--wait\t"));
  // A command without positionals lists its options on an empty word.
  EXPECT_TRUE(Contains(Complete({"prune", ""}), "\n--dry-run\t"));
}

TEST_F(CompletionTest, ValuesFromAFixedSet) {
  EXPECT_EQ(Complete({"status", "--state", ""}),
            "words\npending\nin_progress\ndone\nfailed\n");
  EXPECT_EQ(Complete({"validate", "wf.json", "--format", "d"}), "words\ndot\n");
  EXPECT_EQ(Complete({"export", "--format", "barnum-"}),
            "words\nbarnum-v2\nbarnum-v1\n");
  EXPECT_EQ(Complete({"run", "wf.json", "--halt", ""}),
            "words\nsoon,fail=\nnow,fail=\nnever\n");
  EXPECT_EQ(Complete({"completion", ""}), "words\nbash\nzsh\nfish\n");
  // --format=VALUE as zsh and fish pass it, and as bash splits it.
  EXPECT_EQ(Complete({"validate", "wf.json", "--format=t"}),
            "words\n--format=text\n");
  EXPECT_EQ(Complete({"validate", "wf.json", "--format", "="}),
            "words\ntext\ndot\n");
  EXPECT_EQ(Complete({"validate", "wf.json", "--format", "=", "d"}),
            "words\ndot\n");
}

TEST_F(CompletionTest, FilesAndDirectories) {
  EXPECT_EQ(Complete({"run", ""}), "workflow\n");
  EXPECT_EQ(Complete({"validate", "ex"}), "workflow\n");
  EXPECT_EQ(Complete({"run", "wf.json", "--dir", ""}), "dirs\n");
  EXPECT_EQ(Complete({"run", "wf.json", "--input-file", ""}), "files\n");
  EXPECT_EQ(Complete({"report", "-o", ""}), "files\n");
  EXPECT_EQ(Complete({"agent", "serve", "--", ""}), "files\n");
  // A value without a known kind (JSON, an id): nothing, not file names.
  EXPECT_EQ(Complete({"run", "wf.json", "--input", ""}), "");
}

TEST_F(CompletionTest, StepsOfTheWorkflowOnTheCommandLine) {
  EXPECT_EQ(Complete({"run", kInstaller, "--from", ""}),
            "words\nReadManifest\tCommand step\nConfirmInstall\tPrompt step\n"
            "StartInstall\tCommand step\nDownload\tCommand step\nVerify\t"
            "Command step\nUnpack\tCommand step\nConfigure\tCommand step\n");
  EXPECT_EQ(Complete({"run", "--dir", ".", kInstaller, "--from", "Ve"}),
            "words\nVerify\tCommand step\n");
  // bash passes the word as typed.
  EXPECT_EQ(Complete({"run", "'" + kInstaller + "'", "--from", "Ve"}),
            "words\nVerify\tCommand step\n");
}

TEST_F(CompletionTest, StepsOfTheRunInDir) {
  PausedRun();
  EXPECT_EQ(Complete({"status", "--dir", "run", "--step", ""}),
            "words\nStart\tCommand step\nAsk\tPrompt step\n");
  EXPECT_EQ(Complete({"agent", "take", "--dir=run", "--step", "A"}),
            "words\nAsk\tPrompt step\n");
}

TEST_F(CompletionTest, TasksWaitingForAnAnswer) {
  PausedRun();
  EXPECT_EQ(Complete({"answer", "--dir", "run", ""}),
            "words\n2=\tAsk: Go on?\n3=\tAsk: Go on?\n");
  EXPECT_EQ(Complete({"answer", "--dir", "run", "3"}),
            "words\n3=\tAsk: Go on?\n");
  EXPECT_EQ(Complete({"run", "gates.json", "--dir", "run", "--answer", ""}),
            "words\n2=\tAsk: Go on?\n3=\tAsk: Go on?\n");
  // Answered: no longer listed.
  const WizqResult a =
      RunWizq({"wizq", "answer", "--dir", dir_.Join("run"), "2=yes"});
  ASSERT_TRUE(a.exited && a.code == 0) << a.Describe();
  EXPECT_EQ(Complete({"answer", "--dir", "run", ""}),
            "words\n3=\tAsk: Go on?\n");
}

TEST_F(CompletionTest, NothingOnAnError) {
  // No run, no directory, a workflow that does not parse, a corrupt run.
  EXPECT_EQ(Complete({"answer", ""}), "");
  EXPECT_EQ(Complete({"answer", "--dir", "/nonexistent/wizq", ""}), "");
  test::WriteAll(dir_.Join("bad.json"), "{\"steps\": [");
  EXPECT_EQ(Complete({"run", "bad.json", "--from", ""}), "");
  PausedRun();
  test::WriteAll(dir_.Join("run/.wizard/audit.jsonl"), "not json\n");
  std::filesystem::remove(dir_.Join("run/.wizard/queue.json"));
  EXPECT_EQ(Complete({"answer", "--dir", "run", ""}), "");
  // An unknown command: no completion, no error.
  EXPECT_EQ(Complete({"frobnicate", "--x", ""}), "");
  EXPECT_EQ(Complete({"agent", "tkae", ""}), "");
}

// The run is read as `wizq status` reads it: no worker joins, nothing in
// .wizard/ changes.
TEST_F(CompletionTest, ReadsTheRunWithoutWriting) {
  PausedRun();
  const std::string wizard = dir_.Join("run/.wizard");
  const std::string audit = test::ReadAll(wizard + "/audit.jsonl");
  const std::string queue = test::ReadAll(wizard + "/queue.json");
  auto listing = [&] {
    std::vector<std::string> out;
    for (const auto& e :
         std::filesystem::recursive_directory_iterator(wizard)) {
      out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  const std::vector<std::string> before = listing();
  EXPECT_TRUE(Contains(Complete({"answer", "--dir", "run", ""}), "2="));
  EXPECT_TRUE(
      Contains(Complete({"status", "--dir", "run", "--step", ""}), "Ask"));
  EXPECT_EQ(test::ReadAll(wizard + "/audit.jsonl"), audit);
  EXPECT_EQ(test::ReadAll(wizard + "/queue.json"), queue);
  EXPECT_EQ(listing(), before);
}

// A run whose lock is held (a long transaction, a stuck process) cannot
// make Tab hang: after 200 ms the helper gives up and prints nothing.
TEST_F(CompletionTest, GivesUpAfter200Milliseconds) {
  PausedRun();
  const std::string lock = dir_.Join("run/.wizard/lock");
  const int fd = open(lock.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  const test::Clock::time_point start = test::Clock::now();
  const WizqResult r =
      RunWizq({"wizq", "__complete", "bash", "answer", "--dir", "run", ""},
              {dir_.path(), {}, false}, test::seconds(20));
  const auto elapsed = test::Clock::now() - start;
  close(fd);
  EXPECT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  // 200 ms plus the start of the process, on a loaded machine.
  EXPECT_LT(elapsed, test::seconds(5));
  // Commands and options do not read the run: they still complete.
  EXPECT_EQ(Complete({"answer", "--dir", "run", "--d"}),
            "words\n--dir\tInstall directory; with --store, the machine's "
            "local working directory (default: .)\n");
}

TEST_F(CompletionTest, CompletionCommandPrintsTheScripts) {
  const WizqResult bash = RunWizq({"wizq", "completion", "bash"});
  ASSERT_TRUE(bash.exited && bash.code == 0) << bash.Describe();
  EXPECT_TRUE(Contains(bash.out, "complete -F _wizq wizq")) << bash.out;
  EXPECT_TRUE(Contains(bash.out, "__complete bash")) << bash.out;
  const WizqResult zsh = RunWizq({"wizq", "completion", "zsh"});
  ASSERT_TRUE(zsh.exited && zsh.code == 0) << zsh.Describe();
  EXPECT_EQ(zsh.out.rfind("#compdef wizq\n", 0), 0u) << zsh.out;
  const WizqResult fish = RunWizq({"wizq", "completion", "fish"});
  ASSERT_TRUE(fish.exited && fish.code == 0) << fish.Describe();
  EXPECT_TRUE(Contains(fish.out, "complete -c wizq")) << fish.out;
  const WizqResult tcsh = RunWizq({"wizq", "completion", "tcsh"});
  ASSERT_TRUE(tcsh.exited && tcsh.code == 2) << tcsh.Describe();
  EXPECT_TRUE(Contains(tcsh.err, "wizq completion: ")) << tcsh.err;
  EXPECT_EQ(tcsh.out, "");
}

}  // namespace
}  // namespace wizq
