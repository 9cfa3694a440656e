// The small things of issue 15 that cost users time, through the real
// binary: typo suggestions with the `wizq <cmd>:` prefix, `--input-file -`,
// `wizq validate` warnings about scripts and `--graph`, messages without a
// literal "\n" at their end.
#include <sys/stat.h>

#include <string>
#include <vector>

#include "tests/integration_util.h"

namespace wizq {
namespace {

using test::Contains;
using test::DataFile;
using test::Json;
using test::RunWizq;
using test::WizqResult;

class CliUsabilityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }
  test::ScratchDir dir_;
};

TEST_F(CliUsabilityTest, UnknownCommandSuggestsTheClosest) {
  const WizqResult r = RunWizq({"wizq", "stauts", "--dir", dir_.path()});
  ASSERT_TRUE(r.exited && r.code == 2) << r.Describe();
  EXPECT_EQ(r.err.rfind("wizq: unknown command \"stauts\"", 0), 0u) << r.err;
  EXPECT_TRUE(Contains(r.err, "did you mean status?")) << r.err;
  // Nothing close: no suggestion, the list of commands.
  const WizqResult far = RunWizq({"wizq", "frobnicate"});
  ASSERT_TRUE(far.exited && far.code == 2) << far.Describe();
  EXPECT_FALSE(Contains(far.err, "did you mean")) << far.err;
  EXPECT_TRUE(Contains(far.err, "the commands are run, ")) << far.err;
}

TEST_F(CliUsabilityTest, UnknownFlagKeepsThePrefixAndSuggests) {
  const WizqResult r = RunWizq({"wizq", "run", DataFile("basic.jsonc"), "--dir",
                                dir_.path(), "--jbos", "2"});
  ASSERT_TRUE(r.exited && r.code == 2) << r.Describe();
  EXPECT_EQ(r.err.rfind("wizq run: ", 0), 0u) << r.err;
  EXPECT_TRUE(Contains(r.err, "--jbos")) << r.err;
  EXPECT_TRUE(Contains(r.err, "did you mean --jobs?")) << r.err;
  EXPECT_TRUE(Contains(r.err, "Run with --help")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/.wizard"));

  const WizqResult s = RunWizq({"wizq", "status", "--dri", dir_.path()});
  ASSERT_TRUE(s.exited && s.code == 2) << s.Describe();
  EXPECT_EQ(s.err.rfind("wizq status: ", 0), 0u) << s.err;
  EXPECT_TRUE(Contains(s.err, "did you mean --dir?")) << s.err;

  const WizqResult a = RunWizq({"wizq", "agent", "tkae"});
  ASSERT_TRUE(a.exited && a.code == 2) << a.Describe();
  EXPECT_EQ(a.err.rfind("wizq agent: ", 0), 0u) << a.err;
  EXPECT_TRUE(Contains(a.err, "did you mean take?")) << a.err;

  // --help still works and exits 0.
  const WizqResult h = RunWizq({"wizq", "run", "--help"});
  EXPECT_TRUE(h.exited && h.code == 0) << h.Describe();
  EXPECT_TRUE(Contains(h.out, "--jobs")) << h.out;
}

TEST_F(CliUsabilityTest, UsageErrorWithJsonIsAnErrorEvent) {
  const WizqResult r =
      RunWizq({"wizq", "run", DataFile("basic.jsonc"), "--json", "--qiuet"});
  ASSERT_TRUE(r.exited && r.code == 2) << r.Describe();
  const std::vector<std::string> lines = test::SplitLines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const Json j = test::ParseJsonOrNull(lines[0]);
  EXPECT_EQ(j["event"], "error") << r.out;
  EXPECT_EQ(j["code"], 2) << r.out;
  EXPECT_TRUE(Contains(j["message"], "did you mean --quiet?")) << r.out;
}

// The reading commands end with an `error` event too under --json: no run
// (exit 2), and a log that cannot be read (exit 3).
TEST_F(CliUsabilityTest, StatusAndLogErrorsWithJsonAreErrorEvents) {
  const std::string none = dir_.Join("none");
  for (std::vector<std::string> args :
       {std::vector<std::string>{"wizq", "status", "--json", "--dir", none},
        {"wizq", "log", "--json", "--dir", none},
        {"wizq", "log", "--table", "--json", "--dir", none}}) {
    const WizqResult r = RunWizq(args);
    ASSERT_TRUE(r.exited && r.code == 2) << r.Describe();
    const std::vector<std::string> lines = test::SplitLines(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    const Json j = test::ParseJsonOrNull(lines[0]);
    EXPECT_EQ(j["event"], "error") << r.out;
    EXPECT_EQ(j["code"], 2) << r.out;
    EXPECT_TRUE(Contains(j["message"], "no wizq run in")) << r.out;
    EXPECT_TRUE(Contains(r.err, "no wizq run in")) << r.err;
  }
  // A directory where the audit log should be: exit 3.
  std::filesystem::create_directories(dir_.Join("bad/.wizard/audit.jsonl"));
  const WizqResult r =
      RunWizq({"wizq", "log", "--json", "--dir", dir_.Join("bad")});
  ASSERT_TRUE(r.exited && r.code == 3) << r.Describe();
  const Json j = test::ParseJsonOrNull(test::SplitLines(r.out).at(0));
  EXPECT_EQ(j["event"], "error") << r.out;
  EXPECT_EQ(j["code"], 3) << r.out;
  EXPECT_TRUE(Contains(j["file"], "audit.jsonl")) << r.out;
}

TEST_F(CliUsabilityTest, InputFileDashReadsStdin) {
  test::WriteAll(dir_.Join("in.json"), "{\"n\": 2}\n");
  const WizqResult r =
      RunWizq({"/bin/sh", "-c",
               "exec \"$0\" run \"$1\" --dir \"$2\" --input-file - --quiet "
               "<\"$3\"",
               test::WizqPath(), DataFile("basic.jsonc"), dir_.Join("d"),
               dir_.Join("in.json")});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const Json st = test::StatusJson(dir_.Join("d"));
  EXPECT_EQ(st["counts"]["done"], 3) << st.dump();
  // The same input given with --input is the same run.
  const WizqResult again =
      RunWizq({"wizq", "run", DataFile("basic.jsonc"), "--dir", dir_.Join("d"),
               "--input", "{\"n\":2}"});
  EXPECT_TRUE(Contains(again.err, "has already finished")) << again.err;
  // Bad JSON on stdin is exit 2, naming --input.
  const WizqResult bad =
      RunWizq({"/bin/sh", "-c",
               "printf '{\"n\":\\n' | \"$0\" run \"$1\" --dir \"$2\" "
               "--input-file -",
               test::WizqPath(), DataFile("basic.jsonc"), dir_.Join("e")});
  ASSERT_TRUE(bad.exited && bad.code == 2) << bad.Describe();
  EXPECT_TRUE(Contains(bad.err, "--input")) << bad.err;
  // ... and its excerpt does not end in a literal \n.
  EXPECT_TRUE(Contains(bad.err, "it starts with: {\"n\":\n")) << bad.err;
}

// A task printing a non-JSON line: the failure message quotes it without
// the newline as a literal "\n".
TEST_F(CliUsabilityTest, MessagesDoNotEndInALiteralBackslashN) {
  test::WriteAll(
      dir_.Join("wf.json"),
      R"({"entrypoint":"A","steps":[{"name":"A","action":)"
      R"({"kind":"Command","script":"cat >/dev/null; echo not json"},)"
      R"("next":[]}]})");
  const WizqResult r = RunWizq(
      {"wizq", "run", dir_.Join("wf.json"), "--dir", dir_.Join("d"), "--json"});
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "it starts with: not json\n")) << r.err;
  EXPECT_FALSE(Contains(r.err, "\\n")) << r.err;
  EXPECT_FALSE(Contains(r.out, "not json\\n")) << r.out;
}

