// Hostile-input suite: the real `wizq` binary against malformed, truncated,
// mistyped, huge and deeply nested input in every file it reads, bad
// arguments, damaged `.wizard/` state and misbehaving tasks.
//
// Table-driven: each folder of tests/bad_input/ is one case (one test, named
// after the folder), described by its `case.json`. Fields, all optional but
// `args` and `exit`, in the order they are used:
//
//   description      what is wrong and what wizq must do
//   make             files to generate: [{"path": "{work}/f.json", "parts":
//                    [{"text": "[", "repeat": 10000}, {"hex": "ff"}]}]
//   setup            a folder of the case, copied to {dir}/.wizard
//   prepare          wizq commands run first: [{"args": [...], "env":
//                    {"CRASH": "1"}, "exit": 0}]; "killed": true instead of
//                    "exit" when a task SIGKILLs wizq
//   damage           edits of files under {dir}: [{"op": "truncate", "path":
//                    ".wizard/queue.json", "size": 100}]; ops: write and
//                    append ("text" or "hex"), truncate ("size", < 0 from the
//                    end), replace ("from", "to" or "to_hex"), remove,
//                    symlink ("target"), corrupt_line ("line", < 0 from the
//                    end: its middle byte becomes '#'); on audit.jsonl they
//                    apply to its lines: the free space after them (blank
//                    lines a killed run leaves, FORMAT.md) is dropped first
//   args             the command under test, e.g. ["run",
//                    "{case}/workflow.json", "--dir", "{dir}"]
//   exit             its expected exit code
//   max_seconds      a wall-clock bound for it (it never hangs); five
//                    times as much under a sanitizer, which slows wizq 5-15x
//   stderr_contains  words its stderr must contain; a nested list is
//   stdout_contains  satisfied by any one of its words
//   state            what {dir}/.wizard must look like after (below)
//   status           checks of `wizq status --json`: {"status": "failed",
//                    "counts": {"done": 1}, "tasks": [{"id": 1, "state":
//                    "failed", "reason": "invalid_response",
//                    "message_contains": ["larger than"]}]}
//   after            more commands and their output: [{"args": ["log",
//                    "--dir", "{dir}"], "exit": 0, "stdout_contains": [...]}]
//
// Placeholders in strings: {dir} (the install directory, created empty),
// {case} (the case folder), {work} (a scratch folder for generated files),
// {src} (the source tree). Damage paths are relative to {dir}.
//
// States after the command:
//   absent     {dir} is still empty: nothing was written (invalid workflow,
//              input or arguments);
//   unchanged  every file and folder under {dir}/.wizard is as it was,
//              byte for byte, and nothing but empty files and folders (the
//              lock, workers/) was added (refused state);
//   archived   every file of the old run (lock and workers/ aside) is now
//              under {dir}/.wizard/archive/<name>/, byte for byte;
//   torn_aside the bytes of the last `append` (or `write`) damage are in a
//              {dir}/.wizard/audit.torn-* file, and audit.jsonl still starts
//              with what it held before them;
//   any        not checked (the run went on; see "status").
// Every command runs with a deadline (kWizqDeadline): a hang fails the case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration_util.h"
#include "tests/process_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using test::Contains;
using test::Json;
using test::ScratchDir;
using test::WizqResult;

std::string CasesDir() { return test::SourceDir() + "/tests/bad_input"; }

