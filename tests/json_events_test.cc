// `wizq run --json` as a contract (docs/CLI.md, "--json events"): the real
// binary is run through every outcome a run can have, each line of stdout
// is parsed, and each event is checked against the table in docs/CLI.md,
// read from the doc itself, so an event or field that is printed but not
// documented (or documented but never printed) fails here.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/integration_util.h"

namespace wizq {
namespace {

using test::Contains;
using test::DataFile;
using test::Json;
using test::WizqProcess;
using test::WizqResult;

struct FieldSpec {
  std::string type;  // string, integer, boolean, array, any
  bool optional = false;
};
// Event name -> field -> spec; "" holds the fields of every event.
using EventSpecs = std::map<std::string, std::map<std::string, FieldSpec>>;

std::string Unquote(std::string s) {
  const size_t a = s.find_first_not_of(" `");
  const size_t b = s.find_last_not_of(" `");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The table between the json-events markers of docs/CLI.md.
EventSpecs ReadSpecs() {
  std::ifstream in(test::SourceDir() + "/docs/CLI.md");
  EventSpecs specs;
  bool inside = false;
  std::string line;
  while (std::getline(in, line)) {
    if (Contains(line, "<!-- json-events:begin")) inside = true;
    if (Contains(line, "<!-- json-events:end")) break;
    if (!inside || line.rfind("| ", 0) != 0) continue;
    std::vector<std::string> cells;
    size_t at = 1;
    while (true) {
      const size_t bar = line.find(" | ", at);
      if (bar == std::string::npos) break;
      cells.push_back(Unquote(line.substr(at, bar - at)));
      at = bar + 2;
    }
    if (cells.size() < 4 || cells[0] == "event" || cells[0] == "---") continue;
    const std::string event = cells[0] == "(every event)" ? "" : cells[0];
    specs[event][cells[1]] = {cells[2], cells[3] == "optional"};
  }
  return specs;
}

bool HasType(const Json& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "boolean") return v.is_boolean();
  if (type == "array") return v.is_array();
  return type == "any";
}

class JsonEventsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }

  void SetUp() override {
    specs_ = ReadSpecs();
    ASSERT_GE(specs_.size(), 5u) << "the table in docs/CLI.md was not found";
  }

  // Checks every line of `out` against the table; returns the events.
  std::vector<Json> Check(const std::string& out) {
    std::vector<Json> events;
    for (const std::string& line : test::SplitLines(out)) {
      const Json j = test::ParseJsonOrNull(line);
      EXPECT_TRUE(j.is_object()) << "not a JSON object: " << line;
      if (!j.is_object()) continue;
      EXPECT_EQ(line.rfind("{\"event\":", 0), 0u) << "event first: " << line;
      const std::string name = j.value("event", "");
      EXPECT_TRUE(specs_.count(name) && !name.empty())
          << "event \"" << name
          << "\" is not documented in docs/CLI.md: " << line;
      seen_.insert(name);
      std::map<std::string, FieldSpec> fields = specs_[""];
      for (const auto& [k, v] : specs_[name]) fields[k] = v;
      for (const auto& [k, spec] : fields) {
        if (!j.contains(k)) {
          EXPECT_TRUE(spec.optional)
              << name << " lacks `" << k << "`: " << line;
          continue;
        }
        EXPECT_TRUE(HasType(j[k], spec.type))
            << name << "." << k << " is not " << spec.type << ": " << line;
      }
      for (const auto& [k, v] : j.items()) {
        EXPECT_TRUE(fields.count(k))
            << name << "." << k
            << " is not documented in docs/CLI.md: " << line;
      }
      events.push_back(j);
    }
    return events;
  }

  WizqResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"wizq", "run"});
    args.push_back("--json");
    args.push_back("--quiet");
    return test::RunWizq(args);
  }

  static std::vector<Json> Named(const std::vector<Json>& all,
                                 const std::string& name) {
    std::vector<Json> out;
    for (const Json& j : all) {
      if (j["event"] == name) out.push_back(j);
    }
    return out;
  }

  EventSpecs specs_;
  std::set<std::string> seen_;
  test::ScratchDir dir_;
};

