#include "cli/inspect.h"

#include <simdjson.h>

#include <cstdio>
#include <string_view>

#include "audit/log.h"
#include "cli/json_events.h"
#include "cli/view_util.h"
#include "fs/env.h"
#include "queue/queue.h"
#include "util/exit_code.h"

namespace wizq {
namespace {

// Fields that hold a wall-clock time in ms: printed as a time.
bool IsEpochField(std::string_view key) {
  return key == "retry_at" || key == "lease_expires_ms" || key == "expires_ms";
}

}  // namespace

int PrintLog(const std::string& install_dir, int64_t task_id, bool json) {
  const std::string path = WizardDir(install_dir) + "/audit.jsonl";
  std::string data;
  Status s = Env::Posix()->ReadFile(path, &data);
  if (s.IsNotFound()) {
    return ReportCommandError(
        "log", 2,
        "no wizq run in " + install_dir + " (" + path + " does not exist)",
        path, json);
  }
  if (!s.ok())
    return ReportCommandError("log", kExitEnvironment, s.message(), path, json);
  LogParseResult parsed;
  s = ParseLog(path, data, 0, 1, &parsed);
  if (!s.ok())
    return ReportCommandError("log", kExitEnvironment, s.message(), path, json);
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
      int64_t ms = 0;
      if (IsEpochField(key) && !value.get(ms) && ms > 0) {
        fields += " " + std::string(key) + "=" + FormatTime(ms);
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
  return kExitCompleted;
}

}  // namespace wizq
