// Decoding of queue.json (format: queue/dir/snapshot.h).
#include <simdjson.h>

#include <algorithm>
#include <limits>

#include "queue/dir/snapshot.h"
#include "queue/json_util.h"
#include "util/canonical_json.h"
#include "util/utf8.h"

namespace wizq {
namespace {

using simdjson::error_code;
using simdjson::ondemand::object;
using simdjson::ondemand::value;

// No stored task takes fewer bytes of queue.json than this (EncodeSnapshot
// writes ~250 and more for each).
constexpr size_t kMinTaskBytes = 128;

class SnapshotDecoder {
 public:
  SnapshotDecoder(const std::string& path, const std::string& text)
      : path_(path), text_(PaddedView(text, &copy_)) {}

  Status Decode(SnapshotHeader* header, QueueState* state);

 private:
  error_code ReadTop(object root, SnapshotHeader* header, QueueState* state);
  error_code ReadTop(std::string_view key, value v, SnapshotHeader* header,
                     QueueState* state, bool* stop);
  error_code ReadTasks(value v, QueueState* state);
  error_code ReadTask(object obj, Task* t);
  error_code ReadTaskField(std::string_view key, value v, Task* t);
  error_code RawJsonChecked(value v, std::string_view* out);
  Status Error(error_code err) const;
  size_t StageOneOffset(error_code err) const;

  // `text` itself when its buffer has simdjson's padding after the data
  // (Env::ReadFile leaves it), else a padded copy of it in *copy.
  static simdjson::padded_string_view PaddedView(
      const std::string& text, simdjson::padded_string* copy) {
    if (text.capacity() >= text.size() + simdjson::SIMDJSON_PADDING) {
      return simdjson::padded_string_view(text.data(), text.size(),
                                          text.capacity());
    }
    *copy = simdjson::padded_string(text);
    return *copy;
  }

  const std::string& path_;
  simdjson::padded_string copy_;  // declared before text_, which may view it
  simdjson::padded_string_view text_;
  simdjson::ondemand::parser parser_;
  mutable simdjson::ondemand::document doc_;
  std::string context_ = "the top level";
  std::string problem_;  // set for semantic errors (err == INCORRECT_TYPE)

