// Incremental re-runs and --retry-failed (SPEC §11), through the real
// binary. Every task body appends one line to $WIZQ_INSTALL_DIR/ledger when
// it runs ("<role> <value>"), so a task reported as reused that secretly
// ran is caught, and the counts of run_finished and of the summary line are
// checked against what the ledger saw.
//
// The workflow (written per test into a workflow directory of its own):
//   Root {items, tag} -> Work {i} per item, Cfg {tag}; finally ./hook.sh
//   Work {i}          -> Leaf {k: i % 2} (+ v: 1 when <dir>/withv exists);
//                        finally ./hook.sh; fails while <dir>/fail-<i> exists
//   Leaf, Cfg         -> []
// With items [1,2,3]: Work 3's Leaf {k:1} is deduplicated into Work 1's.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Json;
using test::ScratchDir;
using test::WizqResult;

const char kWorkflow[] = R"({
  "entrypoint": "Root",
  "options": { "max_retries": 1 },
  "steps": [
    { "name": "Root", "action": { "kind": "Command", "script": "./root.sh" },
      "next": ["Work", "Cfg"],
      "finally": { "kind": "Command", "script": "./hook.sh" } },
    { "name": "Work", "action": { "kind": "Command", "script": "./work.sh" },
      "next": ["Leaf"],
      "finally": { "kind": "Command", "script": "./hook.sh" } },
    { "name": "Leaf", "action": { "kind": "Command", "script": "./leaf.sh" },
      "value_schema": LEAF_SCHEMA, "next": [] },
    { "name": "Cfg", "action": { "kind": "Command", "script": "./cfg.sh" },
      "next": [] }
  ]
})";

const char kLog[] =
    "#!/bin/sh\nin=$(cat)\n"
    "echo \"$ROLE $(printf '%s' \"$in\" | jq -c .value)\" "
    ">>\"$WIZQ_INSTALL_DIR/ledger\"\n";

class ReuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::BecomeSubreaper();
    wf_dir_ = scratch_.Join("wf");
    dir_ = scratch_.Join("install");
    fs::create_directories(wf_dir_);
    fs::create_directories(dir_);
    WriteWorkflow("{}");
    Script("root.sh", "root",
           "printf '%s' \"$in\" | jq -c '[(.value.items[] | {kind: \"Work\", "
           "value: {i: .}}), {kind: \"Cfg\", value: {tag: .value.tag}}]'");
    Script(
        "work.sh", "work",
        "i=$(printf '%s' \"$in\" | jq .value.i)\n"
        "[ -e \"$WIZQ_INSTALL_DIR/fail-$i\" ] && exit 3\n"
        "if [ -e \"$WIZQ_INSTALL_DIR/withv\" ]; then\n"
        "  echo \"[{\\\"kind\\\":\\\"Leaf\\\",\\\"value\\\":{\\\"k\\\":$((i % "
        "2)),\\\"v\\\":1}}]\"\nelse\n"
        "  echo \"[{\\\"kind\\\":\\\"Leaf\\\",\\\"value\\\":{\\\"k\\\":$((i % "
        "2))}}]\"\nfi");
    Script("leaf.sh", "leaf", "echo '[]'");
    Script("cfg.sh", "cfg", "echo '[]'");
    Script("hook.sh", "hook", "echo '[]'");
  }
  void TearDown() override { test::ReapStrays(); }

  void WriteWorkflow(const std::string& leaf_schema) {
    std::string wf = kWorkflow;
    wf.replace(wf.find("LEAF_SCHEMA"), 11, leaf_schema);
    test::WriteAll(wf_dir_ + "/wf.json", wf);
  }
  void Script(const std::string& name, const std::string& role,
              const std::string& body) {
    const std::string path = wf_dir_ + "/" + name;
    test::WriteAll(path, std::string(kLog).replace(
                             std::string(kLog).find("$ROLE"), 5, role) +
                             body + "\n");
    fs::permissions(path, fs::perms::owner_all);
  }
  // Changes a script's bytes, not what it does.
  void Touch(const std::string& name) {
    test::WriteAll(wf_dir_ + "/" + name,
                   test::ReadAll(wf_dir_ + "/" + name) + "# changed\n");
  }

  WizqResult Run(std::vector<std::string> flags,
                 const std::string& items = "[1,2,3]") {
    std::vector<std::string> args = {"wizq",
                                     "run",
                                     wf_dir_ + "/wf.json",
                                     "--dir",
                                     dir_,
                                     "--input",
                                     R"({"items":)" + items + R"(,"tag":"t"})"};
    args.insert(args.end(), flags.begin(), flags.end());
    return test::RunWizq(args);
  }
  // Role -> how many times a task of that role ran; clears the ledger.
  std::map<std::string, int> TakeLedger() {
    std::map<std::string, int> out;
    const std::string path = dir_ + "/ledger";
    if (!fs::exists(path)) return out;
    for (const std::string& line : test::SplitLines(test::ReadAll(path))) {
      out[line.substr(0, line.find(' '))]++;
    }
    fs::remove(path);
    return out;
  }
  static int Total(const std::map<std::string, int>& m) {
    int n = 0;
    for (const auto& [role, c] : m) n += c;
    return n;
  }
  // The last run_finished of the log.
  Json Finished() {
    Json last;
    for (const Json& e : test::ReadAudit(dir_)) {
      if (e["event"] == "run_finished") last = e;
    }
    return last;
  }
  // The run's counts against the ledger of its live tasks.
  void ExpectCounts(const WizqResult& r, int live) {
    const Json f = Finished();
    const Json st = test::StatusJson(dir_);
    const int total = static_cast<int>(st["tasks"].size());
    EXPECT_EQ(f["tasks_live"], live) << f.dump();
    EXPECT_EQ(f["tasks_reused"], total - live) << f.dump();
    EXPECT_EQ(st["reused"], total - live);
    int marked = 0;
    for (const Json& t : st["tasks"]) marked += t.contains("reused_from");
    EXPECT_EQ(marked, total - live);
    EXPECT_TRUE(test::Contains(r.err, "; " + std::to_string(total - live) +
                                          " reused, " + std::to_string(live) +
                                          " ran"))
        << r.err;
  }

  ScratchDir scratch_;
  std::string wf_dir_, dir_;
};