// A run with retries, a failure for good, a finally hook, a value over
// 1 KiB and a note; its events carry values, `finally` and timestamps.
TEST_F(JsonEventsTest, TaskEventsCarryValueFinallyAndTimestamps) {
  const int64_t before =
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  const WizqResult r = Run({DataFile("../json/events.jsonc"), "--dir",
                            dir_.Join("d"), "--from", "Root"});
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  const std::vector<Json> ev = Check(r.out);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.front()["event"], "run_opened") << r.out;
  EXPECT_EQ(ev.back()["event"], "run_finished") << r.out;
  // Wall-clock milliseconds of this run (allowing for a clock step).
  for (const Json& j : ev) {
    EXPECT_GE(j["ts"].get<int64_t>(), before - 5000) << j;
    EXPECT_LT(j["ts"].get<int64_t>(), before + 120000) << j;
  }
  bool hook = false, cut = false, retried = false;
  for (const Json& j : Named(ev, "task_finished")) {
    if (j["finally"] == true) {
      hook = true;
      EXPECT_EQ(j["type"], "Root");
    } else if (j["type"] == "Root") {
      EXPECT_EQ(j["spawned"], 3) << j;
      EXPECT_EQ(j["deduplicated"], 1) << j;  // Flaky named twice
    } else {
      EXPECT_EQ(j["deduplicated"], 0) << j;
    }
    if (j["type"] == "Big") {
      cut = true;
      EXPECT_EQ(j["value_truncated"], true) << j;
      ASSERT_TRUE(j["value"].is_string()) << j;
      const std::string v = j["value"];
      EXPECT_LE(v.size(), 1024u);
      EXPECT_GE(v.size(), 1020u);  // é is 2 bytes: cut at a boundary
      EXPECT_EQ(v.rfind("{\"s\":\"\xc3\xa9\xc3\xa9", 0), 0u) << v.substr(0, 20);
    } else {
      EXPECT_EQ(j["value_truncated"], false) << j;
      EXPECT_EQ(j["value"], Json::object()) << j;
    }
    if (j["type"] == "Flaky" && j["state"] == "pending") {
      retried = true;
      EXPECT_EQ(j["will_retry"], true);
      EXPECT_EQ(j["reason"], "exit_code");
    }
  }
  EXPECT_TRUE(hook && cut && retried) << r.out;
  EXPECT_EQ(Named(ev, "note").size(), 1u) << r.out;
  const Json opened = ev.front();
  EXPECT_EQ(opened["tasks_failed"], 0);
  EXPECT_EQ(opened["tasks_lost"], 0);

  // Run again: nothing runs; run_opened counts the failed task.
  const WizqResult again =
      Run({DataFile("../json/events.jsonc"), "--dir", dir_.Join("d")});
  ASSERT_TRUE(again.exited && again.code == 1) << again.Describe();
  const std::vector<Json> ev2 = Check(again.out);
  ASSERT_EQ(ev2.size(), 1u) << again.out;
  EXPECT_EQ(ev2[0]["action"], "finished");
  EXPECT_EQ(ev2[0]["tasks_failed"], 1);
  EXPECT_EQ(ev2[0]["tasks_done"], 4);
}

// run_finished names the run, as run_opened does: a consumer of several
// runs' events ties the end to its run.
TEST_F(JsonEventsTest, RunFinishedCarriesTheRunId) {
  const WizqResult r = Run({DataFile("../json/events.jsonc"), "--dir",
                            dir_.Join("d"), "--run-id", "my-run"});
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  const std::vector<Json> ev = Check(r.out);
  ASSERT_EQ(Named(ev, "run_finished").size(), 1u) << r.out;
  EXPECT_EQ(Named(ev, "run_finished")[0]["run_id"], "my-run") << r.out;
  EXPECT_EQ(ev.front()["run_id"], "my-run") << r.out;
}

// task_finished says how the attempt that ran ended: its exit code, how
// long it took, its stderr file.
TEST_F(JsonEventsTest, TaskFinishedCarriesExitCodeDurationAndStderr) {
  const WizqResult r =
      Run({DataFile("../json/events.jsonc"), "--dir", dir_.Join("d")});
  ASSERT_TRUE(r.exited && r.code == 1) << r.Describe();
  const std::vector<Json> ev = Check(r.out);
  const std::string tasks =
      test::TaskFilesDir(std::filesystem::canonical(dir_.Join("d")).string()) +
      "/";
  // Step and state -> the exit code and stderr its attempt had.
  const std::map<std::string, std::pair<int, std::string>> want = {
      {"Root done", {0, ""}},  {"Flaky pending", {3, "flaky\n"}},
      {"Flaky done", {0, ""}}, {"Bad failed", {1, "bad\n"}},
      {"Big done", {0, ""}},   {"Root (finally) done", {0, ""}}};
  std::set<std::string> seen;
  for (const Json& j : Named(ev, "task_finished")) {
    const std::string key = j["type"].get<std::string>() +
                            (j["finally"] == true ? " (finally) " : " ") +
                            j["state"].get<std::string>();
    ASSERT_TRUE(want.count(key)) << j;
    seen.insert(key);
    EXPECT_EQ(j.value("exit_code", -1), want.at(key).first) << j;
    ASSERT_TRUE(j.contains("duration_ms")) << j;
    EXPECT_GE(j["duration_ms"].get<int64_t>(), 0) << j;
    EXPECT_LT(j["duration_ms"].get<int64_t>(), 60000) << j;
    EXPECT_EQ(j.value("stderr", ""),
              tasks + std::to_string(j["id"].get<int>()) + "." +
                  std::to_string(j["attempt"].get<int>()) + ".stderr")
        << j;
    EXPECT_EQ(test::ReadAll(j.value("stderr", "")), want.at(key).second) << j;
  }
  EXPECT_EQ(seen.size(), want.size()) << r.out;
}

