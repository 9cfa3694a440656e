// Helpers of the tests that drive the real `wizq` binary
// (tests/wizq_cli*_test.cc, tests/wizq_crash_test.cc). Header-only: CMake
// builds each tests/*_test.cc with tests/test_util.cc only.
//
// - WizqProcess / RunWizq: fork/exec `wizq` with stdout and stderr captured
//   in files, and a deadline after which it is SIGKILLed, so a hung wizq
//   fails the test instead of hanging CI.
// - BecomeSubreaper / ReapStrays: SIGKILLing wizq orphans its task
//   processes. In a container whose PID 1 does not reap, they would pile up
//   as zombies; the test process adopts and reaps them instead.
// - The workflows and scripts under tests/data/cli/, the ledger their tasks
//   write (see tests/data/cli/lib.sh), and JSON readers for the files in
//   `.wizard/`.
#ifndef WIZQ_TESTS_INTEGRATION_UTIL_H_
#define WIZQ_TESTS_INTEGRATION_UTIL_H_

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/test_util.h"

extern char** environ;

namespace wizq::test {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// How long one wizq command may take before the test kills it.
inline constexpr seconds kWizqDeadline{60};

// An integer from the environment (e.g. WIZQ_TORTURE_CYCLES), else `def`.
inline int EnvInt(const char* name, int def) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return def;
  return static_cast<int>(strtol(v, nullptr, 10));
}

inline std::string WizqPath() { return BuildDir() + "/wizq"; }
inline std::string DataDir() { return SourceDir() + "/tests/data/cli"; }
inline std::string DataFile(const std::string& name) {
  return DataDir() + "/" + name;
}

inline bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// How many times `part` (not empty) occurs in `s`, not overlapping.
inline int CountOf(const std::string& s, const std::string& part) {
  int n = 0;
  for (size_t at = s.find(part); at != std::string::npos;
       at = s.find(part, at + part.size())) {
    n++;
  }
  return n;
}

// --- child processes ---------------------------------------------------------

// Children the tests wait for; ReapStrays() keeps their statuses for them.
inline std::set<pid_t> g_tracked;
inline std::map<pid_t, int> g_reaped;

// Makes this process adopt the orphans of its descendants (SIGKILLed wizq's
// tasks), so that ReapStrays() can reap them.
inline void BecomeSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

// Reaps every exited child: adopted orphans are dropped, tracked ones keep
// their status in g_reaped.
inline void ReapStrays() {
  while (true) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    if (g_tracked.count(pid)) g_reaped[pid] = status;
  }
}

// True (and *status) once the tracked child `pid` has exited.
inline bool TryWait(pid_t pid, int* status) {
  auto it = g_reaped.find(pid);
  if (it == g_reaped.end()) {
    ReapStrays();
    it = g_reaped.find(pid);
    if (it == g_reaped.end()) return false;
  }
  *status = it->second;
  g_reaped.erase(it);
  g_tracked.erase(pid);
  return true;
}

// True if `pid` is gone or a zombie (dead, not yet reaped).
inline bool ProcessDead(pid_t pid) {
  ReapStrays();
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() &&
         stat[paren + 2] == 'Z';
}

struct WizqResult {
  bool exited = false;     // exited normally; see code
  int code = -1;           // exit code, if exited
  int signal = 0;          // the signal that killed it, else 0
  bool timed_out = false;  // killed by the test at its deadline
  std::string out, err;    // stdout and stderr
  std::string Describe() const {
    std::ostringstream s;
    if (timed_out) s << "TIMED OUT (killed by the test); ";
    if (exited) {
      s << "exit code " << code;
    } else {
      s << "killed by signal " << signal;
    }
    s << "\n--- stdout:\n"
      << out.substr(0, 4000) << "\n--- stderr:\n"
      << err.substr(0, 4000);
    return s.str();
  }
};

struct SpawnOptions {
  std::string cwd;                                       // empty: ours
  std::vector<std::pair<std::string, std::string>> env;  // added/overridden
  bool new_session = false;
};

