#include "views/progress.h"

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fs/env.h"
#include "tasks/exec/attempt_files.h"
#include "util/console.h"
#include "util/shell_quote.h"
#include "views/progress_internal.h"
#include "views/progress_line.h"
#include "views/view_util.h"

namespace wizq {

int64_t Ran(const Progress& p) {
  return p.done + p.failed - p.reused - p.imported;
}

std::string ProgressCounts(const Progress& p) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1fs", p.elapsed_ms / 1000.0);
  std::string out = std::to_string(p.done) + " done, " +
                    std::to_string(p.running) + " running, ";
  if (p.queued > 0) out += std::to_string(p.queued) + " queued, ";
  return out + std::to_string(p.pending) + " pending, " +
         std::to_string(p.failed) + " failed (" + seconds + ")";
}

namespace {

// TASK=VALUE with a value that fits the prompt: yes, the first choice, or
// a placeholder for input.
std::string AnswerArg(const WaitingPrompt& t) {
  std::string value = "TEXT";
  if (t.mode == "confirm") value = "yes";
  if (t.mode == "choice" && !t.choices.empty()) value = t.choices[0];
  return ShellQuote(std::to_string(t.id) + "=" + value);
}

}  // namespace

std::string PromptAnswerHint(const WaitingPrompt& t) {
  if (t.mode == "confirm") return "  (or " + std::to_string(t.id) + "=no)";
  if (t.mode == "choice") {
    std::string all;
    for (const std::string& c : t.choices) all += (all.empty() ? "" : ", ") + c;
    return "  (one of: " + all + ")";
  }
  return "";
}

std::string PromptRunCommand(const ProgressOptions& o, const WaitingPrompt& t) {
  std::string out;
  for (const std::string& a : o.command) {
    out += (out.empty() ? "" : " ") + ShellQuote(a);
  }
  return out + " --answer " + AnswerArg(t);
}

std::string PromptAnswerCommand(const ProgressOptions& o,
                                const std::string& run_id,
                                const WaitingPrompt& t) {
  const std::string wizq = o.command.empty() ? "wizq" : o.command[0];
  return ShellQuote(wizq) + " answer --dir " + ShellQuote(o.install_dir) +
         o.place.CommandOptions(run_id) + " " + AnswerArg(t);
}

namespace {

class Printer : public RunObserver {
 public:
  explicit Printer(const ProgressOptions& o)
      : o_(o), colour_(o.terminal && ColourAllowed()) {}
  ~Printer() override { EndLiveLine(); }

  void OnOpened(const std::string& run_id, const OpenReport& r,
                const Progress& p) override {
    run_id_ = run_id;
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
      Always("set aside a torn last audit record (a crash mid-write) in " +
             r.torn_tail_path);
    }
    switch (r.action) {
      case OpenAction::kStartedFresh:
        Plain("started run " + run_id);
        if (r.tasks_retried > 0) {  // an import's failed tasks
          Line(std::to_string(r.tasks_retried) +
               " failed task(s) retried (--retry-failed)");
        }
        break;
      case OpenAction::kResumed:
        Line("resuming run " + run_id + ": " + ResumeCounts(r));
        break;
      case OpenAction::kJoined:
        Line("joined live run " + run_id +
             " as another worker: " + ProgressCounts(p));
        break;
      case OpenAction::kFinished:
        Line("run " + run_id + " has already finished: " + ProgressCounts(p) +
             "; nothing runs again (use " +
             (p.failed > 0 ? "--retry-failed to run its failed tasks again, "
                             "or --fresh to start over)"
                           : "--fresh to start over)"));
        break;
      case OpenAction::kReadOnly:
      case OpenAction::kAttached:
        break;
    }
  }

  void OnTaskStarted(const Task& t, int attempt, const Progress& p) override {
    Plain(TaskName(t) + " started (attempt " + std::to_string(attempt) + ")" +
          Tag(t));
    if (LiveShown()) live_.TaskStarted(t, p);  // (parses the value)
    Live();
  }

  // Counted apart on the live line; no line of its own (its start has one).
  void OnTaskQueued(const Task&, int, const Progress& p) override {
    live_.Update(p);
    Live();
  }

  void OnDeduplicated(const Task& t, int count) override {
    deduplicated_[t.id] = count;
  }

