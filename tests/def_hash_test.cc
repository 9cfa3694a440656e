// DefHasher (tasks/workflow/def_hash.h): what goes into a step's def_hash, and
// when a step cannot be hashed. Every field of a step must move the hash (Nika
// #409: a field left out served stale results).
#include "tasks/workflow/def_hash.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "tasks/workflow/workflow.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;

class DefHashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Write("run.sh", "#!/bin/sh\necho []\n");
    Write("other.txt", "unrelated\n");
  }
  void Write(const std::string& name, const std::string& data) {
    fs::create_directories(fs::path(dir_.Join(name)).parent_path());
    test::WriteAll(dir_.Join(name), data);
  }
  // The def_hash of step "S" in a workflow whose step S is `step` (JSON
  // fields after "name") and whose top-level options are `options`.
  std::string Hash(const std::string& step, const std::string& options = "{}",
                   std::string* why = nullptr) {
    const std::string text =
        R"({"entrypoint":"S","options":)" + options +
        R"(,"steps":[{"name":"S",)" + step +
        R"(},{"name":"T","action":{"kind":"Command","script":"true"}}]})";
    std::unique_ptr<Workflow> wf;
    Status s = Workflow::Parse(text, "wf.json", &wf);
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) return "parse error";
    wf->set_base_dir(dir_.path());
    DefHasher h(*wf, nullptr);
    std::string w;
    std::string out = h.Hash("S", &w);
    if (why) *why = w;
    return out;
  }

  // DirectoryListing of step "S" whose script is `script` (as JSON text),
  // with `options` as the step's options.
  std::string Listing(const std::string& script,
                      const std::string& options = "{}") {
    const std::string text =
        R"({"entrypoint":"S","steps":[{"name":"S","action":{"kind":)"
        R"("Command","script":)" +
        script + R"(},"options":)" + options + R"(,"next":[]}]})";
    std::unique_ptr<Workflow> wf;
    Status s = Workflow::Parse(text, "wf.json", &wf);
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) return "parse error";
    wf->set_base_dir(dir_.path());
    return DefHasher(*wf, nullptr).DirectoryListing("S");
  }

  test::ScratchDir dir_;
};

const char kBase[] =
    R"("action":{"kind":"Command","script":"./run.sh"},"next":["T"])";

TEST_F(DefHashTest, StableForTheSameDefinitionAndFiles) {
  const std::string h = Hash(kBase);
  EXPECT_EQ(h.size(), 32u);
  EXPECT_EQ(Hash(kBase), h);
  // Options written out at their defaults are the defaults.
  EXPECT_EQ(Hash(std::string(kBase) + R"(,"options":{"max_retries":0})"), h);
  Write("other.txt", "changed\n");  // a file no script names
  EXPECT_EQ(Hash(kBase), h);
}

TEST_F(DefHashTest, EveryFieldOfTheStepMovesIt) {
  const std::string h = Hash(kBase);
  const std::string variants[] = {
      R"("action":{"kind":"Command","script":"./run.sh x"},"next":["T"])",
      R"("action":{"kind":"Command","script":"./run.sh"},"next":[])",
      std::string(kBase) + R"(,"value_schema":{"type":"object"})",
      std::string(kBase) +
          R"(,"finally":{"kind":"Command","script":"echo []"})",
      std::string(kBase) + R"(,"options":{"max_retries":2})",
      std::string(kBase) + R"(,"options":{"timeout":5})",
      std::string(kBase) + R"(,"options":{"max_concurrency":3})",
      std::string(kBase) + R"(,"options":{"retry_on_timeout":false})",
      std::string(kBase) + R"(,"options":{"retry_on_invalid_response":false})",
  };
  for (const std::string& v : variants) EXPECT_NE(Hash(v), h) << v;
  // Top-level options are in effect too.
  EXPECT_NE(Hash(kBase, R"({"max_retries":1})"), h);
}

TEST_F(DefHashTest, FilesTheScriptNamesAreHashedNotWhatItWrites) {
  const std::string s =
      R"("action":{"kind":"Command","script":"python3 steps/x.py --c=conf.yml >> out.log"},"next":[])";
  Write("steps/x.py", "print(1)\n");
  Write("conf.yml", "a: 1\n");
  Write("out.log", "");
  const std::string h = Hash(s);
  ASSERT_EQ(h.size(), 32u);
  Write("out.log", "more output\n");
  EXPECT_EQ(Hash(s), h) << "what the script writes is not definition";
  Write("steps/x.py", "print(2)\n");
  const std::string h2 = Hash(s);
  EXPECT_NE(h2, h);
  Write("conf.yml", "a: 2\n");
  EXPECT_NE(Hash(s), h2);
  // The hook's script counts as well.
  const std::string with_hook =
      std::string(kBase) +
      R"(,"finally":{"kind":"Command","script":"./done.sh"})";
  Write("done.sh", "echo []\n");
  const std::string h3 = Hash(with_hook);
  Write("done.sh", "echo [] # v2\n");
  EXPECT_NE(Hash(with_hook), h3);
}