TEST_F(ReuseTest, NothingChangedEverythingReusedNothingRuns) {
  ASSERT_EQ(Run({}).code, 0);
  const int first = Total(TakeLedger());
  // Root, 3 Works, 2 Leaves, Cfg, the hooks of Root and the 3 Works.
  EXPECT_EQ(first, 11);
  const WizqResult r = Run({"--fresh", "--json"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_EQ(TakeLedger(), (std::map<std::string, int>{}));
  ExpectCounts(r, 0);
  EXPECT_TRUE(test::Contains(r.err,
                             "task 1 Root reused (task 1 of the "
                             "previous run)"))
      << r.err;
  int reused_events = 0;
  for (const Json& e : test::ParseJsonLines(r.out)) {
    if (e["event"] == "task_finished" && e.contains("reused_from")) {
      reused_events++;
    }
    if (e["event"] == "run_finished") {
      EXPECT_EQ(e["live"], 0);
    }
  }
  EXPECT_EQ(reused_events, first);
  // task_completed says where each result came from.
  for (const Json& e : test::ReadAudit(dir_)) {
    if (e["event"] == "task_claimed") ADD_FAILURE() << "a claim: " << e.dump();
    if (e["event"] != "task_completed") continue;
    EXPECT_TRUE(e.contains("def_hash")) << e.dump();
    EXPECT_TRUE(e["reused"].contains("run_id")) << e.dump();
  }
}

TEST_F(ReuseTest, ChangedLeafRunsLiveAndTheHooksAboveIt) {
  ASSERT_EQ(Run({}).code, 0);
  TakeLedger();
  Touch("leaf.sh");
  const WizqResult r = Run({"--fresh"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  // Both Leaves; the hooks of Root and of Works 1 and 2, whose subtrees
  // hold a live Leaf; Work 3's hook (no Leaf attached: deduplicated) and
  // every Root, Work and Cfg are reused.
  EXPECT_EQ(TakeLedger(),
            (std::map<std::string, int>{{"leaf", 2}, {"hook", 3}}));
  ExpectCounts(r, 5);
}

TEST_F(ReuseTest, ChangedMiddleStepDownstreamWithSameInputsReused) {
  ASSERT_EQ(Run({}).code, 0);
  TakeLedger();
  Touch("work.sh");
  const WizqResult r = Run({"--fresh"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  // The Works run (and so their hooks and Root's); they spawn the same
  // Leaves as before, which are reused.
  EXPECT_EQ(TakeLedger(),
            (std::map<std::string, int>{{"work", 3}, {"hook", 4}}));
  ExpectCounts(r, 7);
}

TEST_F(ReuseTest, ChangedEntryInputRunsOnlyTheConsumersOfTheChange) {
  ASSERT_EQ(Run({}).code, 0);
  TakeLedger();
  // A different input is a different run: the old one is archived.
  const WizqResult r = Run({}, "[1,2,4]");
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "archived the previous run")) << r.err;
  // Root (its input changed), Work 4 and the hooks of both; Works 1 and 2,
  // their Leaves and hooks, and Cfg are reused; Work 4's Leaf {k:0} is
  // folded into Work 2's.
  EXPECT_EQ(TakeLedger(), (std::map<std::string, int>{
                              {"root", 1}, {"work", 1}, {"hook", 2}}));
  ExpectCounts(r, 4);
}

TEST_F(ReuseTest, FromStepRunsItAndEverythingBeneathLive) {
  ASSERT_EQ(Run({}).code, 0);
  TakeLedger();
  const WizqResult r = Run({"--fresh", "--from", "Work"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_EQ(TakeLedger(), (std::map<std::string, int>{
                              {"work", 3}, {"leaf", 2}, {"hook", 4}}));
  ExpectCounts(r, 9);
}

TEST_F(ReuseTest, FromIdRunsThatTaskAndItsSubtreeLive) {
  ASSERT_EQ(Run({}).code, 0);
  TakeLedger();
  // The id, in the previous run, of Work {i: 2}.
  int64_t id = 0;
  const Json before = test::StatusJson(dir_);
  for (const Json& t : before["tasks"]) {
    if (t["type"] == "Work" && t["inputs"].value("i", 0) == 2 &&
        t["origin"] != "Finally") {
      id = t["id"];
    }
  }
  ASSERT_NE(id, 0);
  const WizqResult r = Run({"--fresh", "--from", std::to_string(id)});
  ASSERT_EQ(r.code, 0) << r.Describe();
  // Work 2, its Leaf {k:0}, its hook and Root's.
  EXPECT_EQ(TakeLedger(), (std::map<std::string, int>{
                              {"work", 1}, {"leaf", 1}, {"hook", 2}}));
  ExpectCounts(r, 4);
}

TEST_F(ReuseTest, FromAnUnknownStepIsExit2WithNothingTouched) {
  ASSERT_EQ(Run({}).code, 0);
  const auto state = test::RunState(dir_);
  const WizqResult r = Run({"--fresh", "--from", "Nope"});
  EXPECT_EQ(r.code, 2) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "--from Nope")) << r.err;
  EXPECT_EQ(test::RunState(dir_), state);
}

TEST_F(ReuseTest, NoReuseRunsEverythingLive) {
  ASSERT_EQ(Run({}).code, 0);
  const int first = Total(TakeLedger());
  const WizqResult r = Run({"--fresh", "--no-reuse"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_EQ(Total(TakeLedger()), first);
  ExpectCounts(r, first);
}

TEST_F(ReuseTest, RecordedResponseThatNoLongerValidatesRunsLive) {
  ASSERT_EQ(Run({}).code, 0);
  TakeLedger();
  // Leaf now requires "v": the Works' recorded responses fail today's
  // schema, so the Works run live (and now print v).
  WriteWorkflow(R"({"type":"object","required":["k","v"]})");
  test::WriteAll(dir_ + "/withv", "");
  const WizqResult r = Run({});  // a changed workflow: a new run
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "no longer validates")) << r.err;
  EXPECT_EQ(TakeLedger(), (std::map<std::string, int>{
                              {"work", 3}, {"leaf", 2}, {"hook", 4}}));
  ExpectCounts(r, 9);
}

TEST_F(ReuseTest, UnhashableStepRunsLiveWithANote) {
  ASSERT_EQ(Run({}).code, 0);
  TakeLedger();
  // A reuse_files glob that matches nothing: Cfg cannot be hashed.
  std::string wf = test::ReadAll(wf_dir_ + "/wf.json");
  const std::string cfg = R"("script": "./cfg.sh" },)";
  wf.replace(wf.find(cfg), cfg.size(),
             cfg + R"( "options": {"reuse_files": ["data/*.csv"]},)");
  test::WriteAll(wf_dir_ + "/wf.json", wf);
  const WizqResult r = Run({});
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "step Cfg cannot be hashed")) << r.err;
  EXPECT_EQ(TakeLedger(),
            (std::map<std::string, int>{{"cfg", 1}, {"hook", 1}}));
  // Once the glob matches, the file's content is part of the hash: the
  // next run reuses Cfg, and a change of the file runs it again.
  fs::create_directories(wf_dir_ + "/data");
  test::WriteAll(wf_dir_ + "/data/a.csv", "1\n");
  ASSERT_EQ(Run({"--fresh"}).code, 0);
  EXPECT_EQ(TakeLedger(),
            (std::map<std::string, int>{{"cfg", 1}, {"hook", 1}}));
  ASSERT_EQ(Run({"--fresh"}).code, 0);
  EXPECT_EQ(TakeLedger(), (std::map<std::string, int>{}));
  test::WriteAll(wf_dir_ + "/data/a.csv", "2\n");
  ASSERT_EQ(Run({"--fresh"}).code, 0);
  EXPECT_EQ(TakeLedger(),
            (std::map<std::string, int>{{"cfg", 1}, {"hook", 1}}));
}

// What the hash cannot see, said where it matters: a reused step whose
// script lists or globs a directory gets one note per run (not one per
// task), naming reuse_files; a step that lists reuse_files gets none.
TEST_F(ReuseTest, ReusedStepThatListsADirectoryGetsOneNoteNamingReuseFiles) {
  std::string wf = test::ReadAll(wf_dir_ + "/wf.json");
  for (const auto& [from, to] : std::map<std::string, std::string>{
           {R"("./work.sh")", R"("ls data >/dev/null 2>&1; ./work.sh")"},
           {R"("./cfg.sh")", R"(": conf/*.yml; ./cfg.sh")"}}) {
    wf.replace(wf.find(from), from.size(), to);
  }
  test::WriteAll(wf_dir_ + "/wf.json", wf);
  auto notes = [](const std::string& err) {
    std::vector<std::string> out;
    for (const std::string& l : test::SplitLines(err)) {
      if (test::Contains(l, "its script lists a directory")) out.push_back(l);
    }
    return out;
  };
  WizqResult r = Run({});
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_EQ(notes(r.err), std::vector<std::string>{}) << r.err;  // all live
  r = Run({"--fresh", "--json"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_EQ(Total(TakeLedger()), 11);  // the first run's; nothing ran now
  const std::vector<std::string> shown = notes(r.err);
  ASSERT_EQ(shown.size(), 2u) << r.err;  // three Works reused, one note
  EXPECT_EQ(shown[0],
            "wizq: step Work was reused, but its script lists a directory "
            "(`ls`) and reuse does not see the files in it: if they matter, "
            "name them in the step's options (\"reuse_files\": [\"DIR\"]) "
            "or run it with --from Work");
  EXPECT_TRUE(test::Contains(shown[1], "step Cfg was reused")) << shown[1];
  EXPECT_TRUE(test::Contains(shown[1], R"(("reuse_files": ["conf/*.yml"]))"))
      << shown[1];
  int events = 0;
  for (const Json& e : test::ParseJsonLines(r.out)) {
    events += e["event"] == "note" &&
              test::Contains(e["message"], "its script lists a directory");
  }
  EXPECT_EQ(events, 2) << r.out;
  // With reuse_files, the step names what it reads: no note.
  const std::string cfg = R"(": conf/*.yml; ./cfg.sh" },)";
  wf.replace(wf.find(cfg), cfg.size(),
             cfg + R"( "options": {"reuse_files": ["cfg.sh"]},)");
  test::WriteAll(wf_dir_ + "/wf.json", wf);
  ASSERT_EQ(Run({}).code, 0);  // a changed workflow: Cfg runs live
  r = Run({"--fresh"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  ASSERT_EQ(notes(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(test::Contains(notes(r.err)[0], "step Work")) << r.err;
}

// The reuse_files pattern README and CLI.md give for what reuse does not
// see (a helper the script runs, a directory's files, a glob), taken from
// the docs as written: it is a valid step, and a change in any of those
// files, a file added to the listed directory included, runs it again.
TEST_F(ReuseTest, DocumentedReuseFilesPatternSeesWhatTheScriptReads) {
  for (const char* doc : {"README.md", "docs/CLI.md"}) {
    SCOPED_TRACE(doc);
    const std::string text = test::ReadAll(test::SourceDir() + "/" + doc);
    const size_t said = text.find("does **not** see") != std::string::npos
                            ? text.find("does **not** see")
                            : text.find("What reuse does not see");
    ASSERT_NE(said, std::string::npos) << doc << " does not say it";
    const size_t open = text.find("```jsonc\n", said);
    ASSERT_NE(open, std::string::npos);
    const size_t from = open + 9;
    const std::string step = text.substr(from, text.find("```", from) - from);
    ASSERT_TRUE(test::Contains(step, "reuse_files")) << step;
    const ScratchDir wf, inst;
    test::WriteAll(wf.Join("wf.json"),
                   "{\"entrypoint\": \"Build\", \"steps\": [" + step + "]}");
    test::WriteAll(wf.Join("build.sh"),
                   "#!/bin/sh\necho build >>\"$WIZQ_INSTALL_DIR/ledger\"\n"
                   ". lib/helpers.sh; cat src/* conf/*.yml >/dev/null; "
                   "echo '[]'\n");
    fs::permissions(wf.Join("build.sh"), fs::perms::owner_all);
    for (const char* f : {"lib/helpers.sh", "src/a.c", "conf/app.yml"}) {
      fs::create_directories(fs::path(wf.Join(f)).parent_path());
      test::WriteAll(wf.Join(f), "1\n");
    }
    auto runs = [&] {  // whether Build ran, in a run --fresh
      const WizqResult r = test::RunWizq(
          {"wizq", "run", wf.Join("wf.json"), "--dir", inst.path(), "--fresh"});
      EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
      const bool ran = fs::exists(inst.Join("ledger"));
      fs::remove(inst.Join("ledger"));
      return ran;
    };
    EXPECT_TRUE(runs());
    EXPECT_FALSE(runs());  // nothing changed: reused
    test::WriteAll(wf.Join("src/b.c"), "new\n");
    EXPECT_TRUE(runs()) << "a file added to a listed directory";
    EXPECT_FALSE(runs());
    test::WriteAll(wf.Join("lib/helpers.sh"), "2\n");
    EXPECT_TRUE(runs()) << "a helper the script runs";
    test::WriteAll(wf.Join("conf/app.yml"), "2\n");
    EXPECT_TRUE(runs()) << "a file a glob lists";
  }
}

TEST_F(ReuseTest, KillNineInAReusingRunThenResume) {
  ASSERT_EQ(Run({}).code, 0);
  TakeLedger();
  // The Leaves change (they wait for `go`, at most 30 s): the rest is
  // reused in the first commit, then the run is killed while they run.
  Script("leaf.sh", "leaf",
         "for i in $(seq 300); do [ -e \"$WIZQ_INSTALL_DIR/go\" ] && break; "
         "sleep 0.1; done; echo '[]'");
  test::WizqProcess p({"wizq", "run", wf_dir_ + "/wf.json", "--dir", dir_,
                       "--input", R"({"items":[1,2,3],"tag":"t"})", "--fresh",
                       "--quiet"});
  ASSERT_TRUE(test::WaitFor(
      [&] {
        return fs::exists(dir_ + "/ledger") &&
               test::ReadAll(dir_ + "/ledger").find("leaf") !=
                   std::string::npos;
      },
      std::chrono::seconds(30)));
  // A power cut: wizq and the running Leaves' process groups (their shells
  // lead them; the attempt journal names them), so the Leaves are lost
  // attempts and run again rather than being adopted.
  p.Kill(SIGKILL);
  p.Wait(std::chrono::seconds(10));
  for (long pgid : test::AttemptGroups(dir_)) {
    kill(-static_cast<pid_t>(pgid), SIGKILL);
  }
  // Finish quickly now; the script stays as it was (every worker of a
  // run on a store must run the definition it started with).
  test::WriteAll(dir_ + "/go", "");
  const WizqResult r = Run({});  // resume, as a user would
  ASSERT_EQ(r.code, 0) << r.Describe();
  const std::map<std::string, int> ran = TakeLedger();
  EXPECT_EQ(ran.count("root") + ran.count("work") + ran.count("cfg"), 0u);
  EXPECT_GE(ran.at("leaf"), 2);
  EXPECT_LE(ran.at("leaf"), 4);
  const Json st = test::StatusJson(dir_);
  EXPECT_EQ(st["status"], "completed");
  int reused = 0;
  for (const Json& t : st["tasks"]) {
    EXPECT_EQ(t["state"], "done");
    if (t.contains("reused_from")) reused++;
  }
  // Root, 3 Works, Cfg and Work 3's hook (no Leaf attached beneath it);
  // the Leaves changed.
  EXPECT_EQ(reused, 6);
}

TEST_F(ReuseTest, UnfinishedRunArchivedIsAnnouncedEvenQuietAndReused) {
  Script("leaf.sh", "leaf", "sleep 30; echo '[]'");
  test::WizqProcess p({"wizq", "run", wf_dir_ + "/wf.json", "--dir", dir_,
                       "--input", R"({"items":[1,2,3],"tag":"t"})", "--quiet",
                       "--jobs", "8"});
  // Killed once everything but the (slow) Leaves has completed: the
  // Leaves run, so Root, the Works and Cfg are durably done.
  ASSERT_TRUE(test::WaitFor(
      [&] {
        if (!fs::exists(dir_ + "/ledger")) return false;
        const std::string l = test::ReadAll(dir_ + "/ledger");
        return l.find("leaf {\"k\":0}") != std::string::npos &&
               l.find("leaf {\"k\":1}") != std::string::npos &&
               l.find("cfg") != std::string::npos;
      },
      std::chrono::seconds(30)));
  p.Kill(SIGKILL);
  p.Wait(std::chrono::seconds(10));
  TakeLedger();
  Script("leaf.sh", "leaf", "echo '[]'");
  // Another input: the unfinished run is archived, said under --quiet.
  const WizqResult r = Run({"--quiet"}, "[1,2,4]");
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "the previous run had not finished"))
      << r.err;
  // What it completed is reused: Works 1 and 2 and Cfg (Root's input
  // changed, Work 4 is new, the Leaves had not finished).
  const std::map<std::string, int> ran = TakeLedger();
  EXPECT_EQ(ran.count("cfg"), 0u);
  EXPECT_EQ(ran.at("work"), 1);  // Work 4
  EXPECT_EQ(ran.at("root"), 1);
  EXPECT_EQ(ran.at("leaf"), 2);
}

TEST_F(ReuseTest, RunRecordedBeforeDefHashReusesNothingWithANote) {
  // A log written by a wizq without def_hash (a fuzz corpus log): it is
  // archived as another run, and nothing of it is reused.
  fs::create_directories(dir_ + "/.wizard");
  fs::copy_file(
      test::SourceDir() + "/fuzz/corpus/audit_log_fuzzer/basic3.audit.jsonl",
      dir_ + "/.wizard/audit.jsonl");
  const WizqResult r = Run({});
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "recorded before def_hash existed"))
      << r.err;
  EXPECT_EQ(Total(TakeLedger()), 11);
  ExpectCounts(r, 11);
}

TEST_F(ReuseTest, RetryFailedRunsOnlyTheFailedTasksThenTheirChildren) {
  test::WriteAll(dir_ + "/fail-2", "");
  WizqResult r = Run({});
  ASSERT_EQ(r.code, 1) << r.Describe();
  TakeLedger();
  // Still failing: the run ends failed again, only Work 2 ran (both
  // attempts of its fresh budget).
  r = Run({"--retry-failed"});
  EXPECT_EQ(r.code, 1) << r.Describe();
  EXPECT_EQ(TakeLedger(), (std::map<std::string, int>{{"work", 2}}));
  fs::remove(dir_ + "/fail-2");
  r = Run({"--retry-failed"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(test::Contains(r.err, "1 failed task(s) retried")) << r.err;
  // Work 2, its Leaf {k:0} (new) and its hook; Root's hook, which had run
  // without them, runs again (docs/FORMAT.md, "Re-run finally hooks").
  EXPECT_EQ(TakeLedger(), (std::map<std::string, int>{
                              {"work", 1}, {"leaf", 1}, {"hook", 2}}));
  int retried = 0;
  for (const Json& e : test::ReadAudit(dir_)) {
    if (e["event"] != "task_retried") continue;
    retried++;
    EXPECT_EQ(e["reason"], "retry_failed");
    EXPECT_EQ(e["error"], "exit_code");
  }
  EXPECT_EQ(retried, 2);
  EXPECT_EQ(Finished()["status"], "completed");
  // A completed run: nothing to retry, nothing runs.
  const auto state = test::RunState(dir_);
  r = Run({"--retry-failed"});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_EQ(TakeLedger(), (std::map<std::string, int>{}));
  EXPECT_EQ(test::RunState(dir_), state);
}

}  // namespace
}  // namespace wizq