// One running `wizq` (or other program) with captured output.
class WizqProcess {
 public:
  // args[0] is the program; "wizq" means the built binary.
  explicit WizqProcess(std::vector<std::string> args,
                       const SpawnOptions& opts = {}) {
    if (!args.empty() && args[0] == "wizq") args[0] = WizqPath();
    char tmpl[] = "/tmp/wizq-it-out-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      ADD_FAILURE() << "mkdtemp: " << strerror(errno);
      return;
    }
    out_dir_ = tmpl;
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; e++) {
      std::string kv = *e;
      bool overridden = false;
      for (const auto& [k, v] : opts.env) {
        if (kv.compare(0, k.size() + 1, k + "=") == 0) overridden = true;
      }
      if (!overridden) env_strings.push_back(kv);
    }
    for (const auto& [k, v] : opts.env) env_strings.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::string out_path = out_dir_ + "/stdout";
    const std::string err_path = out_dir_ + "/stderr";
    const int out_fd =
        open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int err_fd =
        open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    fflush(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      if (opts.new_session) setsid();
      dup2(in_fd, 0);
      dup2(out_fd, 1);
      dup2(err_fd, 2);
      if (!opts.cwd.empty() && chdir(opts.cwd.c_str()) != 0) _exit(126);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(out_fd);
    close(err_fd);
    close(in_fd);
    if (pid_ < 0) {
      ADD_FAILURE() << "fork: " << strerror(errno);
      return;
    }
    g_tracked.insert(pid_);
    start_ = Clock::now();
  }

  ~WizqProcess() {
    if (pid_ > 0 && !done_) {
      kill(pid_, SIGKILL);
      Wait(seconds(10));
    }
    if (!out_dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(out_dir_, ec);
    }
  }
  WizqProcess(const WizqProcess&) = delete;
  WizqProcess& operator=(const WizqProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool done() const { return done_; }
  Clock::time_point start_time() const { return start_; }

  // True once it has exited (then result() is set).
  bool Poll() {
    if (done_ || pid_ <= 0) return true;
    int status = 0;
    if (!TryWait(pid_, &status)) return false;
    Finish(status);
    return true;
  }

  void Kill(int sig) {
    if (!done_ && pid_ > 0) kill(pid_, sig);
  }

  // Waits until it exits; SIGKILLs it past `timeout` (result().timed_out).
  const WizqResult& Wait(Clock::duration timeout = kWizqDeadline) {
    const Clock::time_point deadline = Clock::now() + timeout;
    bool killed = false;
    while (!Poll()) {
      if (!killed && Clock::now() > deadline) {
        kill(pid_, SIGKILL);
        killed = true;
        result_.timed_out = true;
      }
      std::this_thread::sleep_for(milliseconds(2));
    }
    return result_;
  }

  const WizqResult& result() const { return result_; }
  // What it printed so far.
  std::string Stdout() const { return ReadAll(out_dir_ + "/stdout"); }
  std::string Stderr() const { return ReadAll(out_dir_ + "/stderr"); }

 private:
  void Finish(int status) {
    done_ = true;
    result_.exited = WIFEXITED(status);
    result_.code = result_.exited ? WEXITSTATUS(status) : -1;
    result_.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    result_.out = Stdout();
    result_.err = Stderr();
  }

  pid_t pid_ = -1;
  bool done_ = false;
  Clock::time_point start_;
  std::string out_dir_;
  WizqResult result_;
};

// Runs a command to its end (at most `timeout`).
inline WizqResult RunWizq(const std::vector<std::string>& args,
                          const SpawnOptions& opts = {},
                          Clock::duration timeout = kWizqDeadline) {
  WizqProcess p(args, opts);
  return p.Wait(timeout);
}

// Waits until `pred` holds, at most `timeout`.
template <typename Pred>
bool WaitFor(Pred pred, Clock::duration timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    ReapStrays();
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// --- files -------------------------------------------------------------------

inline Json ParseJsonOrNull(const std::string& text) {
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

inline Json ReadJsonFile(const std::string& path) {
  return ParseJsonOrNull(ReadAll(path));
}

inline std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Every line of an NDJSON file or text; a line that does not parse is a
// discarded value (is_discarded()).
inline std::vector<Json> ParseJsonLines(const std::string& text) {
  std::vector<Json> out;
  for (const std::string& l : SplitLines(text))
    out.push_back(ParseJsonOrNull(l));
  return out;
}

// True when this suite runs on the PostgreSQL store (tests/pg/cli_on_pg.cc
// named one in WIZQ_STORE for this test case): a run's state is read through
// the CLI, not from `.wizard/`.
inline bool OnPgStore() {
  const char* store = getenv("WIZQ_STORE");
  return store != nullptr && *store != '\0';
}

// The lines of audit.jsonl, without the free space (blank lines) that a
// live or killed run leaves after them (FORMAT.md). On PostgreSQL, the
// run's events as `wizq export --format audit` writes them.
inline std::vector<Json> ReadAudit(const std::string& dir) {
  std::string path = dir + "/.wizard/audit.jsonl";
  if (OnPgStore()) {
    path = dir + "/.exported-audit.jsonl";
    const WizqResult r = RunWizq(
        {"wizq", "export", "--format", "audit", "--dir", dir, "-o", path});
    EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  }
  std::string text = ReadAll(path);
  const size_t last = text.find_last_not_of(std::string_view("\n\0", 2));
  text.resize(last == std::string::npos ? 0 : last + 1);
  return ParseJsonLines(text);
}

// queue.json; on PostgreSQL (which has none) `wizq status --json`, which
// has the same "status" and "tasks" (id, type, inputs, state, attempts).
inline Json ReadQueue(const std::string& dir) {
  if (OnPgStore()) {
    const WizqResult r = RunWizq({"wizq", "status", "--dir", dir, "--json"});
    return ParseJsonOrNull(r.out);
  }
  return ReadJsonFile(dir + "/.wizard/queue.json");
}

// Set by tests/pg/cli_on_pg.cc: empties the store of this test case.
inline void (*g_empty_store)() = nullptr;

// A case that starts over (a new directory, no run): `dir` emptied and, on
// PostgreSQL, the case's database too.
inline void StartOver(const std::string& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  if (OnPgStore() && g_empty_store != nullptr) g_empty_store();
}

// The directory of a run's attempt files (stdout, stderr, ...): under
// .wizard/, or with a store the run's local workspace (the only one in
// `dir`; docs/FORMAT.md, "Folder layout").
inline std::string TaskFilesDir(const std::string& dir) {
  if (!OnPgStore()) return dir + "/.wizard/tasks";
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator(dir + "/.wizq-local", ec)) {
    if (e.is_directory()) return e.path().string() + "/tasks";
  }
  return dir + "/.wizq-local/(no run)";
}

// True once a run has started in `dir` (on PostgreSQL: in the store).
inline bool HasRun(const std::string& dir) {
  if (!OnPgStore()) return std::filesystem::exists(dir + "/.wizard/queue.json");
  const WizqResult r = RunWizq({"wizq", "status", "--dir", dir, "--json"});
  return r.exited && r.code == 0;
}

// Every file under `dir`, by relative path, with its bytes.
inline std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file()) {
      out[e.path().string().substr(dir.size())] = ReadAll(e.path().string());
    } else {
      out[e.path().string().substr(dir.size())] = "<dir>";
    }
  }
  return out;
}

