#include "util/console.h"

#include <unistd.h>

#include <mutex>
#include <vector>

namespace wizq {
namespace console {
namespace {

struct State {
  std::mutex mu;
  bool live = false;      // a live line is shown
  bool question = false;  // a question is open
  std::vector<std::string> held;
};

State& S() {
  static State* s = new State;  // never destroyed: used until exit
  return *s;
}

void Write(const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(STDERR_FILENO, s.data() + off, s.size() - off);
    if (n <= 0) return;  // nowhere to report it
    off += static_cast<size_t>(n);
  }
}

void ClearLiveLocked(State& s) {
  if (s.live) Write("\r\033[K");
  s.live = false;
}

}  // namespace

void WriteLine(const std::string& line) {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.question) {
    s.held.push_back(line);
    return;
  }
  ClearLiveLocked(s);
  Write(line + "\n");
}

void DrawLive(const std::string& text) {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.question) return;
  Write("\r\033[K" + text);
  s.live = true;
}

void ClearLive() {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  ClearLiveLocked(s);
}

void BeginQuestion() {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  ClearLiveLocked(s);
  s.question = true;
}

void Ask(const std::string& text) {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  Write(text);
}

void EndQuestion() {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  s.question = false;
  for (const std::string& line : s.held) Write(line + "\n");
  s.held.clear();
}

}  // namespace console
}  // namespace wizq
