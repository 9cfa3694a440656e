// The inputs of the kill -9 tests' checker (tests/torture/checker.h): the
// harness's record of its kills, a run's audit.jsonl (parsed, committed
// prefix and torn tail) and queue.json as they must be right after a kill
// (CheckStateAtKill), the tasks of the fan-out workflow, and the ledger its
// tasks write. Header-only, no gtest, like the checker.
#ifndef WIZQ_TESTS_TORTURE_CHECKER_INPUTS_H_
#define WIZQ_TESTS_TORTURE_CHECKER_INPUTS_H_

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
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

}  // namespace wizq::torture

#endif  // WIZQ_TESTS_TORTURE_CHECKER_INPUTS_H_