// Everything a run has recorded, to compare before and after a command
// that must change nothing: every file under .wizard/ byte for byte; on
// PostgreSQL, every event of the run (the rows are their fold).
inline std::map<std::string, std::string> RunState(const std::string& dir) {
  if (!OnPgStore()) return Snapshot(dir + "/.wizard");
  std::map<std::string, std::string> state;
  const std::string path = dir + "/.state-audit.jsonl";
  const WizqResult r = RunWizq(
      {"wizq", "export", "--format", "audit", "--dir", dir, "-o", path});
  state["export"] = r.exited && r.code == 0 ? ReadAll(path) : r.Describe();
  return state;
}

// `wizq status --dir D --json`, parsed (null on failure, with a test
// failure).
inline Json StatusJson(const std::string& dir) {
  const WizqResult r = RunWizq({"wizq", "status", "--dir", dir, "--json"});
  EXPECT_TRUE(r.exited && r.code == 0) << r.Describe();
  Json j = ParseJsonOrNull(r.out);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j.is_discarded() ? Json() : j;
}

// A task of a status or queue document by id (null if absent).
inline Json FindTask(const Json& doc, int64_t id) {
  if (!doc.contains("tasks")) return Json();
  for (const Json& t : doc["tasks"]) {
    if (t["id"].get<int64_t>() == id) return t;
  }
  return Json();
}

// The tasks of a status or queue document whose type and inputs match
// (inputs compared as JSON values, i.e. regardless of key order).
inline std::vector<Json> FindTasks(const Json& doc, const std::string& type,
                                   const Json& inputs = Json()) {
  std::vector<Json> out;
  if (!doc.contains("tasks")) return out;
  for (const Json& t : doc["tasks"]) {
    if (t["type"] != type) continue;
    if (!inputs.is_null() && t["inputs"] != inputs) continue;
    out.push_back(t);
  }
  return out;
}

// The parent id of a task of queue.json or `status --json` (0 for none).
inline int64_t ParentId(const Json& task) {
  const Json& p = task["parent_id"];
  return p.is_number_integer() ? p.get<int64_t>() : 0;
}

// --- the ledger
// ---------------------------------------------------------------

struct LedgerLine {
  size_t index = 0;  // position in the ledger: the order of events
  std::string kind;  // start, end, OVERLAP, or a script's own word
  int64_t task = 0;
  int attempt = 0;
  int64_t pid = 0;
  std::string role;
};

inline std::vector<LedgerLine> ReadLedger(const std::string& dir) {
  std::vector<LedgerLine> out;
  const std::vector<std::string> lines = SplitLines(ReadAll(dir + "/ledger"));
  for (size_t i = 0; i < lines.size(); i++) {
    std::istringstream in(lines[i]);
    LedgerLine l;
    l.index = i;
    in >> l.kind >> l.task >> l.attempt >> l.pid >> l.role;
    out.push_back(l);
  }
  return out;
}

// Ledger lines of `kind` and `role` (any role if empty).
inline std::vector<LedgerLine> LedgerFind(const std::vector<LedgerLine>& ledger,
                                          const std::string& kind,
                                          const std::string& role = "") {
  std::vector<LedgerLine> out;
  for (const LedgerLine& l : ledger) {
    if (l.kind == kind && (role.empty() || l.role == role)) out.push_back(l);
  }
  return out;
}

// True if no process holds a lock on any file in `dir` (the locks/ that
// the tasks of tests/data/cli/lib.sh hold while they run): no process tree
// of a task is left running.
inline std::vector<std::string> HeldLocks(const std::string& dir) {
  std::vector<std::string> held;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const int fd = open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) held.push_back(e.path().string());
    close(fd);
  }
  return held;
}

}  // namespace wizq::test

#endif  // WIZQ_TESTS_INTEGRATION_UTIL_H_
