// A progress bar drawn from wizq's observer events (include/wizq/observer.h):
// what a GUI installer would do with its own widgets, here on a terminal.
#ifndef WIZQ_EXAMPLES_EMBED_PROGRESS_BAR_H_
#define WIZQ_EXAMPLES_EMBED_PROGRESS_BAR_H_

#include <cstdio>
#include <string>

#include "wizq/observer.h"

class ProgressBar : public wizq::Observer {
 public:
  // `redraw`: the bar is redrawn in place (a terminal); else one line per
  // finished task.
  explicit ProgressBar(bool redraw) : redraw_(redraw) {}
  void OnOpened(const std::string& run_id, const std::string& how,
                const wizq::RunProgress& p) override;
  void OnTaskStarted(int64_t id, const std::string& step, int attempt,
                     const wizq::RunProgress& p) override;
  void OnTaskFinished(int64_t id, const std::string& step,
                      const std::string& reason, const std::string& message,
                      bool will_retry, int spawned,
                      const wizq::RunProgress& p) override;
  void OnNote(const std::string& message) override;
  void OnRunFinished(wizq::RunOutcome outcome,
                     const wizq::RunProgress& p) override;

 private:
  void Draw(const wizq::RunProgress& p, const std::string& what);
  const bool redraw_;
};

#endif  // WIZQ_EXAMPLES_EMBED_PROGRESS_BAR_H_
