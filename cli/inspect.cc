#include "cli/inspect.h"

#include <simdjson.h>

#include <cstdio>
#include <ctime>

#include "agent/run_status.h"
#include "audit/log.h"
#include "fs/env.h"
#include "queue/queue.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

std::string FormatTime(int64_t ms) {
  time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm;
  localtime_r(&secs, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03d", buf, static_cast<int>(ms % 1000));
  return out;
}

int64_t NowMs() {
  return static_cast<int64_t>(Env::Posix()->NowMicros() / 1000);
}

void PrintTree(const QueueState& s, const Task& t, int depth) {
  std::string line(static_cast<size_t>(depth) * 2, ' ');
  line += "#" + std::to_string(t.id) + " " + t.type;
  if (t.origin == Origin::kFinally) line += " (finally)";
  line += std::string("  ") + TaskStateName(t.state);
  line += "  attempts " + std::to_string(t.attempts) + "/" +
          std::to_string(t.max_attempts);
  if (t.state == TaskState::kInProgress && !t.lease_token.empty()) {
    const int64_t left = t.lease_expires_ms - NowMs();
    line +=
        "  leased by " + (t.agent.empty() ? "an agent" : t.agent) +
        (left >= 0 ? ", lapses in " + std::to_string((left + 999) / 1000) + "s"
                   : ", lapsed " + std::to_string(-left / 1000) +
                         "s ago (put back at the next transaction)");
  }
  if (!t.error_reason.empty()) {
    line += "  last error: " + t.error_reason + ": " + t.error_message;
  }
  std::printf("%s\n", line.c_str());
  for (int64_t c : t.children) PrintTree(s, *s.Find(c), depth + 1);
}

// The object agent/run_status.h builds (also the agent protocol's
// run_status), so both always agree.
void StatusJson(const QueueState& s) {
  std::printf("%s\n", RunStatusJson(s, NowMs()).c_str());
}

Status OpenReadOnly(const std::string& dir, std::unique_ptr<Queue>* q) {
  QueueOptions o;
  o.install_dir = dir;
  o.mode = OpenMode::kReadOnly;
  return Queue::Open(o, q, nullptr);
}

}  // namespace

int PrintStatus(const std::string& install_dir, bool json) {
  std::unique_ptr<Queue> q;
  Status s = OpenReadOnly(install_dir, &q);
  if (!s.ok()) {
    std::fprintf(stderr, "wizq status: %s\n", s.message().c_str());
    return s.IsNotFound() ? 2 : 3;
  }
  const QueueState& st = q->state();
  if (json) {
    StatusJson(st);
    return 0;
  }
  const RunInfo& r = st.run();
  std::printf("run %s  %s\ninstall dir %s\nstarted %s, resumed %d time(s)\n",
              r.run_id.c_str(), RunStatusName(r.status), r.install_dir.c_str(),
              FormatTime(r.started_ms).c_str(), r.resumes);
  std::printf(
      "tasks: %lld total, %lld done, %lld in progress, %lld pending, "
      "%lld failed\n\n",
      static_cast<long long>(st.total()),
      static_cast<long long>(st.count(TaskState::kDone)),
      static_cast<long long>(st.count(TaskState::kInProgress)),
      static_cast<long long>(st.count(TaskState::kPending)),
      static_cast<long long>(st.count(TaskState::kFailed)));
  for (const Task& t : st.tasks()) {
    if (t.parent_id == 0) PrintTree(st, t, 0);
  }
  return 0;
}

int PrintLog(const std::string& install_dir, int64_t task_id, bool json) {
  const std::string path = WizardDir(install_dir) + "/audit.jsonl";
  std::string data;
  Status s = Env::Posix()->ReadFile(path, &data);
  if (s.IsNotFound()) {
    std::fprintf(stderr, "wizq log: no wizq run in %s (%s does not exist)\n",
                 install_dir.c_str(), path.c_str());
    return 2;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "wizq log: %s\n", s.message().c_str());
    return 3;
  }
  LogParseResult parsed;
  s = ParseLog(path, data, 0, 1, &parsed);
  if (!s.ok()) {
    std::fprintf(stderr, "wizq log: %s\n", s.message().c_str());
    return 3;
  }
  simdjson::dom::parser parser;
  for (const LogRecord& rec : parsed.records) {
    simdjson::dom::object obj;
    if (parser.parse(rec.line.data(), rec.line.size()).get(obj)) continue;
    int64_t id = 0, existing = 0, ts = 0;
    if (task_id > 0) {
      if (obj["id"].get(id)) id = 0;
      if (obj["existing_id"].get(existing)) existing = 0;
      if (id != task_id && existing != task_id) continue;
    }
    if (json) {
      std::printf("%.*s\n", static_cast<int>(rec.line.size()), rec.line.data());
      continue;
    }
    if (obj["ts"].get(ts)) ts = 0;
    std::string_view event;
    if (obj["event"].get(event)) event = "?";
    std::string fields;
    for (auto [key, value] : obj) {
      if (key == "seq" || key == "ts" || key == "event" || key == "crc" ||
          key == "commit" || key == "workflow") {
        continue;
      }
      fields += " " + std::string(key) + "=" + simdjson::minify(value);
    }
    std::printf("%6lld %s %-18.*s%s\n", static_cast<long long>(rec.seq),
                FormatTime(ts).c_str(), static_cast<int>(event.size()),
                event.data(), fields.c_str());
  }
  if (parsed.torn_bytes > 0) {
    std::fprintf(stderr,
                 "wizq log: %llu bytes of an unfinished write at the end "
                 "(set aside on the next run)\n",
                 static_cast<unsigned long long>(parsed.torn_bytes));
  }
  return 0;
}

}  // namespace wizq
