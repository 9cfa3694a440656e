#include "progress_bar.h"

void ProgressBar::Draw(const wizq::RunProgress& p, const std::string& what) {
  const int64_t total = p.total > 0 ? p.total : 1;
  const int64_t settled = p.done + p.failed;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(settled * kWidth / total);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "%s[%s] %lld/%lld %-32.32s%s", redraw_ ? "\r" : "",
               bar.c_str(), static_cast<long long>(settled),
               static_cast<long long>(p.total), what.c_str(),
               redraw_ ? "" : "\n");
  std::fflush(stderr);
}

void ProgressBar::OnOpened(const std::string& run_id, const std::string& how,
                           const wizq::RunProgress& p) {
  std::fprintf(stderr, "setup run %s: %s\n", run_id.c_str(), how.c_str());
  Draw(p, "");
}

void ProgressBar::OnTaskStarted(int64_t, const std::string& step, int,
                                const wizq::RunProgress& p) {
  if (redraw_) Draw(p, step + "...");
}

void ProgressBar::OnTaskFinished(int64_t id, const std::string& step,
                                 const std::string& reason,
                                 const std::string& message, bool will_retry,
                                 int, const wizq::RunProgress& p) {
  if (!reason.empty()) {
    std::fprintf(stderr, "%stask %lld %s: %s%s\n", redraw_ ? "\n" : "",
                 static_cast<long long>(id), step.c_str(), message.c_str(),
                 will_retry ? " (will retry)" : "");
  }
  Draw(p, step + (reason.empty() ? " done" : " failed"));
}

void ProgressBar::OnNote(const std::string& message) {
  std::fprintf(stderr, "%s%s\n", redraw_ ? "\n" : "", message.c_str());
}

void ProgressBar::OnRunFinished(wizq::RunOutcome outcome,
                                const wizq::RunProgress& p) {
  Draw(p, wizq::RunOutcomeName(outcome));
  if (redraw_) std::fprintf(stderr, "\n");
}
