#include "views/progress_line.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "util/console.h"
#include "util/environment.h"
#include "util/utf8.h"

namespace wizq {
namespace {

// The code point of the valid sequence of `len` bytes at s[i].
uint32_t CodePoint(const std::string& s, size_t i, size_t len) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  if (len == 1) return b(0);
  if (len == 2) return ((b(0) & 0x1Fu) << 6) | (b(1) & 0x3Fu);
  if (len == 3) {
    return ((b(0) & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
  }
  return ((b(0) & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) |
         ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
}

int CodePointWidth(uint32_t c) {
  if (c == 0x200B || (c >= 0x0300 && c <= 0x036F) ||
      (c >= 0x1AB0 && c <= 0x1AFF) || (c >= 0x20D0 && c <= 0x20FF) ||
      (c >= 0xFE00 && c <= 0xFE0F) || (c >= 0xFE20 && c <= 0xFE2F)) {
    return 0;
  }
  if ((c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF) ||
      (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
      (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
      (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
      (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD)) {
    return 2;
  }
  return 1;
}

// Length and width of the code point at s[i]; an invalid byte counts as
// one byte of width 1 (it is replaced before display).
void Next(const std::string& s, size_t i, size_t* len, int* width) {
  *len = Utf8SequenceLength(s, i);
  if (*len == 0) {
    *len = 1;
    *width = 1;
    return;
  }
  *width = CodePointWidth(CodePoint(s, i, *len));
}

// Control characters and invalid bytes become spaces ('?').
std::string Printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t len = Utf8SequenceLength(s, i);
    if (len == 0) {
      out += '?';
      i++;
      continue;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (len == 1 && (c < 0x20 || c == 0x7F)) {
      out += ' ';
    } else if (len == 2 && c == 0xC2 &&
               static_cast<unsigned char>(s[i + 1]) < 0xA0) {
      out += ' ';  // C1 controls
    } else {
      out.append(s, i, len);
    }
    i += len;
  }
  return out;
}

const nlohmann::json* FirstString(const nlohmann::json& j) {
  if (j.is_string()) return &j;
  if (j.is_object() || j.is_array()) {
    for (const auto& v : j) {
      if (const nlohmann::json* s = FirstString(v)) return s;
    }
  }
  return nullptr;
}

}  // namespace

int DisplayWidth(const std::string& text) {
  int w = 0;
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    int cw = 0;
    Next(text, i, &len, &cw);
    w += cw;
    i += len;
  }
  return w;
}

std::string CutToColumns(const std::string& text, int columns) {
  if (DisplayWidth(text) <= columns) return text;
  if (columns <= 0) return "";
  int w = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t len = 0;
    int cw = 0;
    Next(text, i, &len, &cw);
    if (w + cw > columns - 1) break;  // room for the ellipsis
    w += cw;
    i += len;
  }
  // Combining marks of the last kept character stay with it.
  return text.substr(0, i) + "…";
}

std::string ShortText(const std::string& text, int columns) {
  return CutToColumns(Printable(text), columns);
}

std::string ShortValue(const std::string& inputs_json, int columns) {
  nlohmann::json j = nlohmann::json::parse(inputs_json, nullptr, false);
  if (j.is_discarded()) return CutToColumns(Printable(inputs_json), columns);
  if (j.is_null() || (j.is_object() && j.empty())) return "";
  const nlohmann::json* s = FirstString(j);
  const std::string text =
      s != nullptr
          ? s->get<std::string>()
          : j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return CutToColumns(Printable(text), columns);
}

std::string ShortDuration(int64_t ms) {
  if (ms < 0) ms = 0;
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof(buf), "%lldms", static_cast<long long>(ms));
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(ms / 1000));
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds",
                  static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms / 1000 % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm",
                  static_cast<long long>(ms / 3'600'000),
                  static_cast<long long>(ms / 60'000 % 60));
  }
  return buf;
}

bool ColourAllowed() {
  const char* no = std::getenv(kEnvNoColor);
  return no == nullptr || *no == '\0';
}

std::string Red(const std::string& text, bool colour) {
  return colour ? "\033[31m" + text + "\033[0m" : text;
}

int TerminalColumns() {
  struct winsize ws = {};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    return ws.ws_col;
  }
  return 80;
}

LiveLine::LiveLine(std::chrono::milliseconds period) : period_(period) {}

LiveLine::~LiveLine() { Stop(); }

void LiveLine::TaskStarted(const Task& t, const Progress& p) {
  std::lock_guard<std::mutex> g(mu_);
  const Clock::time_point now = Clock::now();
  if (running_.empty() && ended_here_ == 0) first_start_ = now;
  running_[t.id] = {t.type, ShortValue(t.inputs, 16), now};
  p_ = p;
  p_at_ = now;
}

void LiveLine::TaskEnded(int64_t id, const Progress& p) {
  std::lock_guard<std::mutex> g(mu_);
  if (running_.erase(id) > 0) ended_here_++;
  p_ = p;
  p_at_ = Clock::now();
}

void LiveLine::Update(const Progress& p) {
  std::lock_guard<std::mutex> g(mu_);
  p_ = p;
  p_at_ = Clock::now();
}

std::string LiveLine::Text(int columns) const {
  std::lock_guard<std::mutex> g(mu_);
  return TextLocked(columns, Clock::now());
}

// "[3/10] 12s, ETA 30s, 1 failed, 2 running, 4 queued, longest 8s: Review
// a.txt, Lint b.txt", cut to `columns` - 3: a line that fills the last
// column makes some terminals wrap, and the terminal echoes Ctrl+C as "^C"
// after it.
std::string LiveLine::TextLocked(int columns, Clock::time_point now) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const int64_t since_ms = duration_cast<milliseconds>(now - p_at_).count();
  const int64_t finished = p_.done + p_.failed;
  std::string s = "[" + std::to_string(finished) + "/" +
                  std::to_string(p_.total) + "] " +
                  ShortDuration(p_.elapsed_ms + since_ms);
  const int64_t left = p_.total - finished;
  if (ended_here_ > 0 && left > 0) {
    const int64_t ran_ms =
        duration_cast<milliseconds>(now - first_start_).count();
    s += ", ETA " + ShortDuration(ran_ms * left / ended_here_);
  }
  if (p_.failed > 0) s += ", " + std::to_string(p_.failed) + " failed";
  if (!running_.empty())
    s += ", " + std::to_string(running_.size()) + " running";
  if (p_.queued > 0) s += ", " + std::to_string(p_.queued) + " queued";
  if (!running_.empty()) {
    Clock::time_point oldest = now;
    for (const auto& [id, r] : running_) oldest = std::min(oldest, r.since);
    s += ", longest " +
         ShortDuration(duration_cast<milliseconds>(now - oldest).count()) + ":";
    for (const auto& [id, r] : running_) {
      s += " " + r.step + (r.value.empty() ? "" : " " + r.value) + ",";
      if (DisplayWidth(s) >= columns) break;  // the rest is cut anyway
    }
    s.pop_back();
  }
  return CutToColumns(s, std::max(1, columns - 3));
}

void LiveLine::Draw() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!thread_.joinable()) {
      stop_ = false;
      thread_ = std::thread([this] { Loop(); });
    }
  }
  console::DrawLive(Text(TerminalColumns()));
}

void LiveLine::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, period_);
    if (stop_) break;
    const std::string text = TextLocked(TerminalColumns(), Clock::now());
    lock.unlock();
    console::DrawLive(text);
    lock.lock();
  }
}

void LiveLine::Stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  console::ClearLive();
}

}  // namespace wizq