TEST_F(DefHashTest, ReuseFilesGlobsAndDirectories) {
  const std::string s =
      std::string(kBase) + R"(,"options":{"reuse_files":["data/*.csv","lib"]})";
  Write("data/a.csv", "1\n");
  Write("lib/sub/helper.sh", "x\n");
  const std::string h = Hash(s);
  ASSERT_EQ(h.size(), 32u);
  Write("data/b.csv", "2\n");  // a new match
  const std::string h2 = Hash(s);
  EXPECT_NE(h2, h);
  Write("data/b.txt", "2\n");  // not a match
  EXPECT_EQ(Hash(s), h2);
  Write("lib/sub/helper.sh", "y\n");  // beneath a listed directory
  EXPECT_NE(Hash(s), h2);
}

TEST_F(DefHashTest, WhatCannotBeHashedGivesNoHash) {
  std::string why;
  EXPECT_EQ(Hash(std::string(kBase) +
                     R"(,"options":{"reuse_files":["nothing/*.csv"]})",
                 "{}", &why),
            "");
  EXPECT_NE(why.find("matches no file"), std::string::npos) << why;
  EXPECT_EQ(Hash(std::string(kBase) + R"(,"options":{"reuse_files":["../x"]})",
                 "{}", &why),
            "");
  EXPECT_NE(why.find("leaves the workflow's directory"), std::string::npos);
  // A symlink the script names is not followed: no hash.
  fs::create_symlink(dir_.Join("run.sh"), dir_.Join("link.sh"));
  EXPECT_EQ(
      Hash(R"("action":{"kind":"Command","script":"./link.sh"})", "{}", &why),
      "");
}

TEST_F(DefHashTest, ReuseFilesIsValidated) {
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Status s = Workflow::Parse(
      R"({"entrypoint":"S","steps":[{"name":"S","action":{"kind":"Command",
      "script":"true"},"options":{"reuse_files":["/abs",3]}}]})",
      "wf.json", &wf, &findings);
  ASSERT_FALSE(s.ok());
  ASSERT_EQ(findings.size(), 2u) << s.message();
  EXPECT_EQ(findings[0].path, "$.steps[0].options.reuse_files[0]");
  EXPECT_EQ(findings[1].path, "$.steps[0].options.reuse_files[1]");
}

TEST_F(DefHashTest, DirectoryListingFindsListingsAndGlobsOnly) {
  // What lists or globs a directory (the word shown in the run's note).
  EXPECT_EQ(Listing(R"("ls src | wc -l")"), "ls");
  EXPECT_EQ(Listing(R"("cd data && find . -type f")"), "find");
  EXPECT_EQ(Listing(R"("cat src/*.c > all")"), "src/*.c");
  EXPECT_EQ(Listing(R"("for f in dir/*; do echo $f; done")"), "dir/*");
  EXPECT_EQ(Listing(R"("wc \"$D\"/f?.txt")"), "\"$D\"/f?.txt");
  EXPECT_EQ(Listing(R"("cat conf/[ab].yml")"), "conf/[ab].yml");
  EXPECT_EQ(Listing(R"j("echo $(echo *)")j"), "*");
  // What does not: quoted text, comments, parameter and arithmetic
  // expansions, special parameters, case patterns, the [ command.
  EXPECT_EQ(Listing(R"("jq -c '[.value.items[] | {k: .}]'")"), "");
  EXPECT_EQ(Listing(R"("echo \"*.c\" 'ls'")"), "");
  EXPECT_EQ(Listing(R"("true # for f in *.c\necho []")"), "");
  EXPECT_EQ(Listing(R"("echo ${f#*/} $((2 * 3)) $* $? \\*")"), "");
  EXPECT_EQ(Listing(R"("case $x in a) echo a;; *) echo b;; esac")"), "");
  EXPECT_EQ(Listing(R"("[ -e ./run.sh ] && echo [] || echo []")"), "");
  // A step that lists reuse_files names what it reads: no listing.
  EXPECT_EQ(Listing(R"("cat src/*.c")", R"({"reuse_files":["run.sh"]})"), "");
}

}  // namespace
}  // namespace wizq
