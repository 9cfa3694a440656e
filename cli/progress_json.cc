// The --json events of `wizq run` (docs/CLI.md "--json events"): one JSON
// object per line on stdout, flushed as it happens.
#include <cstdio>
#include <string>

#include "cli/progress_internal.h"
#include "util/json_writer.h"

namespace wizq {
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

class JsonPrinter : public RunObserver {
 public:
  explicit JsonPrinter(const ProgressOptions& o) : o_(o) {}

  void OnOpened(const std::string& run_id, const OpenReport& r,
                const Progress&) override {
    Emit("run_opened", [&](JsonWriter& w) {
      w.Field("run_id", run_id);
      w.Field("action", ActionName(r.action));
      w.Key("tasks_pending").Int(r.tasks_pending);
      w.Key("tasks_done").Int(r.tasks_done);
      w.Key("tasks_reset").Int(r.tasks_reset);
      if (r.tasks_adopted) w.Key("tasks_adopted").Int(r.tasks_adopted);
      if (!r.archived_to.empty()) w.Field("archived_to", r.archived_to);
      if (r.archived_unfinished) w.Field("archived_unfinished", true);
      if (r.tasks_retried) w.Key("tasks_retried").Int(r.tasks_retried);
    });
  }

  void OnTaskStarted(const Task& t, int attempt, const Progress&) override {
    Emit("task_started", [&](JsonWriter& w) {
      w.Key("id").Int(t.id);
      w.Field("type", t.type);
      w.Key("attempt").Int(attempt);
    });
  }

  void OnTaskFinished(const Task& t, const std::string& reason,
                      const std::string& message, bool will_retry, int spawned,
                      const Progress&) override {
    Emit("task_finished", [&](JsonWriter& w) {
      w.Key("id").Int(t.id);
      w.Field("type", t.type);
      w.Field("state", TaskStateName(t.state));
      w.Key("attempt").Int(t.attempts);
      if (t.reused_from != 0) w.Key("reused_from").Int(t.reused_from);
      if (!reason.empty()) {
        w.Field("reason", reason);
        w.Field("message", message);
        w.Field("will_retry", will_retry);
      }
      w.Key("spawned").Int(spawned);
    });
  }

  void OnRunFinished(RunStatus status, const Progress& p) override {
    Emit("run_finished", [&](JsonWriter& w) {
      w.Field("status", RunStatusName(status));
      w.Key("done").Int(p.done);
      w.Key("failed").Int(p.failed);
      w.Key("reused").Int(p.reused);
      w.Key("live").Int(p.done + p.failed - p.reused);
      w.Key("duration_ms").Int(p.elapsed_ms);
    });
  }

  void OnPaused(const std::vector<WaitingPrompt>& waiting,
                const Progress& p) override {
    Emit("run_paused", [&](JsonWriter& w) {
      w.Key("waiting").BeginArray();
      for (const WaitingPrompt& t : waiting) {
        w.BeginObject().Key("id").Int(t.id).Field("step", t.step);
        w.Field("mode", t.mode).Field("message", t.message);
        w.Field("command", PromptRunCommand(o_, t));
        w.Field("answer_command", PromptAnswerCommand(o_, t)).EndObject();
      }
      w.EndArray();
      w.Key("done").Int(p.done).Key("pending").Int(p.pending);
    });
  }

  void OnNote(const std::string& message) override {
    Emit("note", [&](JsonWriter& w) { w.Field("message", message); });
  }

 private:
  template <typename F>
  void Emit(const char* event, F fill) {
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Field("event", event);
    fill(w);
    w.EndObject();
    out.push_back('\n');
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }

  ProgressOptions o_;
};

}  // namespace

std::unique_ptr<RunObserver> NewJsonProgressPrinter(const ProgressOptions& o) {
  return std::make_unique<JsonPrinter>(o);
}

}  // namespace wizq
