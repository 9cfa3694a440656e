// The checker of the kill -9 tests: reads a fan-out run's `.wizard/`
// (queue.json, audit.jsonl) and the side-effect ledger its tasks write
// (tests/data/cli/lib.sh), and says, Jepsen-style, what went wrong.
// Used by tests/wizq_crash_test.cc (gtest) and tests/torture/torture.cc
// (`wizq_torture`, `make torture`). Header-only, no gtest: every violation
// is a message in RunCheck::errors, and the ones that break a guarantee of
// SPEC §6 are also counted:
//
//   lost        a task of the run that did not complete: absent from
//               queue.json, not `done`, no `task_completed`, or its
//               completed attempt has no start and end in the ledger (also
//               a missing finally hook);
//   duplicated  a task completed twice (two `task_completed`, or an attempt
//               started after its completion was logged), two tasks with one
//               <type, inputs>, a side effect (ledger role) under two task
//               ids, or two finally hooks for one owner;
//   overlapped  two attempts of one task running at once: an OVERLAP line
//               in the ledger (lib.sh's per-task flock was held), or an
//               attempt's start before the previous attempt's last line;
//   extra_runs  re-executions: per task, ledger starts minus one.
//
// The matching rule for extra runs (SPEC §6.3, "a task in flight at a crash
// runs again at most once per crash"): the ledger starts of a task, in
// ledger order, are mapped to its `task_claimed` events by attempt number
// (after a refunded claim an attempt number repeats; the starts of one
// number go to the last claims of that number). Every start but the last
// is an earlier execution that was re-run; it is *matched* only when its
// own process tree was killed: its claim ended as a lost attempt (a
// `task_reset` with reason `worker_lost` that is not a refund, or a
// `task_failed` with reason `worker_lost` — an adopted attempt that died
// without an exit record) and the harness killed the run's task trees
// (`Kill::trees`, a power cut) at or after the claim (`Kill::ms` >= the
// claim's `ts` - 1 s of clock slack). A kill of wizq alone never matches:
// its attempts must be adopted (task_reset with `refund`, then
// `task_adopted`), not run again. A claim that ended otherwise (completed,
// failed and retried, reset although its worker was never killed) makes
// the re-execution *unmatched*. Since each claim ends at most once, this
// also bounds the re-executions of a task by the tree kills.
//
// With `one_process` (one wizq at a time), every `task_reset` must also
// belong to a resume (be followed by `run_resumed`) or come after a
// `worker_joined` that is a join: a wizq that found another live worker
// and joined the run instead of resuming it, whose transactions then put
// the dead worker's tasks back (FORMAT.md, "Worker liveness"). One at a
// time, a join happens when a SIGKILLed wizq's worker lock is still held
// by a task child it was spawning: posix_spawn's child holds copies of all
// of wizq's descriptors until its exec (RunCheck::joins counts them).
#ifndef WIZQ_TESTS_TORTURE_CHECKER_H_
#define WIZQ_TESTS_TORTURE_CHECKER_H_

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wizq::torture {

using Json = nlohmann::json;

// Wall-clock milliseconds, the clock of the audit log's `ts`.
inline int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One SIGKILL of a wizq process by a harness: its pid and when (WallMs()).
struct Kill {
  int64_t pid = 0;
  int64_t ms = 0;
  // The run's task trees were killed too (a power cut), not only wizq.
  bool trees = false;
};

// Clock slack allowed between a claim's `ts` and the kill of its worker.
inline constexpr int64_t kKillSlackMs = 1000;

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline Json ParseJsonOrDiscarded(std::string_view text) {
  return Json::parse(text.begin(), text.end(), nullptr,
                     /*allow_exceptions=*/false);
}

// --- audit.jsonl -------------------------------------------------------------

// True if the line (without its newline) ends in `,"crc":"<8 hex>"}` and
// the crc is the CRC-32 of every byte before `,"crc":` (FORMAT.md).
inline bool AuditLineCrcOk(std::string_view line) {
  constexpr std::string_view kKey = ",\"crc\":\"";
  constexpr size_t kSuffix = 8 + 8 + 2;  // key, 8 hex digits, `"}`
  if (line.size() < kSuffix) return false;
  const size_t at = line.size() - kSuffix;
  if (line.substr(at, kKey.size()) != kKey) return false;
  if (line.substr(line.size() - 2) != "\"}") return false;
  uint32_t want = 0;
  for (char c : line.substr(at + kKey.size(), 8)) {
    int v = -1;
    if (c >= '0' && c <= '9') v = c - '0';
    if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    if (v < 0) return false;
    want = want << 4 | static_cast<uint32_t>(v);
  }
  const uLong got =
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(line.data()),
            static_cast<uInt>(at));
  return static_cast<uint32_t>(got) == want;
}