// SIGTERM and SIGINT end the events with run_interrupted naming the signal.
TEST_F(JsonEventsTest, InterruptEndsWithRunInterrupted) {
  for (int sig : {SIGTERM, SIGINT}) {
    const std::string dir = dir_.Join("i" + std::to_string(sig));
    WizqProcess p({"wizq", "run", DataFile("../json/sleeper.jsonc"), "--dir",
                   dir, "--json", "--quiet"});
    ASSERT_TRUE(
        test::WaitFor([&] { return Contains(p.Stdout(), "\"task_started\""); },
                      test::seconds(30)))
        << p.Stdout();
    p.Kill(sig);
    const WizqResult& r = p.Wait(test::seconds(30));
    ASSERT_TRUE(r.exited && r.code == 130) << r.Describe();
    const std::vector<Json> ev = Check(r.out);
    ASSERT_FALSE(ev.empty());
    const Json& end = ev.back();
    EXPECT_EQ(end["event"], "run_interrupted") << r.out;
    EXPECT_EQ(end["signal"], sig == SIGTERM ? "SIGTERM" : "SIGINT") << r.out;
    EXPECT_EQ(end["pending"], 1) << r.out;
    EXPECT_EQ(end["running"], 0) << r.out;
  }
}

// Invalid workflow, bad input, bad arguments (exit 2) and an install
// directory that cannot be made or a corrupt log (exit 3) print `error`
// events with the code, and file and field where known.
TEST_F(JsonEventsTest, Exit2AndExit3ErrorsAreEvents) {
  const std::string bad = DataFile("invalid_workflow.jsonc");
  WizqResult r = Run({bad, "--dir", dir_.Join("w")});
  ASSERT_TRUE(r.exited && r.code == 2) << r.Describe();
  std::vector<Json> ev = Check(r.out);
  ASSERT_GE(ev.size(), 2u) << r.out;
  std::set<std::string> fields;
  for (const Json& j : ev) {
    EXPECT_EQ(j["event"], "error");
    EXPECT_EQ(j["code"], 2);
    EXPECT_EQ(j["file"], bad);
    fields.insert(j.value("field", ""));
  }
  EXPECT_TRUE(fields.count("$.steps[0].next[0]")) << r.out;
  EXPECT_TRUE(Contains(r.err, "wizq run: ")) << "also on stderr: " << r.err;

  r = Run(
      {DataFile("basic.jsonc"), "--dir", dir_.Join("w"), "--input", "{\"n\":"});
  ASSERT_TRUE(r.exited && r.code == 2) << r.Describe();
  ev = Check(r.out);
  ASSERT_EQ(ev.size(), 1u) << r.out;
  EXPECT_EQ(ev[0]["field"], "--input") << r.out;

  r = Run({DataFile("basic.jsonc"), "--dir", dir_.Join("w"), "--input-file",
           dir_.Join("missing.json")});
  ASSERT_TRUE(r.exited && r.code == 2) << r.Describe();
  ev = Check(r.out);
  ASSERT_EQ(ev.size(), 1u) << r.out;
  EXPECT_EQ(ev[0]["file"], dir_.Join("missing.json")) << r.out;

  r = Run({DataFile("basic.jsonc"), "--jobs", "0"});
  ASSERT_TRUE(r.exited && r.code == 2) << r.Describe();
  ev = Check(r.out);
  ASSERT_EQ(ev.size(), 1u) << r.out;
  EXPECT_TRUE(Contains(ev[0]["message"], "--jobs")) << r.out;

  test::WriteAll(dir_.Join("file"), "");
  r = Run({DataFile("basic.jsonc"), "--dir", dir_.Join("file/sub"), "--input",
           "{\"n\":1}"});
  ASSERT_TRUE(r.exited && r.code == 3) << r.Describe();
  ev = Check(r.out);
  ASSERT_EQ(ev.size(), 1u) << r.out;
  EXPECT_EQ(ev[0]["code"], 3);
  EXPECT_TRUE(Contains(ev[0]["message"], "file/sub")) << r.out;

  // --resume-from a Barnum log that cannot be read: the log is the file.
  r = Run({"--resume-from", dir_.Join("nope.ndjson"), "--dir", dir_.Join("b")});
  ASSERT_TRUE(r.exited && r.code == 2) << r.Describe();
  ev = Check(r.out);
  ASSERT_EQ(ev.size(), 1u) << r.out;
  EXPECT_EQ(ev[0]["file"], dir_.Join("nope.ndjson")) << r.out;

  // A corrupt audit.jsonl: exit 3, the event names the file. (The
  // directory store's file; a store's exit 3 are pg_db_cli_test's.)
  if (test::OnPgStore()) return;
  const std::string d = dir_.Join("c");
  ASSERT_EQ(
      Run({DataFile("basic.jsonc"), "--dir", d, "--input", "{\"n\":1}"}).code,
      0);
  std::string log = test::ReadAll(d + "/.wizard/audit.jsonl");
  log.replace(log.find("\"seq\""), 5, "\"sXq\"");
  test::WriteAll(d + "/.wizard/audit.jsonl", log);
  std::filesystem::remove(d + "/.wizard/queue.json");
  r = Run({DataFile("basic.jsonc"), "--dir", d, "--input", "{\"n\":1}"});
  ASSERT_TRUE(r.exited && r.code == 3) << r.Describe();
  ev = Check(r.out);
  ASSERT_EQ(ev.size(), 1u) << r.out;
  EXPECT_TRUE(Contains(ev[0].value("file", ""), "/.wizard/audit.jsonl"))
      << r.out;
}

