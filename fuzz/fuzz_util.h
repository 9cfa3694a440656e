// Helpers shared by the fuzz targets (fuzz/*_fuzzer.cc).
//
// Every target defines LLVMFuzzerTestOneInput. Built with clang and
// -fsanitize=fuzzer it is a libFuzzer binary; built with any compiler and
// fuzz/replay_main.cc it replays files (the corpus) once each, which is what
// `make test` runs. Property checks use FUZZ_CHECK, never assert(): they must
// fire in Release (NDEBUG) builds too.
#ifndef WIZQ_FUZZ_FUZZ_UTIL_H_
#define WIZQ_FUZZ_FUZZ_UTIL_H_

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "audit/log_format.h"
#include "queue/dir/snapshot.h"
#include "queue/dir/state.h"
#include "util/canonical_json.h"
#include "util/status.h"

namespace wizq::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* cond,
                              const std::string& msg) {
  std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", file, line, cond,
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_CHECK(cond, msg)                                          \
  do {                                                                 \
    if (!(cond)) ::wizq::fuzz::Fail(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)

// With WIZQ_FUZZ_DEBUG set in the environment, targets say why they stopped
// early on an input (to check what a seed reaches).
inline void Debug(const std::string& msg) {
  static const bool on = std::getenv("WIZQ_FUZZ_DEBUG") != nullptr;
  if (on) std::fprintf(stderr, "  %s\n", msg.c_str());
}

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

inline bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// The invariants QueueState keeps between its task vector and its indexes.
// Call only on a state whose last ApplyEvent/Rebuild succeeded.
inline void CheckStateInvariants(const QueueState& state) {
  const std::vector<Task>& tasks = state.tasks();
  int64_t counts[4] = {0, 0, 0, 0};
  std::set<int64_t> pending, in_progress;
  for (size_t i = 0; i < tasks.size(); i++) {
    const Task& t = tasks[i];
    const std::string who = "task " + std::to_string(t.id);
    FUZZ_CHECK(t.id == static_cast<int64_t>(i) + 1,
               who + " at index " + std::to_string(i));
    FUZZ_CHECK(state.Find(t.id) == &t, who);
    FUZZ_CHECK(t.parent_id >= 0 && t.parent_id < t.id, who + " parent");
    FUZZ_CHECK(t.finally_for >= 0 && t.finally_for < t.id, who + " owner");
    counts[static_cast<int>(t.state)]++;
    if (t.state == TaskState::kPending) pending.insert(t.id);
    if (t.state == TaskState::kInProgress) in_progress.insert(t.id);
    for (int64_t c : t.children) {
      const Task* child = state.Find(c);
      FUZZ_CHECK(child != nullptr && child->parent_id == t.id,
                 who + " lists child " + std::to_string(c));
    }
    if (t.finally_task != 0) {
      const Task* hook = state.Find(t.finally_task);
      FUZZ_CHECK(hook != nullptr && hook->finally_for == t.id,
                 who + " finally_task " + std::to_string(t.finally_task));
    }
  }
  for (const Task& t : tasks) {
    if (t.parent_id != 0) {
      const Task* parent = state.Find(t.parent_id);
      size_t n = 0;
      for (int64_t c : parent->children) n += c == t.id;
      FUZZ_CHECK(n == 1, "task " + std::to_string(t.id) + " listed " +
                             std::to_string(n) + " times by its parent");
    }
  }
  int64_t sum = 0;
  for (int s = 0; s < 4; s++) {
    FUZZ_CHECK(
        state.count(static_cast<TaskState>(s)) == counts[s],
        "count of " + std::string(TaskStateName(static_cast<TaskState>(s))));
    sum += counts[s];
  }
  FUZZ_CHECK(sum == state.total(), "counts do not add up");
  FUZZ_CHECK(state.pending() == pending, "pending index");
  FUZZ_CHECK(state.in_progress() == in_progress, "in_progress index");
  for (int64_t id : state.hooks_due()) {
    const Task* t = state.Find(id);
    // Due: succeeded, subtree settled, and no hook yet or only a stale one
    // (its subtree changed after it ran: the next generation is due).
    FUZZ_CHECK(t != nullptr && t->state == TaskState::kDone && t->has_finally &&
                   (t->finally_task == 0 || t->hook_stale) &&
                   t->open_children == 0,
               "hooks_due holds task " + std::to_string(id));
  }
  FUZZ_CHECK(state.next_task_id() == state.total() + 1, "next_task_id");
  if (state.AllSettled()) {
    for (const Task& t : tasks) {
      FUZZ_CHECK(t.terminal(), "AllSettled with task " + std::to_string(t.id) +
                                   " not finished");
    }
  }
}

// What a reader of the state can observe, as text, for comparing two states
// (one replayed live, one read back from a snapshot).
// Raw JSON kept as text: JsonWriter::RawValue writes "" as null, so the two
// are one value.
inline std::string RawOrNull(const std::string& json) {
  return json.empty() ? "null" : json;
}

inline std::string Describe(const QueueState& state) {
  const RunInfo& run = state.run();
  std::string out = "run " + run.run_id + " dir " + run.install_dir +
                    " status " + RunStatusName(run.status) + " seq " +
                    std::to_string(state.last_seq()) + " started " +
                    std::to_string(run.started_ms) + " finished " +
                    std::to_string(run.finished_ms) + " resumes " +
                    std::to_string(run.resumes) + " version " +
                    run.wizq_version + "\ninput " + RawOrNull(run.entry_input) +
                    "\nworkflow " + RawOrNull(run.workflow) + "\n";
  for (const Task& t : state.tasks()) {
    out += std::to_string(t.id) + " " + t.type + " " + RawOrNull(t.inputs) +
           " " + TaskStateName(t.state) + " a" + std::to_string(t.attempts) +
           "/" + std::to_string(t.max_attempts) + " p" +
           std::to_string(t.parent_id) + " " + OriginName(t.origin) + " " +
           t.dedup_key + " by " + t.claimed_by + " err " + t.error_reason +
           ":" + t.error_message + " f" + std::to_string(t.has_finally) +
           " ff" + std::to_string(t.finally_for) + " ft" +
           std::to_string(t.finally_task) + " ms " +
           std::to_string(t.created_ms) + "/" + std::to_string(t.updated_ms) +
           "/" + std::to_string(t.retry_at_ms) + " children";
    for (int64_t c : t.children) out += " " + std::to_string(c);
    out += "\n";
  }
  out += "hooks_due";
  for (int64_t id : state.hooks_due()) out += " " + std::to_string(id);
  out += state.AllSettled() ? "\nall settled\n" : "\nnot all settled\n";
  return out;
}

// A state that QueueState accepted must survive a checkpoint: the snapshot
// EncodeSnapshot writes decodes, describes the same state, and encodes to
// the same text again.
inline void CheckSnapshotRoundTrip(const QueueState& state,
                                   uint64_t audit_offset) {
  const std::string text = EncodeSnapshot(state, audit_offset);
  SnapshotHeader header;
  QueueState again;
  Status s = DecodeSnapshot("queue.json", text, &header, &again);
  FUZZ_CHECK(s.ok(), "a snapshot wizq wrote does not decode: " + s.ToString() +
                         "\n" + text);
  FUZZ_CHECK(header.version == kSnapshotVersion, "version");
  FUZZ_CHECK(header.audit_offset == audit_offset, "audit_offset");
  FUZZ_CHECK(header.seq == state.last_seq(), "seq");
  CheckStateInvariants(again);
  for (const Task& t : again.tasks()) {
    std::string canonical;
    FUZZ_CHECK(CanonicalizeJson(t.inputs, &canonical).ok(),
               "task " + std::to_string(t.id) +
                   " has inputs that are not "
                   "JSON: " +
                   t.inputs);
  }
  const std::string before = Describe(state), after = Describe(again);
  FUZZ_CHECK(before == after, "the snapshot changed the state:\n--- live\n" +
                                  before + "--- decoded\n" + after);
  FUZZ_CHECK(EncodeSnapshot(again, audit_offset) == text,
             "encoding is not stable");
}

// Each line with its `,"crc":"........"}` suffix (if any) replaced by the
// right one; lines that do not end in '}' are kept as they are.
inline std::string Rechecksum(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 64);
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    const bool has_nl = nl != std::string_view::npos;
    std::string_view line = data.substr(pos, has_nl ? nl - pos : nl);
    pos = has_nl ? nl + 1 : data.size();
    if (line.empty() || line.back() != '}') {
      out.append(line);
    } else {
      std::string_view body = line.substr(0, line.size() - 1);
      size_t crc = body.rfind(log_format::kCrcPrefix);
      if (crc != std::string_view::npos &&
          body.size() - crc == log_format::kCrcSuffixLength - 1 &&
          body.back() == '"') {
        body = body.substr(0, crc);
      }
      out.append(body);
      char buf[16];
      std::snprintf(buf, sizeof(buf), "%08lx",
                    crc32(0L, reinterpret_cast<const Bytef*>(body.data()),
                          static_cast<uInt>(body.size())));
      out.append(log_format::kCrcPrefix).append(buf, 8).append("\"}");
    }
    if (has_nl) out.push_back('\n');
  }
  return out;
}

}  // namespace wizq::fuzz

#endif  // WIZQ_FUZZ_FUZZ_UTIL_H_
