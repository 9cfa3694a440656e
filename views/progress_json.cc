// The --json events of `wizq run` (docs/CLI.md "--json events"): one JSON
// object per line on stdout, flushed as it happens. The list of events and
// fields there is a stable, additive-only contract, checked by
// tests/json_events_test.cc against this printer's output.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "util/json_writer.h"
#include "util/utf8.h"
#include "views/json_events.h"
#include "views/progress_internal.h"

namespace wizq {

void EmitJsonEvent(const char* event,
                   const std::function<void(JsonWriter&)>& fill) {
  const int64_t ts = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Field("event", event).Field("ts", ts);
  fill(w);
  w.EndObject();
  out.push_back('\n');
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

void EmitJsonError(const JsonError& e) {
  EmitJsonEvent("error", [&](JsonWriter& w) {
    w.Field("code", e.code).Field("message", e.message);
    if (!e.file.empty()) w.Field("file", e.file);
    if (!e.field.empty()) w.Field("field", e.field);
  });
}

std::string BoundedValue(const std::string& json_text, size_t limit,
                         bool* truncated) {
  std::string text = json_text;
  // Task inputs are stored as the exact text received; one event is one
  // line, so a value with line breaks is re-serialized compactly (and, if
  // it does not parse, given as a string like a cut one).
  bool as_string = false;
  if (text.find_first_of("\r\n") != std::string::npos) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) {
      as_string = true;
    } else {
      text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  *truncated = text.size() > limit;
  if (!*truncated && !as_string) return text;
  size_t cut = 0;
  while (cut < text.size()) {
    const size_t n = Utf8SequenceLength(text, cut);
    if (n == 0 || cut + n > limit) break;
    cut += n;
  }
  std::string quoted;
  AppendJsonString(&quoted, std::string_view(text).substr(0, cut));
  return quoted;
}

namespace {

const char* ActionName(OpenAction a) {
  switch (a) {
    case OpenAction::kStartedFresh:
      return "started";
    case OpenAction::kResumed:
      return "resumed";
    case OpenAction::kJoined:
      return "joined";
    case OpenAction::kFinished:
      return "finished";
    case OpenAction::kReadOnly:
      return "read_only";
    case OpenAction::kAttached:
      return "attached";
  }
  return "?";
}

// The fields every task event has: id, type, value, value_truncated,
// finally.
void TaskFields(JsonWriter& w, const Task& t) {
  w.Key("id").Int(t.id);
  w.Field("type", t.type);
  bool truncated = false;
  w.Key("value").RawValue(BoundedValue(t.inputs.empty() ? "{}" : t.inputs,
                                       kJsonValueLimit, &truncated));
  w.Field("value_truncated", truncated);
  w.Field("finally", t.origin == Origin::kFinally);
}

class JsonPrinter : public RunObserver {
 public:
  explicit JsonPrinter(const ProgressOptions& o) : o_(o) {}

  void OnOpened(const std::string& run_id, const OpenReport& r,
                const Progress& p) override {
    run_id_ = run_id;
    EmitJsonEvent("run_opened", [&](JsonWriter& w) {
      w.Field("run_id", run_id);
      w.Field("action", ActionName(r.action));
      w.Key("tasks_pending").Int(r.tasks_pending);
      w.Key("tasks_done").Int(r.tasks_done);
      w.Key("tasks_reset").Int(r.tasks_reset);
      w.Key("tasks_failed").Int(p.failed);
      w.Key("tasks_lost").Int(r.tasks_lost);
      if (r.tasks_adopted) w.Key("tasks_adopted").Int(r.tasks_adopted);
      if (!r.archived_to.empty()) w.Field("archived_to", r.archived_to);
      if (r.archived_unfinished) w.Field("archived_unfinished", true);
      if (r.tasks_retried) w.Key("tasks_retried").Int(r.tasks_retried);
    });
  }

  void OnTaskStarted(const Task& t, int attempt, const Progress&) override {
    EmitJsonEvent("task_started", [&](JsonWriter& w) {
      TaskFields(w, t);
      w.Key("attempt").Int(attempt);
    });
  }

  // Called just before the task's OnTaskFinished (observer.h), as is
  // OnDeduplicated.
  void OnAttemptEnded(const Task& t, const AttemptEnd& end) override {
    end_task_ = t.id;
    end_ = end;
  }

  void OnTaskQueued(const Task& t, int attempt, const Progress& p) override {
    EmitJsonEvent("task_queued", [&](JsonWriter& w) {
      TaskFields(w, t);
      w.Key("attempt").Int(attempt);
      w.Key("queued").Int(p.queued);
    });
  }

  void OnDeduplicated(const Task& t, int count) override {
    dedup_task_ = t.id;
    dedup_count_ = count;
  }

  void OnTaskFinished(const Task& t, const std::string& reason,
                      const std::string& message, bool will_retry, int spawned,
                      const Progress&) override {
    EmitJsonEvent("task_finished", [&](JsonWriter& w) {
      TaskFields(w, t);
      w.Field("state", TaskStateName(t.state));
      w.Key("attempt").Int(t.attempts);
      if (t.reused_from != 0) w.Key("reused_from").Int(t.reused_from);
      if (!reason.empty()) {
        w.Field("reason", reason);
        w.Field("message", message);
        w.Field("will_retry", will_retry);
      }
      w.Key("spawned").Int(spawned);
      w.Key("deduplicated").Int(t.id == dedup_task_ ? dedup_count_ : 0);
      if (t.id == end_task_) AttemptFields(w);
    });
    end_task_ = 0;
  }

  void OnRunFinished(RunStatus status, const Progress& p) override {
    EmitJsonEvent("run_finished", [&](JsonWriter& w) {
      w.Field("run_id", run_id_);
      w.Field("status", RunStatusName(status));
      w.Key("done").Int(p.done);
      w.Key("failed").Int(p.failed);
      w.Key("reused").Int(p.reused);
      w.Key("live").Int(Ran(p));
      if (p.imported) w.Key("imported").Int(p.imported);
      w.Key("duration_ms").Int(p.elapsed_ms);
    });
  }

  void OnPaused(const std::vector<WaitingPrompt>& waiting,
                const Progress& p) override {
    EmitJsonEvent("run_paused", [&](JsonWriter& w) {
      w.Key("waiting").BeginArray();
      for (const WaitingPrompt& t : waiting) {
        w.BeginObject().Key("id").Int(t.id).Field("step", t.step);
        w.Field("mode", t.mode).Field("message", t.message);
        w.Field("command", PromptRunCommand(o_, t));
        w.Field("answer_command", PromptAnswerCommand(o_, run_id_, t))
            .EndObject();
      }
      w.EndArray();
      w.Key("done").Int(p.done).Key("pending").Int(p.pending);
    });
  }

  void OnInterrupted(const std::string& signal_name,
                     const Progress& p) override {
    EmitJsonEvent("run_interrupted", [&](JsonWriter& w) {
      w.Field("signal", signal_name);
      w.Key("done").Int(p.done);
      w.Key("failed").Int(p.failed);
      w.Key("pending").Int(p.pending);
      w.Key("running").Int(p.running);
      w.Key("duration_ms").Int(p.elapsed_ms);
    });
  }

  void OnNote(const std::string& message) override {
    EmitJsonEvent("note", [&](JsonWriter& w) { w.Field("message", message); });
  }

  void OnWarning(const std::string& message) override {
    EmitJsonEvent("warning",
                  [&](JsonWriter& w) { w.Field("message", message); });
  }

 private:
  // task_finished's fields of the attempt that ran: its exit code, how long
  // it took, its stderr file.
  void AttemptFields(JsonWriter& w) const {
    if (end_.exit_code >= 0) w.Key("exit_code").Int(end_.exit_code);
    if (end_.duration_ms >= 0) w.Key("duration_ms").Int(end_.duration_ms);
    if (!end_.stderr_path.empty()) w.Field("stderr", end_.stderr_path);
  }

  ProgressOptions o_;
  std::string run_id_;      // OnOpened's
  int64_t dedup_task_ = 0;  // OnDeduplicated's, for the next task_finished
  int dedup_count_ = 0;
  int64_t end_task_ = 0;  // OnAttemptEnded's, for the next task_finished
  AttemptEnd end_;
};

}  // namespace

std::unique_ptr<RunObserver> NewJsonProgressPrinter(const ProgressOptions& o) {
  return std::make_unique<JsonPrinter>(o);
}

}  // namespace wizq
