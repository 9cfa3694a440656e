// The NDJSON events of `wizq ... --json` on stdout (docs/CLI.md, "--json
// events": a stable, additive-only contract). Every event is one line:
// `{"event": NAME, "ts": MS_SINCE_EPOCH, ...}`, flushed as it is written.
#ifndef WIZQ_CLI_JSON_EVENTS_H_
#define WIZQ_CLI_JSON_EVENTS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "util/exit_code.h"
#include "util/json_writer.h"

namespace wizq {

// Writes one event: `event` and `ts` first, then what `fill` adds.
void EmitJsonEvent(const char* event,
                   const std::function<void(JsonWriter&)>& fill);

// What an `error` event says: the exit code (2 or 3), the message, and the
// file and field it is about when known (empty: left out).
struct JsonError {
  int code = kExitInvalid;
  std::string message, file, field;
};
void EmitJsonError(const JsonError& e);

// How the reading commands (`wizq status`, `wizq log`) end with exit 2 or 3:
// `wizq <command>: <message>` on stderr and, with `json`, the same as an
// `error` event on stdout (`file`: the file it is about, when known).
// Returns `code`.
int ReportCommandError(const char* command, int code,
                       const std::string& message, const std::string& file,
                       bool json);

// A task's value for an event: its JSON text (made one line) when it is at
// most `limit` bytes, else the first `limit` bytes of that text (cut at a
// UTF-8 character boundary) as a string, with *truncated set.
std::string BoundedValue(const std::string& json_text, size_t limit,
                         bool* truncated);

// The bound of `value` in task events: 1 KiB.
inline constexpr size_t kJsonValueLimit = 1024;

}  // namespace wizq

#endif  // WIZQ_CLI_JSON_EVENTS_H_