  void OnTaskFinished(const Task& t, const std::string& reason,
                      const std::string& message, bool will_retry, int spawned,
                      const Progress& p) override {
    const int dedup = deduplicated_[t.id];
    deduplicated_.erase(t.id);
    const std::string added = Added(spawned, dedup);
    if (reason.empty() && t.reused_from != 0) {
      Plain(TaskName(t) + " reused (task " + std::to_string(t.reused_from) +
            " of the previous run)" + added + Tag(t));
    } else if (reason.empty()) {
      Plain(TaskName(t) + " done" + added + Tag(t));
    } else if (will_retry) {
      Line(TaskLabel(t) + " failed, will retry: " + reason + ": " + message);
    } else {
      // A failure is never hidden, --quiet or not.
      Always(TaskLabel(t) + " " + Red("FAILED", colour_) + ": " + reason +
             ": " + message);
    }
    live_.TaskEnded(t.id, p);
    Live();
  }

  void OnRunFinished(RunStatus status, const Progress& p) override {
    EndLiveLine();
    const std::string name = RunStatusName(status);
    Line("run " + (status == RunStatus::kFailed ? Red(name, colour_) : name) +
         ": " + ProgressCounts(p) + "; " + std::to_string(p.reused) +
         " reused, " + std::to_string(Ran(p)) + " ran" +
         (p.imported ? ", " + std::to_string(p.imported) +
                           " finished before the import"
                     : ""));
    KeptLine();
  }

  // What the run keeps of its attempts' files, and how to free it.
  // A walk of .wizard/tasks (two stats per attempt): skipped when the line
  // would not be shown.
  void KeptLine() {
    if (o_.quiet) return;
    uint64_t bytes = 0;
    const std::string workspace =
        LocalWorkspace(o_.install_dir, o_.place.store, run_id_);
    if (!TaskFilesBytes(Env::Posix(), workspace, &bytes).ok() || bytes == 0) {
      return;
    }
    char size[32];
    std::snprintf(size, sizeof(size), "%.1f KiB", bytes / 1024.0);
    Line(std::string("task files kept: ") + size + " under " + workspace +
         "/tasks (wizq prune removes those of done tasks)");
  }

  // Paused (SPEC §10): each waiting task and the exact commands that
  // answer it, on stderr even under --quiet (the caller must act), and as a
  // --json event.
  void OnPaused(const std::vector<WaitingPrompt>& waiting,
                const Progress& p) override {
    EndLiveLine();
    console::WriteLine("wizq: paused: " + std::to_string(waiting.size()) +
                       " task(s) wait for an answer (" + ProgressCounts(p) +
                       ")");
    for (const WaitingPrompt& t : waiting) {
      console::WriteLine("wizq:   task " + std::to_string(t.id) + " " + t.step +
                         " (" + t.mode + "): " + t.message);
      console::WriteLine("wizq:     answer and go on: " +
                         PromptRunCommand(o_, t) + PromptAnswerHint(t));
      console::WriteLine("wizq:     or record it only: " +
                         PromptAnswerCommand(o_, run_id_, t));
    }
  }

  void OnInterrupted(const std::string& signal_name,
                     const Progress& p) override {
    (void)signal_name;
    live_.Update(p);
    EndLiveLine();
  }

  void OnFailures(const std::vector<Task>& failed,
                  const std::string& wizard_dir) override {
    EndLiveLine();
    for (const std::string& line : FailureList(failed, wizard_dir, colour_)) {
      console::WriteLine("wizq: " + line);
    }
  }

  void OnNote(const std::string& message) override { Line(message); }
  // A warning is shown even under --quiet.
  void OnWarning(const std::string& message) override {
    Always("warning: " + message);
  }

 private:
  // "task 3 Item (finally)".
  static std::string TaskName(const Task& t) {
    return "task " + std::to_string(t.id) + " " + t.type + HookLabel(t);
  }
  // " [a.txt]": the value in short (like GNU parallel's --tag); "" for {}.
  static std::string Tag(const Task& t) {
    const std::string value = ShortValue(t.inputs, 40);
    return value.empty() ? "" : " [" + value + "]";
  }
  // "task 3 Item [a.txt] (finally)": failure lines name the value first.
  static std::string TaskLabel(const Task& t) {
    return "task " + std::to_string(t.id) + " " + t.type + Tag(t) +
           HookLabel(t);
  }
  // " (+3 tasks, 1 deduplicated)", " (+3 tasks)" or "".
  static std::string Added(int spawned, int dedup) {
    if (spawned == 0 && dedup == 0) return "";
    return " (+" + std::to_string(spawned) + " tasks" +
           (dedup ? ", " + std::to_string(dedup) + " deduplicated" : "") + ")";
  }
  // "6 pending (4 of them reset), 1 done", and what earlier attempts left.
  static std::string ResumeCounts(const OpenReport& r) {
    std::string s = std::to_string(r.tasks_pending) + " pending";
    if (r.tasks_reset > 0) {
      s += " (" + std::to_string(r.tasks_reset) + " of them reset)";
    }
    s += ", " + std::to_string(r.tasks_done) + " done";
    if (r.tasks_adopted > 0) {
      s += "; " + std::to_string(r.tasks_adopted) +
           " attempt(s) of the previous worker still running or finished on "
           "their own: waited for, not run again";
    }
    if (r.tasks_lost > 0) {
      s += "; " + std::to_string(r.tasks_lost) +
           " failed (worker_lost, no attempts left), what they left running "
           "was stopped";
    }
    if (r.tasks_retried > 0) {
      s += "; " + std::to_string(r.tasks_retried) +
           " failed task(s) retried (--retry-failed)";
    }
    return s;
  }