std::vector<std::string> CaseNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(CasesDir(), ec)) {
    if (fs::exists(e.path() / "case.json")) {
      names.push_back(e.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Every file and folder under `root` (or `root` itself if it is a file):
// relative path -> content ("<dir>" for folders).
std::map<std::string, std::string> TakeSnapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(root, ec);
  if (ec || !fs::exists(st)) return out;
  if (!fs::is_directory(st)) {
    out["."] = test::ReadAll(root);
    return out;
  }
  for (auto it = fs::recursive_directory_iterator(root, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string rel = fs::relative(it->path(), root).string();
    out[rel] = it->is_directory() ? "<dir>" : test::ReadAll(it->path());
  }
  return out;
}

std::string Hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// The bytes of a damage op or generated part: "text" or "hex".
std::string Bytes(const Json& j) {
  if (j.contains("hex")) return Hex(j["hex"].get<std::string>());
  return j.value("text", std::string());
}

// How a list of expected words reads in a failure message.
std::string Describe(const Json& want) {
  return want.is_array() ? want.dump() : want.get<std::string>();
}

// Each item of `words` must occur in `text`; an item that is a list is
// satisfied by any of its words.
void ExpectContains(const std::string& what, const std::string& text,
                    const Json& words) {
  if (words.is_null()) return;
  for (const Json& w : words) {
    bool found = false;
    if (w.is_array()) {
      for (const Json& alt : w) found = found || Contains(text, alt);
    } else {
      found = Contains(text, w.get<std::string>());
    }
    EXPECT_TRUE(found) << what << " does not contain " << Describe(w)
                       << "\n--- " << what << ":\n"
                       << text.substr(0, 4000);
  }
}

class BadInputTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }

  void SetUp() override {
    case_dir_ = CasesDir() + "/" + GetParam();
    spec_ = test::ReadJsonFile(case_dir_ + "/case.json");
    ASSERT_FALSE(spec_.is_discarded()) << case_dir_ << "/case.json is not JSON";
    dir_ = scratch_.Join("install");
    work_ = scratch_.Join("work");
    fs::create_directories(dir_);
    fs::create_directories(work_);
  }

  std::string Expand(std::string s) const {
    const std::pair<std::string, std::string> subs[] = {
        {"{dir}", dir_},
        {"{case}", case_dir_},
        {"{work}", work_},
        {"{src}", test::SourceDir()}};
    for (const auto& [from, to] : subs) {
      for (size_t pos = s.find(from); pos != std::string::npos;
           pos = s.find(from, pos + to.size())) {
        s.replace(pos, from.size(), to);
      }
    }
    return s;
  }

  std::vector<std::string> Args(const Json& args) const {
    std::vector<std::string> out = {"wizq"};
    for (const Json& a : args) out.push_back(Expand(a.get<std::string>()));
    return out;
  }

  // Runs `wizq args...` in {work}, with `env` (an object) added.
  WizqResult Run(const Json& args, const Json& env = Json::object()) const {
    test::SpawnOptions opts;
    opts.cwd = work_;
    for (const auto& [k, v] : env.items()) {
      opts.env.emplace_back(k, Expand(v.get<std::string>()));
    }
    return test::RunWizq(Args(args), opts);
  }

  void Make() {
    for (const Json& m : spec_.value("make", Json::array())) {
      std::string data;
      for (const Json& part : m["parts"]) {
        const std::string bytes = Bytes(part);
        const int n = part.value("repeat", 1);
        data.reserve(data.size() + bytes.size() * static_cast<size_t>(n));
        for (int i = 0; i < n; i++) data += bytes;
      }
      test::WriteAll(Expand(m["path"].get<std::string>()), data);
    }
  }

  void CopySetup() {
    if (!spec_.contains("setup")) return;
    std::error_code ec;
    fs::copy(case_dir_ + "/" + spec_["setup"].get<std::string>(),
             dir_ + "/.wizard", fs::copy_options::recursive, ec);
    ASSERT_FALSE(ec) << "copying the setup folder: " << ec.message();
  }

  void Prepare() {
    for (const Json& p : spec_.value("prepare", Json::array())) {
      const WizqResult r = Run(p["args"], p.value("env", Json::object()));
      ASSERT_FALSE(r.timed_out) << "prepare: " << r.Describe();
      if (p.value("killed", false)) {
        ASSERT_EQ(r.signal, SIGKILL) << "prepare: " << r.Describe();
        // Let the task that killed wizq finish, and reap it.
        for (int i = 0; i < 30; i++) {
          test::ReapStrays();
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      } else {
        ASSERT_TRUE(r.exited && r.code == p.value("exit", 0))
            << "prepare: " << r.Describe();
      }
    }
  }

  void Damage() {
    for (const Json& d : spec_.value("damage", Json::array())) {
      const std::string op = d["op"].get<std::string>();
      const std::string path = dir_ + "/" + d["path"].get<std::string>();
      std::string data = test::ReadAll(path);
      if (path.size() >= 11 &&
          path.compare(path.size() - 11, 11, "audit.jsonl") == 0) {
        const size_t last = data.find_last_not_of(std::string_view("\n\0", 2));
        data.resize(last == std::string::npos ? 0 : last + 1);
        if (!data.empty()) data.push_back('\n');
      }
      if (op == "write") {
        data = Bytes(d);
        torn_before_.clear();
        torn_ = data;
      } else if (op == "append") {
        torn_before_ = data;
        torn_ = Bytes(d);
        data += torn_;
      } else if (op == "truncate") {
        const int64_t size = d["size"].get<int64_t>();
        const int64_t keep =
            size >= 0 ? size : static_cast<int64_t>(data.size()) + size;
        ASSERT_GE(keep, 0) << path;
        ASSERT_LE(keep, static_cast<int64_t>(data.size())) << path;
        data.resize(static_cast<size_t>(keep));
      } else if (op == "replace") {
        const std::string from = d["from"].get<std::string>();
        const size_t pos = data.find(from);
        ASSERT_NE(pos, std::string::npos) << from << " not in " << path;
        data.replace(pos, from.size(),
                     d.contains("to_hex") ? Hex(d["to_hex"].get<std::string>())
                                          : d["to"].get<std::string>());
      } else if (op == "remove") {
        std::error_code ec;
        fs::remove_all(path, ec);
        continue;
      } else if (op == "symlink") {
        std::error_code ec;
        fs::create_symlink(Expand(d["target"].get<std::string>()), path, ec);
        ASSERT_FALSE(ec) << path << ": " << ec.message();
        continue;
      } else if (op == "corrupt_line") {
        // Overwrites the middle byte of a line (negative: from the end).
        std::vector<size_t> starts = {0};
        for (size_t i = 0; i + 1 < data.size(); i++) {
          if (data[i] == '\n') starts.push_back(i + 1);
        }
        int line = d["line"].get<int>();
        if (line < 0) line += static_cast<int>(starts.size());
        ASSERT_GE(line, 0) << path;
        ASSERT_LT(line, static_cast<int>(starts.size())) << path;
        const size_t begin = starts[static_cast<size_t>(line)];
        const size_t end = data.find('\n', begin);
        data[begin + (end - begin) / 2] = '#';
      } else {
        FAIL() << "unknown damage op " << op;
      }
      test::WriteAll(path, data);
    }
  }

  void CheckState() {
    const std::string state = spec_.value("state", "any");
    const std::string wizard = dir_ + "/.wizard";
    const auto after = TakeSnapshot(wizard);
    if (state == "absent") {
      EXPECT_TRUE(fs::is_empty(dir_))
          << "wizq wrote to the install directory: " << dir_;
    } else if (state == "unchanged") {
      for (const auto& [path, content] : before_) {
        auto it = after.find(path);
        if (it == after.end()) {
          ADD_FAILURE() << ".wizard/" << path << " was deleted";
        } else if (it->second != content) {
          ADD_FAILURE() << ".wizard/" << path << " was changed";
        }
      }
      // Empty files and folders (lock, workers/) may appear; nothing else.
      for (const auto& [path, content] : after) {
        EXPECT_TRUE(before_.count(path) || content.empty() ||
                    content == "<dir>")
            << ".wizard/" << path << " appeared";
      }
    } else if (state == "archived") {
      std::vector<std::string> archives;
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(wizard + "/archive", ec)) {
        archives.push_back(e.path().filename().string());
      }
      ASSERT_FALSE(archives.empty()) << "nothing under .wizard/archive/";
      for (const auto& [path, content] : before_) {
        if (path == "lock" || path.rfind("workers", 0) == 0) continue;
        bool kept = false;
        for (const std::string& a : archives) {
          auto it = after.find("archive/" + a + "/" + path);
          kept = kept || (it != after.end() && it->second == content);
        }
        EXPECT_TRUE(kept) << ".wizard/" << path
                          << " is not under .wizard/archive/ unchanged";
      }
    } else if (state == "torn_aside") {
      ASSERT_FALSE(torn_.empty()) << "torn_aside needs an `append` damage";
      bool aside = false;
      for (const auto& [path, content] : after) {
        aside =
            aside || (path.rfind("audit.torn-", 0) == 0 && content == torn_);
      }
      EXPECT_TRUE(aside) << "the torn bytes are not in .wizard/audit.torn-*";
      const std::string log = test::ReadAll(wizard + "/audit.jsonl");
      EXPECT_EQ(log.compare(0, torn_before_.size(), torn_before_), 0)
          << "audit.jsonl lost committed records";
    } else {
      ASSERT_EQ(state, "any") << "unknown state check";
    }
  }

  void CheckStatus() {
    if (!spec_.contains("status")) return;
    const Json& want = spec_["status"];
    const Json got = test::StatusJson(dir_);
    ASSERT_FALSE(got.is_null());
    if (want.contains("status")) {
      EXPECT_EQ(got["status"], want["status"]) << got.dump().substr(0, 2000);
    }
    const Json counts = want.value("counts", Json::object());
    for (const auto& [k, v] : counts.items()) {
      EXPECT_EQ(got["counts"][k], v) << "count of " << k;
    }
    const Json tasks = want.value("tasks", Json::array());
    for (const Json& wt : tasks) {
      const Json t = test::FindTask(got, wt["id"].get<int64_t>());
      ASSERT_FALSE(t.is_null()) << "no task " << wt["id"];
      if (wt.contains("state")) {
        EXPECT_EQ(t["state"], wt["state"]) << t.dump().substr(0, 2000);
      }
      if (wt.contains("reason")) {
        ASSERT_TRUE(t.contains("error")) << t.dump().substr(0, 2000);
        EXPECT_EQ(t["error"]["reason"], wt["reason"]);
      }
      if (wt.contains("message_contains")) {
        ASSERT_TRUE(t.contains("error")) << t.dump().substr(0, 2000);
        ExpectContains("the task's error message",
                       t["error"]["message"].get<std::string>(),
                       wt["message_contains"]);
      }
    }
  }

  ScratchDir scratch_;
  std::string case_dir_, dir_, work_;
  Json spec_;
  std::map<std::string, std::string> before_;
  std::string torn_, torn_before_;
};

TEST_P(BadInputTest, Case) {
  SCOPED_TRACE(spec_.value("description", ""));
  Make();
  ASSERT_NO_FATAL_FAILURE(CopySetup());
  ASSERT_NO_FATAL_FAILURE(Prepare());
  ASSERT_NO_FATAL_FAILURE(Damage());
  before_ = TakeSnapshot(dir_ + "/.wizard");

  const auto start = std::chrono::steady_clock::now();
  const WizqResult r = Run(spec_["args"]);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  RecordProperty("stderr", r.err.substr(0, 2000));
  ASSERT_FALSE(r.timed_out) << "wizq hung: " << r.Describe();
  ASSERT_TRUE(r.exited) << "wizq crashed: " << r.Describe();
  EXPECT_EQ(r.code, spec_["exit"].get<int>()) << r.Describe();
  if (spec_.contains("max_seconds")) {
    const double scale = test::UnderSanitizer() ? 5 : 1;
    EXPECT_LE(secs, scale * spec_["max_seconds"].get<double>()) << r.Describe();
  }
  ExpectContains("stderr", r.err, spec_.value("stderr_contains", Json()));
  ExpectContains("stdout", r.out, spec_.value("stdout_contains", Json()));
  CheckState();
  CheckStatus();
  for (const Json& a : spec_.value("after", Json::array())) {
    const WizqResult ar = Run(a["args"]);
    ASSERT_FALSE(ar.timed_out) << ar.Describe();
    EXPECT_TRUE(ar.exited && ar.code == a.value("exit", 0)) << ar.Describe();
    ExpectContains("stdout of `wizq " + a["args"][0].get<std::string>() + "`",
                   ar.out, a.value("stdout_contains", Json()));
    ExpectContains("stderr of `wizq " + a["args"][0].get<std::string>() + "`",
                   ar.err, a.value("stderr_contains", Json()));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BadInputTest, ::testing::ValuesIn(CaseNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           }
                           return name;
                         });

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BadInputTest);

}  // namespace
}  // namespace wizq
