#include "views/view_util.h"

#include <cstdio>
#include <ctime>

#include "fs/env.h"
#include "queue/task.h"

namespace wizq {

std::string FormatTime(int64_t ms) {
  time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm;
  localtime_r(&secs, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03d", buf, static_cast<int>(ms % 1000));
  return out;
}

std::string FormatDuration(int64_t ms) {
  if (ms < 0) ms = 0;
  char buf[32];
  const int64_t s = ms / 1000;
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(ms) / 1000);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds",
                  static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm",
                  static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  }
  return buf;
}

std::string FormatBytes(uint64_t bytes) {
  char buf[32];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof(buf), "%llu B",
                  static_cast<unsigned long long>(bytes));
  } else if (bytes < (1u << 20)) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", bytes / 1024.0);
  } else if (bytes < (1ull << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / 1048576.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / 1073741824.0);
  }
  return buf;
}

namespace {

// `text` with newlines and tabs as spaces.
std::string OneLine(std::string_view text) {
  std::string out;
  for (char c : text) out.push_back(c == '\n' || c == '\t' ? ' ' : c);
  return out;
}

}  // namespace

std::string Shorten(std::string_view text, size_t max) {
  std::string out = OneLine(text);
  if (out.size() <= max) return out;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) {
    cut--;  // not inside a UTF-8 sequence
  }
  out.resize(cut);
  return out + "\xE2\x80\xA6";
}

std::string ShortenMiddle(std::string_view text, size_t max) {
  const std::string out = OneLine(text);
  if (out.size() <= max) return out;
  const auto inside = [&out](size_t i) {  // within a UTF-8 sequence
    return i < out.size() &&
           (static_cast<unsigned char>(out[i]) & 0xC0) == 0x80;
  };
  size_t head = (max - 1) / 2;                  // bytes kept in front
  size_t tail = out.size() - (max - 1 - head);  // where the end starts
  while (head > 0 && inside(head)) head--;
  while (inside(tail)) tail++;
  return out.substr(0, head) + "\xE2\x80\xA6" + out.substr(tail);
}

int64_t WallNowMs() {
  return static_cast<int64_t>(Env::Posix()->NowMicros() / 1000);
}

std::string HookLabel(const Task& t) {
  if (t.origin != Origin::kFinally) return "";
  if (t.generation <= 1) return " (finally)";
  return " (finally, run " + std::to_string(t.generation) + ")";
}

}  // namespace wizq