// audit.jsonl split as audit/log.cc does (FORMAT.md, "Reading the log"):
// the committed prefix, free space (blank lines or NULs at the end), a torn
// tail, or corruption (a bad line, blank line or `seq` gap with a good line
// after it: a kill -9 cannot leave a hole in the page cache, so unlike
// audit/log.cc this checker never excuses one).
struct AuditLog {
  std::vector<Json> events;         // the committed prefix
  std::vector<size_t> end_offsets;  // byte offset just past each event
  size_t committed_bytes = 0;       // size of the committed prefix
  size_t tail_bytes = 0;  // the torn tail (or unfinished batch), without
                          // the free space after it
  std::string error;      // corruption; empty if none
};

inline AuditLog ParseAudit(const std::string& text) {
  AuditLog log;
  std::vector<Json> batch;
  std::vector<size_t> batch_ends;
  int64_t seq = 0;
  bool bad_seen = false;
  size_t bad_at = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a line without its newline: torn
    const std::string_view line(text.data() + pos, nl - pos);
    Json j;
    bool good = AuditLineCrcOk(line);
    if (good) {
      j = ParseJsonOrDiscarded(line);
      good = j.is_object() && j.contains("seq") &&
             j["seq"].is_number_integer() && j.contains("event") &&
             j["event"].is_string();
    }
    if (good) {
      if (bad_seen) {
        log.error = "audit.jsonl: corrupt line at byte offset " +
                    std::to_string(bad_at) + " (a good line follows at " +
                    std::to_string(pos) + ")";
        return log;
      }
      if (j["seq"].get<int64_t>() != seq + 1) {
        log.error = "audit.jsonl: seq " + j["seq"].dump() + " after " +
                    std::to_string(seq) + " at byte offset " +
                    std::to_string(pos);
        return log;
      }
      seq++;
      const bool commit = j.value("commit", false);
      batch.push_back(std::move(j));
      batch_ends.push_back(nl + 1);
      if (commit) {
        for (size_t i = 0; i < batch.size(); i++) {
          log.events.push_back(std::move(batch[i]));
          log.end_offsets.push_back(batch_ends[i]);
        }
        batch.clear();
        batch_ends.clear();
        log.committed_bytes = nl + 1;
      }
    } else if (!bad_seen) {
      bad_seen = true;
      bad_at = pos;
    }
    pos = nl + 1;
  }
  size_t data_end = text.find_last_not_of(std::string_view("\n\0", 2));
  data_end = data_end == std::string::npos ? 0 : data_end + 1;
  if (data_end < text.size() && text[data_end] == '\n') data_end++;
  log.tail_bytes =
      data_end > log.committed_bytes ? data_end - log.committed_bytes : 0;
  return log;
}

