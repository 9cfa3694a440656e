// The failure list of `wizq run` (views/progress_line.h: FailureList).
#include <string>
#include <vector>

#include "fs/env.h"
#include "tasks/exec/attempt_files.h"
#include "views/progress_line.h"
#include "views/view_util.h"

namespace wizq {
namespace {

constexpr int kTailLines = 5;
constexpr size_t kTailBytes = 4096;
constexpr int kLineColumns = 200;

// The last kTailLines lines of the file at `path` (at most its last
// kTailBytes bytes); false if it cannot be read.
bool TailLines(const std::string& path, std::vector<std::string>* out) {
  Env* env = Env::Posix();
  uint64_t size = 0;
  if (!env->GetFileSize(path, &size).ok()) return false;
  const uint64_t from = size > kTailBytes ? size - kTailBytes : 0;
  std::string text;
  if (!env->ReadFileFrom(path, from, &text).ok()) return false;
  if (text.size() > kTailBytes) text.resize(kTailBytes);  // it grew since
  if (from > 0) {  // the first line is a part of one
    const size_t nl = text.find('\n');
    text.erase(0, nl == std::string::npos ? text.size() : nl + 1);
  }
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  const size_t skip = lines.size() > kTailLines ? lines.size() - kTailLines : 0;
  out->assign(lines.begin() + static_cast<std::ptrdiff_t>(skip), lines.end());
  return true;
}

}  // namespace

std::string FailureMessage(const std::string& message) {
  return message.substr(0, message.find("; stderr: "));
}

bool LastStderrLines(const Task& t, const std::string& wizard_dir,
                     std::vector<std::string>* lines, std::string* path) {
  if (t.attempts < 1) return false;
  *path = AttemptFiles::Existing(Env::Posix(), wizard_dir, t.id, t.attempts)
              .stderr_path();
  return TailLines(*path, lines);
}

std::vector<std::string> FailureList(const std::vector<Task>& failed,
                                     const std::string& wizard_dir,
                                     bool colour) {
  std::vector<std::string> out;
  out.push_back(Red(std::to_string(failed.size()) + " task(s) FAILED", colour) +
                ":");
  for (const Task& t : failed) {
    const std::string value = ShortValue(t.inputs, 60);
    out.push_back("  task " + std::to_string(t.id) + " " + t.type +
                  (value.empty() ? "" : " [" + value + "]") + HookLabel(t) +
                  ": " + t.error_reason + ": " +
                  ShortText(FailureMessage(t.error_message), kLineColumns));
    std::string path;
    std::vector<std::string> tail;
    if (!LastStderrLines(t, wizard_dir, &tail, &path)) continue;
    for (const std::string& line : tail) {
      out.push_back("    | " + ShortText(line, kLineColumns));
    }
    out.push_back("    stderr: " + path);
  }
  return out;
}

}  // namespace wizq