  // doc_ is valid: iterate() succeeded.
  bool iterating_ = false;
  // "version" was read (tasks are read only after it, so that a file of
  // another version leaves the state empty).
  bool saw_version_ = false;
};

// Where a problem found by simdjson's first pass is: the first byte that is
// not UTF-8, or the first control character inside a string; else 0.
size_t SnapshotDecoder::StageOneOffset(error_code err) const {
  const std::string_view text(text_.data(), text_.size());
  if (err == simdjson::UTF8_ERROR) {
    const size_t bad = FirstInvalidUtf8(text);
    return bad == std::string_view::npos ? 0 : bad;
  }
  bool in_string = false;
  for (size_t i = 0; i < text.size(); i++) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (in_string && c < 0x20) return i;
    if (in_string && c == '\\') {
      i++;
    } else if (c == '"') {
      in_string = !in_string;
    }
  }
  return 0;
}

Status SnapshotDecoder::Error(error_code err) const {
  const char* loc = nullptr;
  std::string where;
  // An empty or blank file fails iterate(): doc_ then has no location.
  if (iterating_ && !doc_.current_location().get(loc)) {
    where = " at byte offset " + std::to_string(loc - text_.data());
  }
  if (err == simdjson::UNCLOSED_STRING ||
      err == simdjson::INCOMPLETE_ARRAY_OR_OBJECT) {
    // The text ends inside a string, object or array: a file cut short.
    where = " at byte offset " + std::to_string(text_.size()) +
            " (the end of the file: it was cut short)";
  } else if (where.empty() || err == simdjson::UTF8_ERROR ||
             err == simdjson::UNESCAPED_CHARS) {
    // Found before iteration starts, so simdjson has no location for it.
    where = " at byte offset " + std::to_string(StageOneOffset(err));
  }
  std::string what = problem_.empty() ? simdjson::error_message(err) : problem_;
  return Status::Corruption(
      path_ + ": " + what + where + " (in " + context_ +
      "). The snapshot cannot be read; it was left untouched. Move the "
      ".wizard directory aside to start over, or restore the file");
}

// The exact text of a task's inputs. simdjson's On-Demand API checks only
// the structure of an object or array it skips over, so `{"a":tru}` or
// `[1,,2]` would pass, and queue.json has no checksum: the text is checked
// with the rule dedup keys use (every task's inputs passed it when it was
// submitted). The run's input and workflow are not: the input is only
// shown, and the workflow is parsed again when the run resumes.
error_code SnapshotDecoder::RawJsonChecked(value v, std::string_view* out) {
  error_code err = RawJson(v, out);
  if (!err && !IsValidJson(*out)) {
    problem_ = "not valid JSON";
    return simdjson::INCORRECT_TYPE;
  }
  return err;
}

Status SnapshotDecoder::Decode(SnapshotHeader* header, QueueState* state) {
  object root;
  error_code err = parser_.iterate(text_).get(doc_);
  iterating_ = !err;
  if (!err) err = doc_.get_object().get(root);
  if (!err) err = ReadTop(root, header, state);
  if (err) return Error(err);
  if (header->version == kSnapshotVersion) state->Rebuild();
  return Status::OK();
}

error_code SnapshotDecoder::ReadTop(object root, SnapshotHeader* header,
                                    QueueState* state) {
  bool saw_format = false;
  for (auto field : root) {
    std::string_view key;
    error_code err = KeyView(field, &key);
    if (err) return err;
    if (!saw_format && key != "format") {
      problem_ = "not a wizq queue file (the first field must be \"format\")";
      return simdjson::INCORRECT_TYPE;
    }
    saw_format = true;
    bool stop = false;
    err = ReadTop(key, field.value(), header, state, &stop);
    if (err || stop) return err;
  }
  if (!saw_format) {
    problem_ = "not a wizq queue file (empty object)";
    return simdjson::INCORRECT_TYPE;
  }
  return simdjson::SUCCESS;
}

error_code SnapshotDecoder::ReadTop(std::string_view key, value v,
                                    SnapshotHeader* h, QueueState* state,
                                    bool* stop) {
  RunInfo* run = state->mutable_run();
  context_ = "field \"" + std::string(key) + "\"";
  std::string_view s;
  int64_t n = 0;
  error_code err = simdjson::SUCCESS;
  if (key == "format") {
    err = StringView(v, &s);
    if (!err && s != kSnapshotFormat) {
      problem_ = "not a wizq queue file (format \"" + std::string(s) + "\")";
      return simdjson::INCORRECT_TYPE;
    }
  } else if (key == "version") {
    saw_version_ = true;
    err = v.get_int64().get(n);
    h->version = static_cast<int>(n);
    run->format_version = h->version;
    *stop = !err && n != kSnapshotVersion;
  } else if (key == "wizq_version") {
    err = StringView(v, &s);
    run->wizq_version = s;
  } else if (key == "run_id") {
    err = StringView(v, &s);
    h->run_id = run->run_id = s;
  } else if (key == "install_dir") {
    err = StringView(v, &s);
    h->install_dir = run->install_dir = s;
  } else if (key == "status") {
    err = StringView(v, &s);
    if (!err && !ParseRunStatus(s, &run->status)) {
      problem_ = "unknown status \"" + std::string(s) + "\"";
      return simdjson::INCORRECT_TYPE;
    }
  } else if (key == "seq") {
    err = v.get_int64().get(h->seq);
    // The next event's seq is seq + 1: it must not overflow.
    if (!err && (h->seq < 0 || h->seq == std::numeric_limits<int64_t>::max())) {
      problem_ = "seq " + std::to_string(h->seq) + " is out of range";
      return simdjson::INCORRECT_TYPE;
    }
    state->set_last_seq(h->seq);
  } else if (key == "audit_offset") {
    err = v.get_uint64().get(h->audit_offset);
  } else if (key == "started_ms") {
    err = v.get_int64().get(run->started_ms);
  } else if (key == "finished_ms") {
    err = v.get_int64().get(run->finished_ms);
  } else if (key == "resumes") {
    err = v.get_int64().get(n);
    // An int, with room for one more resume.
    if (!err && (n < 0 || n >= std::numeric_limits<int>::max())) {
      problem_ = "resumes " + std::to_string(n) + " is out of range";
      return simdjson::INCORRECT_TYPE;
    }
    run->resumes = static_cast<int>(n);
  } else if (key == "previous_run") {
    err = StringView(v, &s);
    run->previous_run = s;
  } else if (key == "no_reuse") {
    err = v.get_bool().get(run->no_reuse);
  } else if (key == "from") {
    err = ReadStrings(v, &run->from);
  } else if (key == "adopted") {
    err = v.get_int64().get(run->adopted);
  } else if (key == "input") {
    err = RawJson(v, &s);
    run->entry_input = s;
  } else if (key == "workflow") {
    err = RawJson(v, &s);
    run->workflow = s;
  } else if (key == "next_task_id") {
    // Derived again from the tasks; here only a hint of how many follow,
    // bounded by what the file could hold.
    if (!v.get_int64().get(n) && n > 1) {
      state->ReserveTasks(std::min<uint64_t>(static_cast<uint64_t>(n - 1),
                                             text_.size() / kMinTaskBytes));
    }
  } else if (key == "tasks") {
    if (!saw_version_) {
      problem_ = "\"tasks\" before \"version\" (or no \"version\")";
      return simdjson::INCORRECT_TYPE;
    }
    err = ReadTasks(v, state);
  }
  return err;
}

error_code SnapshotDecoder::ReadTasks(value v, QueueState* state) {
  simdjson::ondemand::array arr;
  error_code err = v.get_array().get(arr);
  if (err) return err;
  size_t index = 0;
  for (auto element : arr) {
    context_ = "tasks[" + std::to_string(index++) + "]";
    object obj;
    Task t;
    err = element.get_object().get(obj);
    if (!err) err = ReadTask(obj, &t);
    if (err) return err;
    Status s = state->AddStoredTask(std::move(t));
    if (!s.ok()) {
      problem_ = s.message();
      return simdjson::INCORRECT_TYPE;
    }
  }
  return simdjson::SUCCESS;
}

error_code SnapshotDecoder::ReadTask(object obj, Task* t) {
  for (auto field : obj) {
    std::string_view key;
    error_code err = KeyView(field, &key);
    if (!err) err = ReadTaskField(key, field.value(), t);
    if (err) {
      context_ += "." + std::string(key);
      return err;
    }
  }
  if (t->id == 0 || t->type.empty() || t->inputs.empty()) {
    problem_ = "a task needs id, type and inputs";
    return simdjson::INCORRECT_TYPE;
  }
  return simdjson::SUCCESS;
}

error_code SnapshotDecoder::ReadTaskField(std::string_view key, value v,
                                          Task* t) {
  std::string_view s;
  int64_t n = 0;
  error_code err = simdjson::SUCCESS;
  if (key == "id") {
    err = v.get_int64().get(t->id);
  } else if (key == "type") {
    err = StringView(v, &s);
    t->type = s;
  } else if (key == "inputs") {
    err = RawJsonChecked(v, &s);
    t->inputs = s;
  } else if (key == "state") {
    err = StringView(v, &s);
    if (!err && !ParseTaskState(s, &t->state)) {
      problem_ = "unknown task state \"" + std::string(s) + "\"";
      return simdjson::INCORRECT_TYPE;
    }
  } else if (key == "attempts" || key == "max_attempts") {
    err = v.get_int64().get(n);
    // An int, and room for one more attempt (a claim adds 1).
    if (!err && (n < 0 || n >= std::numeric_limits<int>::max())) {
      problem_ =
          std::string(key) + " " + std::to_string(n) + " is out of range";
      return simdjson::INCORRECT_TYPE;
    }
    (key == "attempts" ? t->attempts : t->max_attempts) = static_cast<int>(n);
  } else if (key == "parent_id") {
    err = IntOrNull(v, &t->parent_id);
  } else if (key == "origin") {
    err = StringView(v, &s);
    if (!err && !ParseOrigin(s, &t->origin)) {
      problem_ = "unknown origin \"" + std::string(s) + "\"";
      return simdjson::INCORRECT_TYPE;
    }
  } else if (key == "dedup_key") {
    err = StringView(v, &s);
    t->dedup_key = s;
  } else if (key == "claimed_by") {
    bool is_null = false;
    err = v.is_null().get(is_null);
    if (!err && !is_null) {
      err = StringView(v, &s);
      t->claimed_by = s;
    }
  } else if (key == "has_finally") {
    err = v.get_bool().get(t->has_finally);
  } else if (key == "finally_for") {
    err = IntOrNull(v, &t->finally_for);
  } else if (key == "generation") {
    err = v.get_int64().get(n);
    if (!err && (n < 1 || n >= std::numeric_limits<int>::max())) {
      problem_ = "generation " + std::to_string(n) + " is out of range";
      return simdjson::INCORRECT_TYPE;
    }
    t->generation = static_cast<int>(n);
  } else if (key == "hook_stale") {
    err = v.get_bool().get(t->hook_stale);
  } else if (key == "error") {
    bool is_null = false;
    err = v.is_null().get(is_null);
    if (!err && !is_null) {
      object e;
      err = v.get_object().get(e);
      if (!err) err = e["reason"].get_string().get(s);
      if (!err && s.empty()) {
        problem_ = "an error needs a reason";
        return simdjson::INCORRECT_TYPE;
      }
      t->error_reason = s;
      if (!err) err = e["message"].get_string().get(s);
      t->error_message = s;
    }
  } else if (key == "created_ms") {
    err = v.get_int64().get(t->created_ms);
  } else if (key == "updated_ms") {
    err = v.get_int64().get(t->updated_ms);
  } else if (key == "retry_at_ms") {
    err = v.get_int64().get(t->retry_at_ms);
  } else if (key == "reused_from") {
    err = v.get_int64().get(t->reused_from);
  } else if (key == "started") {
    err = v.get_bool().get(t->started);
  } else if (key == "claim_host") {
    err = v.get_string().get(s);
    t->claim_host = s;
  } else if (key == "answer") {
    err = RawJsonChecked(v, &s);
    t->answer = s;
  } else if (key == "answer_source") {
    err = StringView(v, &s);
    t->answer_source = s;
  } else if (key == "lease") {
    object l;
    err = v.get_object().get(l);
    if (!err) err = l["token"].get_string().get(s);
    t->lease_token = s;
    if (!err) err = l["expires_ms"].get_int64().get(t->lease_expires_ms);
    if (!err) err = l["agent"].get_string().get(s);
    t->agent = s;
  } else if (key == "attempt_timeout") {
    object a;
    err = v.get_object().get(a);
    if (!err) err = a["timeout_ms"].get_int64().get(t->timeout_ms);
    if (!err) err = a["deadline_ms"].get_int64().get(t->deadline_ms);
    if (!err) err = a["retry_on_timeout"].get_bool().get(t->retry_on_timeout);
  }
  // children, finally_task: derived again by QueueState::Rebuild.
  return err;
}

}  // namespace

Status DecodeSnapshot(const std::string& path, const std::string& text,
                      SnapshotHeader* header, QueueState* state) {
  SnapshotDecoder decoder(path, text);
  return decoder.Decode(header, state);
}

}  // namespace wizq
