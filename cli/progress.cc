#include "cli/progress.h"

#include <string>

#include "util/console.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

std::string Counts(const Progress& p) {
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "%lld done, %lld running, %lld pending, %lld failed (%.1fs)",
                static_cast<long long>(p.done),
                static_cast<long long>(p.running),
                static_cast<long long>(p.pending),
                static_cast<long long>(p.failed), p.elapsed_ms / 1000.0);
  return buf;
}

std::string TaskLabel(const Task& t) {
  std::string s = "task " + std::to_string(t.id) + " " + t.type;
  if (t.origin == Origin::kFinally) s += " (finally)";
  return s;
}

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

std::string ShellQuote(const std::string& s) {
  if (!s.empty() &&
      s.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789_-./=:,+@%") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

// TASK=VALUE with a value that fits the prompt: yes, the first choice, or
// a placeholder for input.
std::string AnswerArg(const WaitingPrompt& t) {
  std::string value = "TEXT";
  if (t.mode == "confirm") value = "yes";
  if (t.mode == "choice" && !t.choices.empty()) value = t.choices[0];
  return ShellQuote(std::to_string(t.id) + "=" + value);
}

std::string AnswerHint(const WaitingPrompt& t) {
  if (t.mode == "confirm") return "  (or " + std::to_string(t.id) + "=no)";
  if (t.mode == "choice") {
    std::string all;
    for (const std::string& c : t.choices) all += (all.empty() ? "" : ", ") + c;
    return "  (one of: " + all + ")";
  }
  return "";
}

std::string RunCommand(const ProgressOptions& o, const WaitingPrompt& t) {
  std::string out;
  for (const std::string& a : o.command) {
    out += (out.empty() ? "" : " ") + ShellQuote(a);
  }
  return out + " --answer " + AnswerArg(t);
}

std::string AnswerCommand(const ProgressOptions& o, const WaitingPrompt& t) {
  const std::string wizq = o.command.empty() ? "wizq" : o.command[0];
  return ShellQuote(wizq) + " answer --dir " + ShellQuote(o.install_dir) + " " +
         AnswerArg(t);
}

class Printer : public RunObserver {
 public:
  explicit Printer(const ProgressOptions& o) : o_(o) {}
  ~Printer() override { EndLiveLine(); }

  void OnOpened(const std::string& run_id, const OpenReport& r,
                const Progress& p) override {
    if (o_.json) {
      Json("run_opened", [&](JsonWriter& w) {
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
    if (r.archived_unfinished) {
      // Work is set aside, not lost: said even under --quiet.
      Always("the previous run had not finished; it was archived (" +
             r.archive_reason + ") to " + r.archived_to +
             "; its completed tasks are reused where they still match");
    } else if (!r.archived_to.empty()) {
      Line("archived the previous run (" + r.archive_reason + ") to " +
           r.archived_to);
    }
    if (!r.torn_tail_path.empty()) {
      Line("set aside a torn last audit record (a crash mid-write) in " +
           r.torn_tail_path);
    }
    switch (r.action) {
      case OpenAction::kStartedFresh:
        Plain("started run " + run_id);
        break;
      case OpenAction::kResumed:
        Line("resuming run " + run_id + ": " + std::to_string(r.tasks_pending) +
             " pending, " + std::to_string(r.tasks_done) + " done, " +
             std::to_string(r.tasks_reset) + " reset" +
             (r.tasks_adopted ? " (" + std::to_string(r.tasks_adopted) +
                                    " to adopt: still running or finished "
                                    "on their own)"
                              : "") +
             (r.tasks_lost ? ", " + std::to_string(r.tasks_lost) +
                                 " failed (worker_lost)"
                           : "") +
             (r.tasks_retried ? ", " + std::to_string(r.tasks_retried) +
                                    " failed task(s) retried (--retry-failed)"
                              : ""));
        break;
      case OpenAction::kJoined:
        Line("joined live run " + run_id + " as another worker: " + Counts(p));
        break;
      case OpenAction::kFinished:
        Line("run " + run_id + " has already finished: " + Counts(p) +
             "; nothing runs again (use --fresh to start over)");
        break;
      case OpenAction::kReadOnly:
      case OpenAction::kAttached:
        break;
    }
  }

  void OnTaskStarted(const Task& t, int attempt, const Progress& p) override {
    if (o_.json) {
      Json("task_started", [&](JsonWriter& w) {
        w.Key("id").Int(t.id);
        w.Field("type", t.type);
        w.Key("attempt").Int(attempt);
      });
    }
    Plain(TaskLabel(t) + " started (attempt " + std::to_string(attempt) + ")");
    Live(p);
  }

  void OnTaskFinished(const Task& t, const std::string& reason,
                      const std::string& message, bool will_retry, int spawned,
                      const Progress& p) override {
    if (o_.json) {
      Json("task_finished", [&](JsonWriter& w) {
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
    if (reason.empty() && t.reused_from != 0) {
      Plain(TaskLabel(t) + " reused (task " + std::to_string(t.reused_from) +
            " of the previous run)" +
            (spawned ? " (+" + std::to_string(spawned) + " tasks)" : ""));
    } else if (reason.empty()) {
      Plain(TaskLabel(t) + " done" +
            (spawned ? " (+" + std::to_string(spawned) + " tasks)" : ""));
    } else {
      Line(TaskLabel(t) + (will_retry ? " failed, will retry: " : " FAILED: ") +
           reason + ": " + message);
    }
    Live(p);
  }

  void OnRunFinished(RunStatus status, const Progress& p) override {
    if (o_.json) {
      Json("run_finished", [&](JsonWriter& w) {
        w.Field("status", RunStatusName(status));
        w.Key("done").Int(p.done);
        w.Key("failed").Int(p.failed);
        w.Key("reused").Int(p.reused);
        w.Key("live").Int(p.done + p.failed - p.reused);
        w.Key("duration_ms").Int(p.elapsed_ms);
      });
    }
    Line(std::string("run ") + RunStatusName(status) + ": " + Counts(p) + "; " +
         std::to_string(p.reused) + " reused, " +
         std::to_string(p.done + p.failed - p.reused) + " ran");
  }

  // Paused (SPEC §10): each waiting task and the exact commands that
  // answer it, on stderr even under --quiet (the caller must act), and as a
  // --json event.
  void OnPaused(const std::vector<WaitingPrompt>& waiting,
                const Progress& p) override {
    if (o_.json) {
      Json("run_paused", [&](JsonWriter& w) {
        w.Key("waiting").BeginArray();
        for (const WaitingPrompt& t : waiting) {
          w.BeginObject().Key("id").Int(t.id).Field("step", t.step);
          w.Field("mode", t.mode).Field("message", t.message);
          w.Field("command", RunCommand(o_, t));
          w.Field("answer_command", AnswerCommand(o_, t)).EndObject();
        }
        w.EndArray();
        w.Key("done").Int(p.done).Key("pending").Int(p.pending);
      });
    }
    EndLiveLine();
    console::WriteLine("wizq: paused: " + std::to_string(waiting.size()) +
                       " task(s) wait for an answer (" + Counts(p) + ")");
    for (const WaitingPrompt& t : waiting) {
      console::WriteLine("wizq:   task " + std::to_string(t.id) + " " + t.step +
                         " (" + t.mode + "): " + t.message);
      console::WriteLine("wizq:     answer and go on: " + RunCommand(o_, t) +
                         AnswerHint(t));
      console::WriteLine("wizq:     or record it only: " +
                         AnswerCommand(o_, t));
    }
  }

  void OnNote(const std::string& message) override {
    if (o_.json) {
      Json("note", [&](JsonWriter& w) { w.Field("message", message); });
    }
    Line(message);
  }

 private:
  template <typename F>
  void Json(const char* event, F fill) {
    std::string out;
    JsonWriter w(&out);
    w.BeginObject().Field("event", event);
    fill(w);
    w.EndObject();
    out.push_back('\n');
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }
  // A line shown in every mode but --quiet.
  // Lines go through util/console.h, which holds them back while a Prompt
  // step's question is open on the terminal.
  void Line(const std::string& s) {
    if (o_.quiet) return;
    console::WriteLine("wizq: " + s);
  }
  // A line shown in every mode, --quiet included.
  void Always(const std::string& s) {
    EndLiveLine();
    std::fprintf(stderr, "wizq: %s\n", s.c_str());
  }
  // A per-event line, only when stderr is not a terminal.
  void Plain(const std::string& s) {
    if (o_.quiet || o_.terminal) return;
    console::WriteLine("wizq: " + s);
  }
  void Live(const Progress& p) {
    if (o_.quiet || !o_.terminal) return;
    console::DrawLive("wizq: " + Counts(p));
    live_ = true;
  }
  void EndLiveLine() {
    if (live_) console::ClearLive();
    live_ = false;
  }

  ProgressOptions o_;
  bool live_ = false;
};

}  // namespace

std::unique_ptr<RunObserver> NewProgressPrinter(const ProgressOptions& o) {
  return std::make_unique<Printer>(o);
}

}  // namespace wizq
