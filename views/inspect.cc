#include "views/inspect.h"

#include <cstdio>
#include <string_view>

#include "queue/events.h"
#include "util/exit_code.h"
#include "views/json_events.h"
#include "views/run_errors.h"
#include "views/view_util.h"

namespace wizq {
namespace {

// Fields that hold a wall-clock time in ms: printed as a time.
bool IsEpochField(std::string_view key) {
  return key == "retry_at" || key == "lease_expires_ms" || key == "expires_ms";
}

// The first field named `key`, or nullptr.
const EventField* FieldOf(const std::vector<EventField>& fields,
                          std::string_view key) {
  for (const EventField& f : fields) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

int64_t IntOf(const std::vector<EventField>& fields, std::string_view key) {
  const EventField* f = FieldOf(fields, key);
  return f != nullptr && f->is_int ? f->int_value : 0;
}

// One event as `wizq log` shows it: seq, time, name, then every other
// field (times as times).
void PrintEvent(int64_t seq, const std::vector<EventField>& fields) {
  const EventField* name = FieldOf(fields, "event");
  const std::string event =
      name != nullptr && name->is_string ? name->text : "?";
  std::string rest;
  for (const EventField& f : fields) {
    if (f.key == "seq" || f.key == "ts" || f.key == "event" || f.key == "crc" ||
        f.key == "commit" || f.key == "workflow") {
      continue;
    }
    if (IsEpochField(f.key) && f.is_int && f.int_value > 0) {
      rest += " " + f.key + "=" + FormatTime(f.int_value);
      continue;
    }
    rest += " " + f.key + "=" + f.json;
  }
  std::printf("%6lld %s %-18.*s%s\n", static_cast<long long>(seq),
              FormatTime(IntOf(fields, "ts")).c_str(),
              static_cast<int>(event.size()), event.data(), rest.c_str());
}

}  // namespace

int OpenForLog(const RunPlace& place, bool json, std::unique_ptr<Store>* store,
               OpenReport* report) {
  StoreOptions o;
  o.mode = OpenMode::kReadOnly;
  Status s = place.Open(o, store, report);
  if (s.ok()) return kExitCompleted;
  return ReportCommandError("log", ExitCodeOfOpen(s), s.message(),
                            FileNamedIn(s.message()), json);
}

int ReportLogError(const RunPlace& place, const Status& s, bool json) {
  if (s.IsNotFound()) {
    return ReportCommandError(
        "log", kExitInvalid,
        "no wizq run " + place.Describe() + " (" + s.message() + ")", "", json);
  }
  return ReportCommandError("log", kExitEnvironment, s.message(),
                            FileNamedIn(s.message()), json);
}

int PrintLog(const RunPlace& place, int64_t task_id, bool json) {
  std::unique_ptr<Store> store;
  OpenReport opened;
  const int code = OpenForLog(place, json, &store, &opened);
  if (code != kExitCompleted) return code;
  EventFieldReader reader;
  std::vector<EventField> fields;
  std::vector<EventRecord> page;
  const size_t kPage = 1 << 16;
  int64_t seq = 0;
  do {
    Status s = store->ReadEvents(seq, kPage, &page);
    if (!s.ok()) return ReportLogError(place, s, json);
    for (const EventRecord& rec : page) {
      seq = rec.seq;
      if (!reader.Read(rec.line, &fields).ok()) continue;
      if (task_id > 0 && IntOf(fields, "id") != task_id &&
          IntOf(fields, "existing_id") != task_id) {
        continue;
      }
      if (json) {
        std::printf("%s\n", rec.line.c_str());
      } else {
        PrintEvent(rec.seq, fields);
      }
    }
  } while (page.size() == kPage);
  if (opened.torn_tail_bytes > 0) {
    std::fprintf(stderr,
                 "wizq log: %llu bytes of an unfinished write at the end "
                 "(set aside on the next run)\n",
                 static_cast<unsigned long long>(opened.torn_tail_bytes));
  }
  return kExitCompleted;
}

}  // namespace wizq