// What a harness checks right after each kill: queue.json (if present)
// parses as a wizq queue, the committed prefix of audit.jsonl parses (a
// torn tail is fine, corruption is not), and the snapshot covers only
// committed events: its `seq` is in the prefix and its `audit_offset` is
// the byte offset just past that event. Returns "" if all holds.
// Read queue.json before audit.jsonl: with live workers the committed
// prefix only grows, so the snapshot read first can never be ahead of it.
inline std::string CheckStateAtKill(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string wizard = dir + "/.wizard";
  std::error_code ec;
  const bool have_queue = fs::exists(wizard + "/queue.json", ec);
  const std::string qtext =
      have_queue ? ReadFileOrEmpty(wizard + "/queue.json") : "";
  const bool have_audit = fs::exists(wizard + "/audit.jsonl", ec);
  const AuditLog log =
      ParseAudit(have_audit ? ReadFileOrEmpty(wizard + "/audit.jsonl") : "");
  if (!log.error.empty()) return log.error;
  if (!have_queue) return "";
  if (qtext.rfind("{\"format\":\"wizq-queue\"", 0) != 0) {
    return "queue.json does not start with {\"format\":\"wizq-queue\": " +
           qtext.substr(0, 80);
  }
  const Json q = ParseJsonOrDiscarded(qtext);
  if (!q.is_object()) {
    return "queue.json does not parse (" + std::to_string(qtext.size()) +
           " bytes)";
  }
  for (const char* key : {"version", "seq", "audit_offset", "next_task_id"}) {
    if (!q.contains(key) || !q[key].is_number_integer()) {
      return std::string("queue.json: no integer ") + key;
    }
  }
  if (!q.contains("tasks") || !q["tasks"].is_array() || !q.contains("status")) {
    return "queue.json: no tasks or status";
  }
  const int64_t seq = q["seq"];
  const int64_t offset = q["audit_offset"];
  if (seq < 1 || static_cast<size_t>(seq) > log.events.size()) {
    return "queue.json is at seq " + std::to_string(seq) +
           " but the committed log ends at " +
           std::to_string(log.events.size());
  }
  if (static_cast<int64_t>(log.end_offsets[seq - 1]) != offset) {
    return "queue.json: audit_offset " + std::to_string(offset) +
           " but event " + std::to_string(seq) + " ends at byte " +
           std::to_string(log.end_offsets[seq - 1]);
  }
  return "";
}

// --- the fan-out workflow (tests/data/cli/fanout.jsonc) ---------------------

// The <type, inputs> of every non-hook task a fan-out run of `n` has.
inline std::set<std::string> ExpectedFanoutTasks(int n) {
  std::set<std::string> want;
  want.insert("Root " + Json{{"n", n}}.dump());
  for (int i = 0; i < n; i++) {
    want.insert("Work " + Json{{"i", i}}.dump());
    if (i % 3 == 0) {
      want.insert("Leaf " + Json{{"k", i % 10}}.dump());
      want.insert("Leaf " + Json{{"k", (i + 5) % 10}}.dump());
    }
  }
  for (int g = 0; g < n / 9; g++) {
    want.insert("Group " + Json{{"g", g}}.dump());
    want.insert("Leaf " + Json{{"k", 100 + g}}.dump());
    want.insert("Leaf " + Json{{"k", 200 + g}}.dump());
  }
  return want;
}

// The role tests/data/cli/fanout/task.sh writes in the ledger for a task.
inline std::string FanoutRole(const Json& task) {
  const std::string type = task["type"];
  const Json& in = task["inputs"];
  if (task["origin"] == "Finally") {
    std::string value;
    for (char c : in.dump()) {
      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) value += c;
    }
    return "hook-" + type + "-" + value;
  }
  if (type == "Root") return "root";
  if (type == "Work") return "work-" + std::to_string(in["i"].get<int>());
  if (type == "Group") return "group-" + std::to_string(in["g"].get<int>());
  if (type == "Leaf") return "leaf-" + std::to_string(in["k"].get<int>());
  return "?";
}

// The number of tasks a completion of `task` asks for in a fan-out of `n`.
inline size_t FanoutAsked(const Json& task, int n) {
  if (task["origin"] == "Finally") return 0;
  if (task["type"] == "Root") return static_cast<size_t>(n + n / 9);
  if (task["type"] == "Group") return 2;
  if (task["type"] == "Work" && task["inputs"]["i"].get<int>() % 3 == 0) {
    return 2;
  }
  return 0;
}

// --- the ledger (tests/data/cli/lib.sh) --------------------------------------

struct LedgerEntry {
  size_t index = 0;  // position in the ledger: the order of events
  std::string kind;  // start, end, OVERLAP
  int64_t task = 0;
  int attempt = 0;
  int64_t pid = 0;
  std::string role;
};

inline std::vector<LedgerEntry> ReadLedgerFile(const std::string& path) {
  std::vector<LedgerEntry> out;
  std::istringstream text(ReadFileOrEmpty(path));
  std::string line;
  for (size_t i = 0; std::getline(text, line); i++) {
    std::istringstream in(line);
    LedgerEntry l;
    l.index = i;
    in >> l.kind >> l.task >> l.attempt >> l.pid >> l.role;
    out.push_back(l);
  }
  return out;
}

