// The live progress line of `wizq run` on a terminal (docs/CLI.md,
// "Progress"), and the text helpers the human printer (views/progress.cc)
// shares with it: a task's value in short (like GNU parallel's --tag),
// durations, and cutting text to a number of terminal columns.
#ifndef WIZQ_VIEWS_PROGRESS_LINE_H_
#define WIZQ_VIEWS_PROGRESS_LINE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "orchestrator/observer.h"

namespace wizq {

// The columns `text` (UTF-8) takes on a terminal: wide (CJK, emoji) code
// points take 2, combining marks 0, others 1.
int DisplayWidth(const std::string& text);
// The longest prefix of `text` that fits in `columns`, whole code points
// only; "…" ends it when it was cut (and columns >= 1).
std::string CutToColumns(const std::string& text, int columns);
// `text` with control characters as spaces (invalid UTF-8 as '?'), cut to
// `columns`.
std::string ShortText(const std::string& text, int columns);
// A task's value (its inputs, JSON) in at most `columns` columns: the first
// string value in it, else compact JSON; "" for {} or null. Control
// characters become spaces.
std::string ShortValue(const std::string& inputs_json, int columns = 24);
// "850ms", "12s", "3m05s", "1h02m".
std::string ShortDuration(int64_t ms);
// Colours `text` red for a terminal when colour is on (stderr is a terminal
// and NO_COLOR is unset or empty, https://no-color.org).
std::string Red(const std::string& text, bool colour);
// Whether NO_COLOR allows colour.
bool ColourAllowed();
// The terminal's width in columns (stderr), 80 if unknown.
int TerminalColumns();

// The list every run with failed tasks ends with (docs/CLI.md): for each
// task its id, step, value, reason and message, the last lines of its last
// attempt's stderr and that file's path (tasks/exec/attempt_files.h), under
// `wizard_dir`. Lines without the "wizq: " prefix.
std::vector<std::string> FailureList(const std::vector<Task>& failed,
                                     const std::string& wizard_dir,
                                     bool colour);
// What FailureList shows of one task (also `wizq report`'s failures): its
// error message without the stderr tail the run loop appends to it, and
// the last lines (at most 5) of its last attempt's stderr file and that
// file's path; false when there is no such file or it cannot be read.
std::string FailureMessage(const std::string& message);
bool LastStderrLines(const Task& t, const std::string& wizard_dir,
                     std::vector<std::string>* lines, std::string* path);

// One line, redrawn in place every `period` from its own thread so that the
// clock moves while tasks run, always cut to the terminal's width (asked
// at each draw, so a resized pane is followed). Thread-safe.
class LiveLine {
 public:
  explicit LiveLine(
      std::chrono::milliseconds period = std::chrono::milliseconds(250));
  ~LiveLine();  // Stop()

  void TaskStarted(const Task& t, const Progress& p);
  // A task that will not run any more in this process (done, failed, put
  // back for a retry).
  void TaskEnded(int64_t id, const Progress& p);
  void Update(const Progress& p);
  // Draws now and starts the redraw thread if needed.
  void Draw();
  // Ends the redraw thread and clears the line.
  void Stop();

  // The text for a terminal of `columns` columns (tests use it directly).
  std::string Text(int columns) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Running {
    std::string step, value;
    Clock::time_point since;
  };
  std::string TextLocked(int columns, Clock::time_point now) const;
  void Loop();

  const std::chrono::milliseconds period_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool stop_ = false;
  Progress p_;
  Clock::time_point p_at_ = Clock::now();
  Clock::time_point first_start_{};
  int64_t ended_here_ = 0;  // tasks that ended in this process
  std::map<int64_t, Running> running_;
};

}  // namespace wizq

#endif  // WIZQ_VIEWS_PROGRESS_LINE_H_
