// Encoding and decoding of the audit events (format: queue/events.h).
#include "queue/events.h"

#include <utility>

#include "queue/event_value.h"
#include "queue/json_util.h"

namespace wizq {
namespace {

using simdjson::SUCCESS;

// A task id that may be absent: 0 is written as null.
void WriteId(JsonWriter& w, std::string_view key, int64_t id) {
  w.Key(key);
  if (id == 0) {
    w.Null();
  } else {
    w.Int(id);
  }
}

void WriteIds(JsonWriter& w, std::string_view key,
              const std::vector<int64_t>& ids) {
  w.Key(key).BeginArray();
  for (int64_t id : ids) w.Int(id);
  w.EndArray();
}

EventError ReadIds(EventValue v, std::vector<int64_t>* ids) {
  ids->clear();
  simdjson::ondemand::array arr;
  EventError err = v.get_array().get(arr);
  if (err) return err;
  for (auto element : arr) {
    int64_t id = 0;
    err = element.get_int64().get(id);
    if (err) return err;
    ids->push_back(id);
  }
  return SUCCESS;
}

EventError ReadInt(EventValue v, int64_t* out) {
  return v.get_int64().get(*out);
}
EventError ReadBool(EventValue v, bool* out) { return v.get_bool().get(*out); }

}  // namespace

// --- run_started -------------------------------------------------------------

void RunStarted::EncodeTo(JsonWriter& w) const {
  w.Key("format").Int(format);
  w.Field("run_id", run_id);
  w.Field("install_dir", install_dir);
  w.Field("wizq_version", wizq_version);
  w.Key("pid").Int(pid);
  w.Key("input").RawValue(input);
  w.Key("workflow").RawValue(workflow);
}

EventError RunStarted::DecodeField(std::string_view key, EventValue v) {
  if (key == "format") return ReadInt(v, &format);
  if (key == "run_id") return StringView(v, &run_id);
  if (key == "install_dir") return StringView(v, &install_dir);
  if (key == "wizq_version") return StringView(v, &wizq_version);
  if (key == "pid") return ReadInt(v, &pid);
  if (key == "input") return RawJson(v, &input);
  if (key == "workflow") return RawJson(v, &workflow);
  return SUCCESS;
}

// --- run_resumed -------------------------------------------------------------

void RunResumed::EncodeTo(JsonWriter& w) const {
  w.Key("tasks_pending").Int(tasks_pending);
  w.Key("tasks_done").Int(tasks_done);
  w.Key("tasks_reset").Int(tasks_reset);
  w.Key("tasks_lost").Int(tasks_lost);
  if (tasks_adopted != 0) w.Key("tasks_adopted").Int(tasks_adopted);
}

EventError RunResumed::DecodeField(std::string_view key, EventValue v) {
  if (key == "tasks_pending") return ReadInt(v, &tasks_pending);
  if (key == "tasks_done") return ReadInt(v, &tasks_done);
  if (key == "tasks_reset") return ReadInt(v, &tasks_reset);
  if (key == "tasks_lost") return ReadInt(v, &tasks_lost);
  if (key == "tasks_adopted") return ReadInt(v, &tasks_adopted);
  return SUCCESS;
}

// --- queue_archived ----------------------------------------------------------

void QueueArchived::EncodeTo(JsonWriter& w) const {
  w.Field("reason", reason);
  w.Field("path", path);
  if (no_reuse) w.Key("no_reuse").Bool(true);
  if (!from.empty()) {
    w.Key("from").BeginArray();
    for (const std::string& f : from) w.String(f);
    w.EndArray();
  }
}

EventError QueueArchived::DecodeField(std::string_view key, EventValue v) {
  if (key == "reason") return StringView(v, &reason);
  if (key == "path") return StringView(v, &path);
  if (key == "no_reuse") return ReadBool(v, &no_reuse);
  if (key == "from") return ReadStrings(v, &from);
  return SUCCESS;
}

// --- worker_joined, worker_left ----------------------------------------------

void WorkerJoined::EncodeTo(JsonWriter& w) const {
  w.Field("worker", worker);
  w.Key("pid").Int(pid);
}

EventError WorkerJoined::DecodeField(std::string_view key, EventValue v) {
  if (key == "worker") return StringView(v, &worker);
  if (key == "pid") return ReadInt(v, &pid);
  return SUCCESS;
}

void WorkerLeft::EncodeTo(JsonWriter& w) const { w.Field("worker", worker); }

EventError WorkerLeft::DecodeField(std::string_view key, EventValue v) {
  if (key == "worker") return StringView(v, &worker);
  return SUCCESS;
}

// --- task_submitted, task_deduplicated ---------------------------------------

void TaskSubmitted::EncodeTo(JsonWriter& w) const {
  w.Key("id").Int(id);
  w.Field("type", type);
  w.Key("inputs").RawValue(inputs);
  WriteId(w, "parent_id", parent_id);
  w.Field("origin", origin);
  w.Field("dedup_key", dedup_key);
  w.Key("max_attempts").Int(max_attempts);
  w.Field("has_finally", has_finally);
  WriteId(w, "finally_for", finally_for);
  if (generation > 1) w.Key("generation").Int(generation);
}

EventError TaskSubmitted::DecodeField(std::string_view key, EventValue v) {
  if (key == "id") return ReadInt(v, &id);
  if (key == "type") return StringView(v, &type);
  if (key == "inputs") return RawJson(v, &inputs);
  if (key == "parent_id") return IntOrNull(v, &parent_id);
  if (key == "origin") return StringView(v, &origin);
  if (key == "dedup_key") return StringView(v, &dedup_key);
  if (key == "max_attempts") return ReadInt(v, &max_attempts);
  if (key == "has_finally") return ReadBool(v, &has_finally);
  if (key == "finally_for") return IntOrNull(v, &finally_for);
  if (key == "generation") return ReadInt(v, &generation);
  return SUCCESS;
}

void TaskDeduplicated::EncodeTo(JsonWriter& w) const {
  w.Field("type", type);
  w.Field("dedup_key", dedup_key);
  w.Key("existing_id").Int(existing_id);
  WriteId(w, "parent_id", parent_id);
}

EventError TaskDeduplicated::DecodeField(std::string_view key, EventValue v) {
  if (key == "type") return StringView(v, &type);
  if (key == "dedup_key") return StringView(v, &dedup_key);
  if (key == "existing_id") return ReadInt(v, &existing_id);
  if (key == "parent_id") return IntOrNull(v, &parent_id);
  return SUCCESS;
}

// --- task_claimed, task_completed --------------------------------------------

void TaskClaimed::EncodeTo(JsonWriter& w) const {
  w.Key("id").Int(id);
  w.Field("type", type);
  w.Field("worker", worker);
  w.Key("attempt").Int(attempt);
  if (!host.empty()) w.Field("host", host);
  if (!lease.empty()) {
    w.Field("lease", lease);
    w.Key("lease_expires_ms").Int(lease_expires_ms);
    if (!agent.empty()) w.Field("agent", agent);
    if (timeout_ms > 0) {
      w.Key("timeout_ms").Int(timeout_ms);
      w.Field("retry_on_timeout", retry_on_timeout);
    }
  }
}

EventError TaskClaimed::DecodeField(std::string_view key, EventValue v) {
  if (key == "id") return ReadInt(v, &id);
  if (key == "type") return StringView(v, &type);
  if (key == "worker") return StringView(v, &worker);
  if (key == "attempt") return ReadInt(v, &attempt);
  if (key == "host") return StringView(v, &host);
  if (key == "lease") return StringView(v, &lease);
  if (key == "lease_expires_ms") return ReadInt(v, &lease_expires_ms);
  if (key == "agent") return StringView(v, &agent);
  if (key == "timeout_ms") return ReadInt(v, &timeout_ms);
  if (key == "retry_on_timeout") return ReadBool(v, &retry_on_timeout);
  return SUCCESS;
}

void TaskCompleted::EncodeTo(JsonWriter& w) const {
  w.Key("id").Int(id);
  w.Field("worker", worker);
  WriteIds(w, "spawned", spawned);
  WriteIds(w, "deduplicated", deduplicated);
  if (!def_hash.empty()) w.Field("def_hash", def_hash);
  if (reused_id != 0) {
    w.Key("reused").BeginObject();
    w.Field("run_id", reused_run_id);
    w.Key("id").Int(reused_id);
    w.EndObject();
  }
}

EventError TaskCompleted::DecodeField(std::string_view key, EventValue v) {
  if (key == "id") return ReadInt(v, &id);
  if (key == "worker") return StringView(v, &worker);
  if (key == "spawned") return ReadIds(v, &spawned);
  if (key == "deduplicated") return ReadIds(v, &deduplicated);
  if (key == "def_hash") return StringView(v, &def_hash);
  if (key == "reused") {
    simdjson::ondemand::object o;
    EventError err = v.get_object().get(o);
    if (err) return err;
    for (auto field : o) {
      std::string_view k;
      simdjson::ondemand::value fv;
      if ((err = field.unescaped_key().get(k))) return err;
      if ((err = field.value().get(fv))) return err;
      if (k == "run_id") err = StringView(fv, &reused_run_id);
      if (k == "id") err = ReadInt(fv, &reused_id);
      if (err) return err;
    }
    return SUCCESS;
  }
  return SUCCESS;
}

// --- task_failed, task_reset -------------------------------------------------

void TaskFailed::EncodeTo(JsonWriter& w) const {
  w.Key("id").Int(id);
  w.Field("worker", worker);
  w.Field("reason", reason);
  w.Field("message", message);
  w.Key("attempt").Int(attempt);
  w.Field("will_retry", will_retry);
  if (will_retry) w.Key("retry_at").Int(retry_at);
}

EventError TaskFailed::DecodeField(std::string_view key, EventValue v) {
  if (key == "id") return ReadInt(v, &id);
  if (key == "worker") return StringView(v, &worker);
  if (key == "reason") return StringView(v, &reason);
  if (key == "message") return StringView(v, &message);
  if (key == "attempt") return ReadInt(v, &attempt);
  if (key == "will_retry") return ReadBool(v, &will_retry);
  if (key == "retry_at") return ReadInt(v, &retry_at);
  return SUCCESS;
}

void TaskReset::EncodeTo(JsonWriter& w) const {
  w.Key("id").Int(id);
  w.Field("worker", worker);
  w.Field("reason", reason);
  w.Field("message", message);
  w.Key("attempt").Int(attempt);
  if (refund) w.Field("refund", true);
  if (never_started) w.Field("never_started", true);
}

EventError TaskReset::DecodeField(std::string_view key, EventValue v) {
  if (key == "id") return ReadInt(v, &id);
  if (key == "worker") return StringView(v, &worker);
  if (key == "reason") return StringView(v, &reason);
  if (key == "message") return StringView(v, &message);
  if (key == "attempt") return ReadInt(v, &attempt);
  if (key == "refund") return ReadBool(v, &refund);
  if (key == "never_started") return ReadBool(v, &never_started);
  return SUCCESS;
}

// --- run_finished ------------------------------------------------------------

void RunFinished::EncodeTo(JsonWriter& w) const {
  w.Field("status", status);
  w.Field("resumed", resumed);
  w.Key("tasks_total").Int(tasks_total);
  w.Key("tasks_done").Int(tasks_done);
  w.Key("tasks_failed").Int(tasks_failed);
  w.Key("duration_ms").Int(duration_ms);
  if (has_reuse_counts) {
    w.Key("tasks_reused").Int(tasks_reused);
    w.Key("tasks_live").Int(tasks_live);
  }
  if (tasks_adopted != 0) w.Key("tasks_adopted").Int(tasks_adopted);
  if (tasks_imported != 0) w.Key("tasks_imported").Int(tasks_imported);
}

EventError RunFinished::DecodeField(std::string_view key, EventValue v) {
  if (key == "status") return StringView(v, &status);
  if (key == "resumed") return ReadBool(v, &resumed);
  if (key == "tasks_total") return ReadInt(v, &tasks_total);
  if (key == "tasks_done") return ReadInt(v, &tasks_done);
  if (key == "tasks_failed") return ReadInt(v, &tasks_failed);
  if (key == "duration_ms") return ReadInt(v, &duration_ms);
  if (key == "tasks_reused") {
    has_reuse_counts = true;
    return ReadInt(v, &tasks_reused);
  }
  if (key == "tasks_live") return ReadInt(v, &tasks_live);
  if (key == "tasks_adopted") return ReadInt(v, &tasks_adopted);
  if (key == "tasks_imported") return ReadInt(v, &tasks_imported);
  return SUCCESS;
}

// --- task_retried ------------------------------------------------------------

void TaskRetried::EncodeTo(JsonWriter& w) const {
  w.Key("id").Int(id);
  w.Field("reason", reason);
  w.Field("error", error);
  w.Key("max_attempts").Int(max_attempts);
}

EventError TaskRetried::DecodeField(std::string_view key, EventValue v) {
  if (key == "id") return ReadInt(v, &id);
  if (key == "reason") return StringView(v, &reason);
  if (key == "error") return StringView(v, &error);
  if (key == "max_attempts") return ReadInt(v, &max_attempts);
  return SUCCESS;
}

// --- run_imported ------------------------------------------------------------

void RunImported::EncodeTo(JsonWriter& w) const {
  w.Field("source", source);
  w.Key("tasks_pending").Int(tasks_pending);
  w.Key("tasks_waiting").Int(tasks_waiting);
  w.Key("tasks_done").Int(tasks_done);
}

EventError RunImported::DecodeField(std::string_view key, EventValue v) {
  if (key == "source") return StringView(v, &source);
  if (key == "tasks_pending") return ReadInt(v, &tasks_pending);
  if (key == "tasks_waiting") return ReadInt(v, &tasks_waiting);
  if (key == "tasks_done") return ReadInt(v, &tasks_done);
  return SUCCESS;
}

// --- task_adopted ------------------------------------------------------------

void TaskAdopted::EncodeTo(JsonWriter& w) const {
  w.Key("id").Int(id);
  w.Field("worker", worker);
  w.Key("attempt").Int(attempt);
  w.Key("waited_ms").Int(waited_ms);
}

EventError TaskAdopted::DecodeField(std::string_view key, EventValue v) {
  if (key == "id") return ReadInt(v, &id);
  if (key == "worker") return StringView(v, &worker);
  if (key == "attempt") return ReadInt(v, &attempt);
  if (key == "waited_ms") return ReadInt(v, &waited_ms);
  return SUCCESS;
}

void TaskStarted::EncodeTo(JsonWriter& w) const {
  w.Key("id").Int(id);
  w.Field("worker", worker);
  w.Key("attempt").Int(attempt);
}

EventError TaskStarted::DecodeField(std::string_view key, EventValue v) {
  if (key == "id") return ReadInt(v, &id);
  if (key == "worker") return StringView(v, &worker);
  if (key == "attempt") return ReadInt(v, &attempt);
  return SUCCESS;
}

// --- dispatch ----------------------------------------------------------------

namespace {

// Makes *event the alternative whose kName is `name` (UnknownEvent if none):
// the table of event names is the variant's list of types.
template <size_t I = 1>
void MakeEvent(std::string_view name, Event* event) {
  if constexpr (I < std::variant_size_v<Event>) {
    using E = std::variant_alternative_t<I, Event>;
    if (name == E::kName) {
      event->emplace<I>();
    } else {
      MakeEvent<I + 1>(name, event);
    }
  } else {
    event->emplace<0>();
  }
}

EventError DecodeField(std::string_view key, EventValue v, Event* event) {
  return std::visit([&](auto& e) { return e.DecodeField(key, v); }, *event);
}

bool IsHeaderKey(std::string_view key) {
  return key == "seq" || key == "ts" || key == "event";
}

// One pass over the fields. Writers put seq, ts and event first, so the
// event's own fields are decoded as they come; a field before "event" (a
// line no wizq wrote) sets *again for a second pass.
EventError ReadFields(simdjson::ondemand::object obj, EventHeader* h,
                      Event* event, bool* again) {
  bool known = false;
  for (auto field : obj) {
    std::string_view key;
    EventError err = KeyView(field, &key);
    if (err) return err;
    EventValue v(field.value());
    if (key == "seq") {
      err = v.get_int64().get(h->seq);
    } else if (key == "ts") {
      err = v.get_int64().get(h->ts);
    } else if (key == "event") {
      err = StringView(v, &h->name);
      if (!err) MakeEvent(h->name, event);
      *again = *again || (known && !err);  // a second "event": start over
      known = !err;
    } else if (known) {
      err = DecodeField(key, v, event);
    } else {
      *again = true;
    }
    if (err) return err;
  }
  return SUCCESS;
}

EventError ReadEventFields(simdjson::ondemand::object obj, Event* event) {
  for (auto field : obj) {
    std::string_view key;
    EventError err = KeyView(field, &key);
    if (!err && !IsHeaderKey(key))
      err = DecodeField(key, EventValue(field.value()), event);
    if (err) return err;
  }
  return SUCCESS;
}

}  // namespace

std::string_view EventName(const Event& e) {
  return std::visit(
      [](const auto& ev) -> std::string_view {
        using E = std::decay_t<decltype(ev)>;
        if constexpr (std::is_same_v<E, UnknownEvent>) {
          return {};
        } else {
          return E::kName;
        }
      },
      e);
}

EventDecoder::EventDecoder() : parser_(std::make_unique<Parser>()) {}
EventDecoder::~EventDecoder() = default;
EventDecoder::EventDecoder(EventDecoder&&) noexcept = default;
EventDecoder& EventDecoder::operator=(EventDecoder&&) noexcept = default;

Status EventDecoder::Decode(std::string_view line, EventHeader* header,
                            Event* event) {
  *header = EventHeader();
  event->emplace<0>();
  buffer_.reserve(line.size() + simdjson::SIMDJSON_PADDING);
  buffer_.assign(line.data(), line.size());
  simdjson::padded_string_view padded(buffer_.data(), buffer_.size(),
                                      buffer_.capacity());
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  bool again = false;
  EventError err = parser_->parser.iterate(padded).get(doc);
  if (!err) err = doc.get_object().get(obj);
  if (!err) err = ReadFields(obj, header, event, &again);
  if (!err && again && event->index() != 0) {
    // The last "event" names the kind; decode its fields afresh.
    MakeEvent(header->name, event);
    bool empty = false;
    err = obj.reset().get(empty);
    if (!err) err = ReadEventFields(obj, event);
  }
  if (err) {
    return Status::Corruption(
        std::string("audit event does not parse: ") +
        simdjson::error_message(static_cast<simdjson::error_code>(err)));
  }
  return Status::OK();
}

EventError UnknownEvent::DecodeField(std::string_view, EventValue) {
  return SUCCESS;
}

// --- lease_renewed -----------------------------------------------------------

void LeaseRenewed::EncodeTo(JsonWriter& w) const {
  w.Key("id").Int(id);
  w.Key("lease_expires_ms").Int(lease_expires_ms);
}

EventError LeaseRenewed::DecodeField(std::string_view key, EventValue v) {
  if (key == "id") return ReadInt(v, &id);
  if (key == "lease_expires_ms") return ReadInt(v, &lease_expires_ms);
  return SUCCESS;
}

}  // namespace wizq