  // A line shown in every mode but --quiet.
  // Lines go through util/console.h, which holds them back while a Prompt
  // step's question is open on the terminal.
  void Line(const std::string& s) {
    if (o_.quiet) return;
    console::WriteLine("wizq: " + s);
  }
  // A line shown in every mode, --quiet included: failures and warnings.
  void Always(const std::string& s) { console::WriteLine("wizq: " + s); }
  // A per-event line, only when stderr is not a terminal.
  void Plain(const std::string& s) {
    if (o_.quiet || o_.terminal) return;
    console::WriteLine("wizq: " + s);
  }
  bool LiveShown() const { return !o_.quiet && o_.terminal; }
  void Live() {
    if (LiveShown()) live_.Draw();
  }
  void EndLiveLine() { live_.Stop(); }

  ProgressOptions o_;
  const bool colour_;
  std::string run_id_;  // OnOpened's
  LiveLine live_;
  std::map<int64_t, int> deduplicated_;  // OnDeduplicated, by task id
};

// Runs each printer in turn (the human lines, then the --json events).
class Printers : public RunObserver {
 public:
  void Add(std::unique_ptr<RunObserver> p) { all_.push_back(std::move(p)); }

  void OnOpened(const std::string& run_id, const OpenReport& r,
                const Progress& p) override {
    for (auto& o : all_) o->OnOpened(run_id, r, p);
  }
  void OnTaskStarted(const Task& t, int attempt, const Progress& p) override {
    for (auto& o : all_) o->OnTaskStarted(t, attempt, p);
  }
  void OnTaskQueued(const Task& t, int attempt, const Progress& p) override {
    for (auto& o : all_) o->OnTaskQueued(t, attempt, p);
  }
  void OnTaskFinished(const Task& t, const std::string& reason,
                      const std::string& message, bool will_retry, int spawned,
                      const Progress& p) override {
    for (auto& o : all_) {
      o->OnTaskFinished(t, reason, message, will_retry, spawned, p);
    }
  }
  void OnRunFinished(RunStatus status, const Progress& p) override {
    for (auto& o : all_) o->OnRunFinished(status, p);
  }
  void OnNote(const std::string& message) override {
    for (auto& o : all_) o->OnNote(message);
  }
  void OnWarning(const std::string& message) override {
    for (auto& o : all_) o->OnWarning(message);
  }
  void OnPaused(const std::vector<WaitingPrompt>& waiting,
                const Progress& p) override {
    for (auto& o : all_) o->OnPaused(waiting, p);
  }
  void OnInterrupted(const std::string& signal_name,
                     const Progress& p) override {
    for (auto& o : all_) o->OnInterrupted(signal_name, p);
  }
  void OnDeduplicated(const Task& t, int count) override {
    for (auto& o : all_) o->OnDeduplicated(t, count);
  }
  void OnAttemptEnded(const Task& t, const AttemptEnd& end) override {
    for (auto& o : all_) o->OnAttemptEnded(t, end);
  }
  void OnFailures(const std::vector<Task>& failed,
                  const std::string& wizard_dir) override {
    for (auto& o : all_) o->OnFailures(failed, wizard_dir);
  }

 private:
  std::vector<std::unique_ptr<RunObserver>> all_;
};

}  // namespace

std::unique_ptr<RunObserver> NewHumanProgressPrinter(const ProgressOptions& o) {
  return std::make_unique<Printer>(o);
}

std::unique_ptr<RunObserver> NewProgressPrinter(const ProgressOptions& o) {
  auto all = std::make_unique<Printers>();
  all->Add(NewHumanProgressPrinter(o));
  if (o.json) all->Add(NewJsonProgressPrinter(o));
  return all;
}

}  // namespace wizq
