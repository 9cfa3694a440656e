// Codecs of the human gate's events (task_answered, run_paused); the format
// is in queue/events.h and docs/FORMAT.md.
#include "queue/event_value.h"
#include "queue/events.h"
#include "queue/json_util.h"

namespace wizq {

void TaskAnswered::EncodeTo(JsonWriter& w) const {
  w.Key("id").Int(id);
  w.Key("answer").RawValue(answer);
  w.Field("source", source);
  w.Field("worker", worker);
}

EventError TaskAnswered::DecodeField(std::string_view key, EventValue v) {
  if (key == "id") return v.get_int64().get(id);
  if (key == "answer") return RawJson(v, &answer);
  if (key == "source") return StringView(v, &source);
  if (key == "worker") return StringView(v, &worker);
  return simdjson::SUCCESS;
}

void RunPaused::EncodeTo(JsonWriter& w) const {
  w.Key("waiting").RawValue(waiting);
}

EventError RunPaused::DecodeField(std::string_view key, EventValue v) {
  if (key == "waiting") return RawJson(v, &waiting);
  return simdjson::SUCCESS;
}

}  // namespace wizq