// The files of `dir` some process holds a flock on (lib.sh's locks/: a
// task's process tree holds its lock while any process of it lives).
inline std::vector<std::string> HeldFlocks(const std::string& dir) {
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

// --- the verdict on a finished run ------------------------------------------

struct RunCheck {
  int tasks = 0;  // tasks in queue.json
  int lost = 0;
  int duplicated = 0;
  int overlapped = 0;
  int extra_runs = 0;
  int extra_runs_matched = 0;
  int extra_runs_unmatched = 0;
  int resets = 0;  // claims put back (task_reset)
  int joins = 0;   // wizq processes that joined the run (not started or
                   // resumed it), see CheckFanoutRun
  bool hook_runs_ok = true;
  std::vector<std::string> errors;  // every violation, counted or not

  bool ok() const { return errors.empty(); }
  void Fail(const std::string& msg) { errors.push_back(msg); }
};

namespace internal {

// One `task_claimed` of a task and how it ended.
struct Claim {
  const Json* claimed = nullptr;
  const Json* ended = nullptr;  // task_reset, task_completed, task_failed
};

inline std::string TaskName(int64_t id, const Json& t) {
  return "task " + std::to_string(id) + " (" + t["type"].get<std::string>() +
         " " + t["inputs"].dump() + ", " + t["origin"].get<std::string>() + ")";
}

}  // namespace internal

// Checks a fan-out run of `n` in `dir` that should have completed. `kills`
// are the SIGKILLs of wizq processes by the harness; `one_process` is true
// when only one wizq ran at a time (then tasks are put back only by a
// resume). queue.json and the log are read as they are; `wizq status` is
// the caller's business.
inline RunCheck CheckFanoutRun(const std::string& dir, int n,
                               const std::vector<Kill>& kills,
                               bool one_process) {
  namespace fs = std::filesystem;
  using internal::Claim;
  using internal::TaskName;
  RunCheck c;
  const std::set<std::string> expected = ExpectedFanoutTasks(n);
  // Root and the n/9 Groups have a finally hook each.
  const int expected_hooks = 1 + n / 9;

  // --- the audit log: one gap-free committed sequence, one run, finished
  // once.
  const AuditLog log =
      ParseAudit(ReadFileOrEmpty(dir + "/.wizard/audit.jsonl"));
  if (!log.error.empty()) c.Fail(log.error);
  if (log.tail_bytes > 0) {
    c.Fail("audit.jsonl ends in " + std::to_string(log.tail_bytes) +
           " bytes of torn tail or unfinished batch");
  }
  const std::vector<Json>& audit = log.events;
  if (audit.empty()) {
    c.Fail("no committed audit event");
    c.lost = static_cast<int>(expected.size()) + expected_hooks;
    return c;
  }
  int run_started = 0, run_finished = 0;
  std::map<std::string, int64_t> worker_pids;
  for (const Json& e : audit) {
    const std::string ev = e["event"];
    if (ev == "run_started") run_started++;
    if (ev == "run_finished") {
      run_finished++;
      if (e["status"] != "completed") c.Fail("run_finished: " + e.dump());
    }
    if (ev == "worker_joined") {
      worker_pids[e["worker"]] = e["pid"].get<int64_t>();
    }
  }
  if (run_started != 1) {
    c.Fail("run_started " + std::to_string(run_started) +
           " times: the run was started over");
  }
  if (run_finished != 1) {
    c.Fail("run_finished " + std::to_string(run_finished) + " times");
  }
  std::error_code ec;
  if (fs::exists(dir + "/.wizard/archive", ec)) {
    c.Fail("a queue was archived: the run was restarted instead of resumed");
  }

  // --- queue.json: exact at rest, every task done, each <type, inputs>
  // once.
  const Json q =
      ParseJsonOrDiscarded(ReadFileOrEmpty(dir + "/.wizard/queue.json"));
  if (!q.is_object() || !q.contains("tasks") || !q["tasks"].is_array()) {
    c.Fail("queue.json does not parse");
    c.lost = static_cast<int>(expected.size()) + expected_hooks;
    return c;
  }
  if (q["status"] != "completed")
    c.Fail("queue.json status " + q["status"].dump());
  if (q["seq"] != audit.back()["seq"]) {
    c.Fail("queue.json is at seq " + q["seq"].dump() + ", the log at " +
           audit.back()["seq"].dump() + ": not exact although at rest");
  }
  std::set<int64_t> lost;  // ids of tasks that did not complete
  std::map<int64_t, Json> tasks;
  std::map<int64_t, std::vector<int64_t>> kids;  // by parent_id
  std::set<std::string> seen;
  std::map<int64_t, int> hooks_of;  // owner -> number of hooks
  for (const Json& t : q["tasks"]) {
    const int64_t id = t["id"];
    tasks[id] = t;
    const Json& p = t["parent_id"];
    kids[p.is_number_integer() ? p.get<int64_t>() : 0].push_back(id);
    if (t["state"] != "done") {
      c.Fail(TaskName(id, t) + " is " + t["state"].dump() + ", not done");
      lost.insert(id);
    }
    if (t["origin"] == "Finally") {
      hooks_of[t["finally_for"].get<int64_t>()]++;
      continue;
    }
    const std::string key =
        t["type"].get<std::string>() + " " + t["inputs"].dump();
    if (!seen.insert(key).second) {
      c.Fail("submitted twice: " + key);
      c.duplicated++;
    }
    if (!expected.count(key)) c.Fail("a task the run should not have: " + key);
  }
  c.tasks = static_cast<int>(tasks.size());
  for (const std::string& key : expected) {
    if (!seen.count(key)) {
      c.Fail("never submitted: " + key);
      c.lost++;
    }
  }
  for (const auto& [id, t] : tasks) {
    const bool has_hook = t["origin"] != "Finally" &&
                          (t["type"] == "Root" || t["type"] == "Group");
    const int want = has_hook ? 1 : 0;
    if (hooks_of[id] == want) continue;
    c.Fail(TaskName(id, t) + " has " + std::to_string(hooks_of[id]) +
           " finally hooks, not " + std::to_string(want));
    c.hook_runs_ok = false;
    if (hooks_of[id] < want) c.lost++;
    if (hooks_of[id] > want) c.duplicated += hooks_of[id] - want;
  }

  // --- per task, from the log: its claims and how each ended; attempts
  // count at claim, except that a claim put back before its attempt
  // started is refunded (`refund`): the next claim has the same number.
  std::map<int64_t, std::vector<const Json*>> timeline;
  std::map<int64_t, int64_t> submitted_seq, finished_seq;
  bool last_join_was_join = false;
  for (size_t i = 0; i < audit.size(); i++) {
    const Json& e = audit[i];
    const std::string ev = e["event"];
    if (ev == "task_submitted") submitted_seq[e["id"]] = e["seq"];
    if (ev == "task_claimed" || ev == "task_reset" || ev == "task_completed" ||
        ev == "task_failed") {
      timeline[e["id"].get<int64_t>()].push_back(&e);
    }
    if (ev == "task_completed") finished_seq[e["id"]] = e["seq"];
    if (ev == "worker_joined") {
      // Joined, not started or resumed: its open found another live
      // worker. One at a time, that can only be the dead one's lock, held
      // for a moment by a task child it had not finished spawning.
      bool opened_run = false;
      for (size_t j = i; j > 0; j--) {
        const Json& prev = audit[j - 1];
        if (prev.value("commit", false)) break;  // the previous commit
        const std::string pe = prev["event"];
        if (pe == "run_started" || pe == "run_resumed") opened_run = true;
      }
      last_join_was_join = !opened_run;
      if (!opened_run) c.joins++;
    }
    if (ev == "task_reset") c.resets++;
    if (ev == "task_reset" && one_process) {
      // A resume puts tasks back, then says so; a join (above) puts them
      // back in its first transactions.
      size_t j = i + 1;
      while (j < audit.size() && (audit[j]["event"] == "task_reset" ||
                                  audit[j]["event"] == "task_failed")) {
        j++;
      }
      const bool resume =
          j < audit.size() && audit[j]["event"] == "run_resumed";
      if (!resume && !last_join_was_join) {
        c.Fail("a task_reset outside a resume or join: " + e.dump());
      }
    }
  }
  // Every spawned task was submitted by the completion that spawned it, and
  // every task a completion asked for was either submitted or folded into
  // an existing task with the same <type, inputs> (task_deduplicated).
  std::map<int64_t, int> spawned_by;
  int deduplicated = 0;
  for (const Json& e : audit) {
    if (e["event"] == "task_deduplicated") deduplicated++;
    if (e["event"] != "task_completed") continue;
    for (const Json& k : e["spawned"]) spawned_by[k.get<int64_t>()]++;
    const int64_t id = e["id"];
    if (!tasks.count(id)) {
      c.Fail("completion of a task not in queue.json: " + e.dump());
      continue;
    }
    if (e["spawned"].size() + e["deduplicated"].size() !=
        FanoutAsked(tasks[id], n)) {
      c.Fail("a completion that does not account for its children: " +
             e.dump());
    }
    for (const Json& d : e["deduplicated"]) {
      if (!tasks.count(d.get<int64_t>())) {
        c.Fail("folded into an unknown task: " + e.dump());
      }
    }
  }
  if (deduplicated == 0 && n >= 16) c.Fail("the run never exercised dedup");
  for (const auto& [id, t] : tasks) {
    const bool spawned = t["origin"] == "Spawned";
    if (spawned_by[id] != (spawned ? 1 : 0)) {
      c.Fail(TaskName(id, t) + " is in the spawned list of " +
             std::to_string(spawned_by[id]) + " completions");
    }
    if (submitted_seq[id] <= 0) c.Fail(TaskName(id, t) + " never submitted");
  }

  std::map<int64_t, std::vector<Claim>> claims;
  std::map<int64_t, int> final_attempt;
  for (const auto& [id, t] : tasks) {
    const std::string name = TaskName(id, t);
    int attempts = 0;
    int completions = 0;
    std::string holder;
    std::vector<Claim>& cl = claims[id];
    for (const Json* e : timeline[id]) {
      const std::string ev = (*e)["event"];
      if (completions > 0) {
        c.Fail(name + ": an event after its completion: " + e->dump());
      }
      if (ev == "task_claimed") {
        if (!holder.empty()) {
          c.Fail(name + ": claimed while claimed: " + e->dump());
        }
        if ((*e)["attempt"] != ++attempts) {
          c.Fail(name + ": claimed as attempt " + (*e)["attempt"].dump() +
                 ", expected " + std::to_string(attempts));
        }
        holder = (*e)["worker"];
        cl.push_back(Claim{e, nullptr});
        continue;
      }
      if (holder.empty() || cl.empty()) {
        c.Fail(name + ": " + ev + " of an unclaimed task: " + e->dump());
        continue;
      }
      if (ev == "task_adopted") {
        if ((*e)["worker"] != holder || (*e)["attempt"] != attempts) {
          c.Fail(name + ": " + e->dump());
        }
        continue;
      }
      cl.back().ended = e;
      if (ev == "task_reset") {
        if ((*e)["worker"] != holder) c.Fail(name + ": " + e->dump());
        if ((*e)["attempt"] != attempts) c.Fail(name + ": " + e->dump());
        if ((*e)["reason"] != "worker_lost") {
          c.Fail(name + ": put back for another reason than a lost worker: " +
                 e->dump());
        }
        if (e->value("refund", false)) attempts--;
        const auto pid = worker_pids.find(holder);
        const bool was_killed =
            pid != worker_pids.end() &&
            std::any_of(kills.begin(), kills.end(),
                        [&](const Kill& k) { return k.pid == pid->second; });
        if (!was_killed) {
          c.Fail(name + ": put back although its worker " + holder +
                 " was not killed: " + e->dump());
        }
      } else if (ev == "task_completed") {
        if ((*e)["worker"] != holder) c.Fail(name + ": " + e->dump());
        completions++;
      } else if (ev == "task_failed" && (*e)["reason"] == "worker_lost" &&
                 e->value("will_retry", false)) {
        // An adopted attempt that died without an exit record: charged.
        if ((*e)["worker"] != holder) c.Fail(name + ": " + e->dump());
      } else {
        c.Fail(name + ": unexpected failure: " + e->dump());
      }
      holder.clear();
    }
    if (completions == 0) {
      c.Fail(name + " never completed");
      lost.insert(id);
    }
    if (completions > 1) {
      c.Fail(name + " completed " + std::to_string(completions) + " times");
      c.duplicated += completions - 1;
    }
    if (t["attempts"] != attempts) {
      c.Fail(name + ": queue.json says " + t["attempts"].dump() +
             " attempts, the log " + std::to_string(attempts));
    }
    final_attempt[id] = attempts;
  }

  // --- the ledger: attempts never overlapped, the completed attempt ran
  // from start to end, and every other execution is matched to a kill.
  const std::vector<LedgerEntry> ledger = ReadLedgerFile(dir + "/ledger");
  std::map<int64_t, std::vector<const LedgerEntry*>> by_task;
  for (const LedgerEntry& l : ledger) {
    if (l.kind == "OVERLAP") {
      c.Fail("task " + std::to_string(l.task) + " attempt " +
             std::to_string(l.attempt) + " (" + l.role +
             ") started while an earlier attempt still ran");
      c.overlapped++;
    } else if (l.kind != "start" && l.kind != "end") {
      c.Fail("ledger line " + std::to_string(l.index) + ": kind " + l.kind);
    }
    if (!tasks.count(l.task)) {
      c.Fail("ledger line of unknown task " + std::to_string(l.task));
      continue;
    }
    by_task[l.task].push_back(&l);
  }
  // A side effect belongs to one task: a task run before its submission
  // was durable would show up under an id that a resume gave to another.
  std::map<std::string, std::set<int64_t>> ids_of_role;
  for (const LedgerEntry& l : ledger) ids_of_role[l.role].insert(l.task);
  for (const auto& [role, ids] : ids_of_role) {
    if (ids.size() > 1) {
      c.Fail(role + " ran as " + std::to_string(ids.size()) +
             " different tasks");
      c.duplicated += static_cast<int>(ids.size()) - 1;
    }
  }
  std::map<int64_t, std::pair<size_t, size_t>> span;  // first, last line
  for (const auto& [id, t] : tasks) {
    const std::string name = TaskName(id, t);
    const std::vector<const LedgerEntry*>& lines = by_task[id];
    const int last = final_attempt[id];
    std::vector<const LedgerEntry*> starts;  // ledger order
    std::map<int, int> starts_of, ends_of;   // by attempt
    std::map<int, size_t> last_line_of;      // by attempt
    for (const LedgerEntry* l : lines) {
      if (l->role != FanoutRole(t)) {
        c.Fail(name + ": ledger line " + std::to_string(l->index) +
               " has role " + l->role);
      }
      if (l->attempt < 1 || l->attempt > last) {
        c.Fail(name + ": attempt " + std::to_string(l->attempt) +
               " ran but was never claimed");
      }
      last_line_of[l->attempt] = std::max(last_line_of[l->attempt], l->index);
      if (l->kind == "start") {
        starts.push_back(l);
        if (++starts_of[l->attempt] > 1) {
          c.Fail(name + ": attempt " + std::to_string(l->attempt) +
                 " started twice (a refunded claim ran?)");
        }
      } else if (l->kind == "end") {
        if (++ends_of[l->attempt] > 1) {
          c.Fail(name + ": attempt " + std::to_string(l->attempt) +
                 " ended twice");
        }
        if (!starts_of.count(l->attempt)) {
          c.Fail(name + ": attempt " + std::to_string(l->attempt) +
                 " ended before it started");
        }
      }
    }
    if (!lost.count(id) && !(starts_of.count(last) && ends_of.count(last))) {
      c.Fail(name + ": the completed attempt " + std::to_string(last) +
             " did not run to its end");
      lost.insert(id);
    }
    // Attempts in order, each over before the next began.
    for (size_t i = 1; i < starts.size(); i++) {
      const int prev = starts[i - 1]->attempt;
      if (starts[i]->attempt == prev) continue;  // reported above
      if (starts[i]->index < last_line_of[prev] || starts[i]->attempt < prev) {
        c.Fail(name + ": attempt " + std::to_string(starts[i]->attempt) +
               " started (ledger line " + std::to_string(starts[i]->index) +
               ") before attempt " + std::to_string(prev) + " was over (line " +
               std::to_string(last_line_of[prev]) + ")");
        c.overlapped++;
      }
    }
    if (!lines.empty()) span[id] = {lines.front()->index, lines.back()->index};

    // Extra runs: map the starts to claims (per attempt number, to the last
    // claims of that number), then every start but the last must have been
    // cut short by a kill of the worker holding its claim.
    if (starts.empty()) continue;
    c.extra_runs += static_cast<int>(starts.size()) - 1;
    const std::vector<Claim>& cl = claims[id];
    std::map<int, std::vector<size_t>> claims_of;  // attempt -> claim index
    for (size_t i = 0; i < cl.size(); i++) {
      claims_of[(*cl[i].claimed)["attempt"].get<int>()].push_back(i);
    }
    std::map<int, std::vector<size_t>> starts_by_attempt;
    for (size_t i = 0; i < starts.size(); i++) {
      starts_by_attempt[starts[i]->attempt].push_back(i);
    }
    std::vector<int64_t> claim_of(starts.size(), -1);
    for (const auto& [attempt, idx] : starts_by_attempt) {
      const std::vector<size_t>& cs = claims_of[attempt];
      for (size_t j = 0; j < idx.size(); j++) {
        const size_t from_end = idx.size() - j;
        if (from_end <= cs.size()) {
          claim_of[idx[j]] = static_cast<int64_t>(cs[cs.size() - from_end]);
        }
      }
    }
    for (size_t i = 0; i + 1 < starts.size(); i++) {
      const std::string run = name + ": the execution of attempt " +
                              std::to_string(starts[i]->attempt) +
                              " (ledger line " +
                              std::to_string(starts[i]->index) + ")";
      if (claim_of[i] < 0) {
        c.Fail(run + " has no claim: re-run unmatched");
        c.extra_runs_unmatched++;
        continue;
      }
      const Claim& claim = cl[claim_of[i]];
      if (claim_of[i + 1] >= 0 && claim_of[i + 1] <= claim_of[i]) {
        c.Fail(run + " and the next one map to claims out of order");
      }
      const Json* end = claim.ended;
      if (end != nullptr && (*end)["event"] == "task_completed") {
        c.Fail(run + " completed, yet the task ran again");
        c.duplicated++;
        c.extra_runs_unmatched++;
        continue;
      }
      bool matched = false;
      const bool lost_attempt =
          end != nullptr && (*end)["reason"] == "worker_lost" &&
          (((*end)["event"] == "task_reset" && !end->value("refund", false)) ||
           (*end)["event"] == "task_failed");
      if (lost_attempt) {
        // The execution began under the first claim of its attempt number
        // (later ones are refunded re-claims to adopt it): the kill of its
        // tree must come after that one.
        int64_t claim_ts = (*claim.claimed)["ts"].get<int64_t>();
        for (const Claim& other : cl) {
          if ((*other.claimed)["attempt"] == (*claim.claimed)["attempt"]) {
            claim_ts =
                std::min(claim_ts, (*other.claimed)["ts"].get<int64_t>());
          }
        }
        matched = std::any_of(kills.begin(), kills.end(), [&](const Kill& k) {
          return k.trees && k.ms + kKillSlackMs >= claim_ts;
        });
      }
      if (matched) {
        c.extra_runs_matched++;
      } else {
        c.Fail(run + " was re-run, but its claim " + claim.claimed->dump() +
               " ended in " +
               (end != nullptr ? end->dump() : std::string("nothing")) +
               ", not a lost attempt after a kill of the task trees: "
               "unmatched");
        c.extra_runs_unmatched++;
      }
    }
  }

  // --- finally hooks: submitted after everything below their owner
  // completed, and run (every attempt) after it all.
  std::function<void(int64_t, std::vector<int64_t>*)> subtree =
      [&](int64_t id, std::vector<int64_t>* out) {
        for (int64_t k : kids[id]) {
          out->push_back(k);
          subtree(k, out);
        }
      };
  for (const auto& [id, t] : tasks) {
    if (t["origin"] != "Finally") continue;
    const int64_t owner = t["finally_for"];
    const std::string hook = "finally hook " + std::to_string(id) +
                             " of task " + std::to_string(owner);
    std::vector<int64_t> below = {owner};
    subtree(owner, &below);
    for (int64_t d : below) {
      if (submitted_seq[id] <= finished_seq[d]) {
        c.Fail(hook + ": submitted before task " + std::to_string(d) +
               " completed");
        c.hook_runs_ok = false;
      }
      if (span.count(d) && span.count(id) && span[d].second >= span[id].first) {
        c.Fail(hook + ": ran before task " + std::to_string(d) +
               " was over (ledger lines " + std::to_string(span[d].second) +
               ", " + std::to_string(span[id].first) + ")");
        c.hook_runs_ok = false;
      }
    }
  }
  c.lost += static_cast<int>(lost.size());

  // --- nothing of any attempt is still running.
  for (const std::string& f : HeldFlocks(dir + "/locks")) {
    c.Fail("a task process outlived the run: " + f + " is locked");
  }
  return c;
}

}  // namespace wizq::torture

#endif  // WIZQ_TESTS_TORTURE_CHECKER_H_