// Common scripts that can run draw no warning: a shebang or comment line
// first (a comment is not a command; the next line's first word is), an
// interpreter found in PATH with a relative script, `bash -c`, arguments.
TEST_F(CliUsabilityTest, ValidateDoesNotWarnAboutScriptsThatCanStart) {
  const std::string wf = dir_.Join("wf.json");
  test::WriteAll(
      wf,
      R"({"entrypoint":"A","steps":[)"
      R"({"name":"A","action":{"kind":"Command","script":"#!/bin/sh\n./ok.sh"},"next":["B","C","D","E"]},)"
      R"({"name":"B","action":{"kind":"Command","script":"# runs steps/a.py\n  ./ok.sh arg"},"next":[]},)"
      R"({"name":"C","action":{"kind":"Command","script":"python3 steps/a.py"},"next":[]},)"
      R"({"name":"D","action":{"kind":"Command","script":"bash -c './ok.sh'"},"next":[]},)"
      R"({"name":"E","action":{"kind":"Command","script":"#!/bin/sh\n# x/y\n./missing.sh"},"next":[]}]})");
  test::WriteAll(dir_.Join("ok.sh"), "#!/bin/sh\n");
  chmod(dir_.Join("ok.sh").c_str(), 0755);
  const WizqResult r = RunWizq({"wizq", "validate", wf});
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  const std::vector<std::string> lines = test::SplitLines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_TRUE(Contains(lines[0],
                       "$.steps[4].action.script: ./missing.sh "
                       "does not exist"))
      << r.err;
}

// `wizq validate` warns about relative script paths that cannot run,
// resolved against the workflow file's directory, and exits 0.
TEST_F(CliUsabilityTest, ValidateWarnsAboutScriptsThatCannotStart) {
  const std::string wf = dir_.Join("wf.json");
  test::WriteAll(
      wf,
      R"({"entrypoint":"A","steps":[)"
      R"({"name":"A","action":{"kind":"Command","script":"./missing.sh x"},"next":["B","C","D"]},)"
      R"({"name":"B","action":{"kind":"Command","script":"X=1 bin/plain arg"},"next":[],)"
      R"("finally":{"kind":"Command","script":"./ok.sh"}},)"
      R"({"name":"C","action":{"kind":"Command","script":"cat >/dev/null; echo []"},"next":[]},)"
      R"({"name":"D","action":{"kind":"Command","script":"./bin"},"next":[]}]})");
  std::filesystem::create_directories(dir_.Join("bin"));
  test::WriteAll(dir_.Join("bin/plain"), "#!/bin/sh\n");
  test::WriteAll(dir_.Join("ok.sh"), "#!/bin/sh\n");
  chmod(dir_.Join("ok.sh").c_str(), 0755);
  // Run from elsewhere: paths are relative to the workflow's directory.
  test::SpawnOptions o;
  o.cwd = "/";
  const WizqResult r = RunWizq({"wizq", "validate", wf}, o);
  ASSERT_TRUE(r.exited && r.code == 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "OK (4 steps")) << r.out;
  const std::vector<std::string> lines = test::SplitLines(r.err);
  ASSERT_EQ(lines.size(), 3u) << r.err;
  EXPECT_TRUE(Contains(lines[0],
                       "$.steps[0].action.script: ./missing.sh "
                       "does not exist"))
      << r.err;
  EXPECT_TRUE(Contains(lines[0], dir_.path())) << r.err;
  EXPECT_TRUE(Contains(lines[1],
                       "$.steps[1].action.script: bin/plain is not "
                       "executable"))
      << r.err;
  EXPECT_TRUE(Contains(lines[2],
                       "$.steps[3].action.script: ./bin is a "
                       "directory"))
      << r.err;
  for (const std::string& l : lines) {
    EXPECT_EQ(l.rfind(wf + ": warning: ", 0), 0u) << l;
  }
}