// A fixed --run-id whose workflow file changed since the run started: a
// warning (on stderr even with --quiet, and as an event).
TEST_F(JsonEventsTest, ChangedWorkflowUnderFixedRunIdWarns) {
  const std::string wf = dir_.Join("wf.json");
  const std::string text = test::ReadAll(DataFile("../json/prompt.jsonc"));
  test::WriteAll(wf, text);
  const std::vector<std::string> args = {wf, "--dir", dir_.Join("d"),
                                         "--run-id", "fixed"};
  WizqResult r = Run(args);
  ASSERT_TRUE(r.exited && r.code == 4) << r.Describe();
  EXPECT_FALSE(Contains(r.err, "warning")) << r.err;
  std::string changed = text;
  changed.replace(changed.find("Go on?"), 6, "Really?");
  test::WriteAll(wf, changed);
  r = Run(args);
  ASSERT_TRUE(r.exited && r.code == 4) << r.Describe();
  const std::vector<Json> ev = Check(r.out);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev[0]["event"], "warning") << r.out;
  EXPECT_TRUE(Contains(ev[0]["message"], "fixed")) << r.out;
  EXPECT_EQ(
      test::SplitLines(r.err).size() >= 1 &&
          Contains(test::SplitLines(r.err)[0], "wizq: warning: run fixed"),
      true)
      << r.err;
  // The frozen workflow is the one that runs: the prompt still says Go on?
  EXPECT_TRUE(Contains(Named(ev, "run_paused").at(0).dump(), "Go on?"))
      << r.out;
}

// Every documented event appears in at least one of the runs above and
// below (run here again, in one process, to see them all).
TEST_F(JsonEventsTest, EveryDocumentedEventIsProduced) {
  Check(Run({DataFile("../json/events.jsonc"), "--dir", dir_.Join("a"),
             "--from", "Root"})
            .out);
  Check(Run({DataFile("../json/prompt.jsonc"), "--dir", dir_.Join("p")}).out);
  Check(Run({DataFile("invalid_workflow.jsonc"), "--dir", dir_.Join("w")}).out);
  Check(Run({DataFile("../json/queued.jsonc"), "--dir", dir_.Join("q"), "-j",
             "1"})
            .out);
  const std::string wf = dir_.Join("wf.json");
  test::WriteAll(wf, test::ReadAll(DataFile("../json/prompt.jsonc")));
  Run({wf, "--dir", dir_.Join("f"), "--run-id", "x"});
  test::WriteAll(wf, test::ReadAll(DataFile("../json/events.jsonc")));
  Check(Run({wf, "--dir", dir_.Join("f"), "--run-id", "x"}).out);
  {
    WizqProcess p({"wizq", "run", DataFile("../json/sleeper.jsonc"), "--dir",
                   dir_.Join("s"), "--json", "--quiet"});
    ASSERT_TRUE(
        test::WaitFor([&] { return Contains(p.Stdout(), "\"task_started\""); },
                      test::seconds(30)));
    p.Kill(SIGTERM);
    Check(p.Wait(test::seconds(30)).out);
  }
  for (const auto& [name, fields] : specs_) {
    if (name.empty()) continue;
    EXPECT_TRUE(seen_.count(name))
        << "documented event \"" << name << "\" was never printed";
  }
}

}  // namespace
}  // namespace wizq