TEST_F(CliUsabilityTest, ValidateGraphPrintsTextAndDot) {
  const WizqResult t =
      RunWizq({"wizq", "validate", DataFile("finally.jsonc"), "--graph"});
  ASSERT_TRUE(t.exited && t.code == 0) << t.Describe();
  const std::vector<std::string> lines = test::SplitLines(t.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0],
            "Root (Command) [entrypoint] -> Flaky, Quick, Bad, A; finally: "
            "Command")
      << t.out;
  EXPECT_TRUE(Contains(t.out, "\nA (Command) -> B; finally: Command\n"))
      << t.out;
  EXPECT_TRUE(Contains(t.out, "\nnot reachable from Root through next"))
      << t.out;
  EXPECT_TRUE(Contains(t.out, "\nZ (Command) -> (end)\n")) << t.out;
  EXPECT_TRUE(Contains(t.err, "OK (10 steps")) << "OK goes to stderr";

  const WizqResult d = RunWizq(
      {"wizq", "validate", DataFile("finally.jsonc"), "--format", "dot"});
  ASSERT_TRUE(d.exited && d.code == 0) << d.Describe();
  EXPECT_EQ(d.out.rfind("digraph workflow {\n", 0), 0u) << d.out;
  EXPECT_TRUE(Contains(d.out, "  \"Root\" -> \"Flaky\";\n")) << d.out;
  EXPECT_TRUE(Contains(d.out, "  \"A\" -> \"B\";\n")) << d.out;
  EXPECT_TRUE(Contains(d.out,
                       "\"Root\" [label=\"Root\\nCommand\", "
                       "style=bold];"))
      << d.out;
  EXPECT_TRUE(Contains(d.out, "\"Root\" -> \"Root (finally)\" [style=dashed]"))
      << d.out;
  EXPECT_EQ(d.out.substr(d.out.size() - 2), "}\n");
  // Balanced quotes on every line (a valid DOT statement each).
  for (const std::string& l : test::SplitLines(d.out)) {
    size_t quotes = 0;
    for (size_t i = 0; i < l.size(); i++) {
      if (l[i] == '\\') {
        i++;
      } else if (l[i] == '"') {
        quotes++;
      }
    }
    EXPECT_EQ(quotes % 2, 0u) << l;
  }

  const WizqResult bad = RunWizq(
      {"wizq", "validate", DataFile("finally.jsonc"), "--format", "svg"});
  EXPECT_TRUE(bad.exited && bad.code == 2) << bad.Describe();
  EXPECT_EQ(bad.err.rfind("wizq validate: ", 0), 0u) << bad.err;

  const WizqResult invalid = RunWizq(
      {"wizq", "validate", DataFile("invalid_workflow.jsonc"), "--graph"});
  EXPECT_TRUE(invalid.exited && invalid.code == 2) << invalid.Describe();
  EXPECT_EQ(invalid.out, "") << "no graph of an invalid workflow";
}

}  // namespace
}  // namespace wizq
