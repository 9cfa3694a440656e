#include "tasks/exec/attempt_journal.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

namespace wizq::internal {

bool ParseJournalLine(std::string_view line, JournalLine* out) {
  *out = JournalLine();
  const std::string text(line);
  char kind[8] = {0};
  char key[128] = {0};
  int attempt = 0;
  long pid = 0;
  AttemptRecord& r = out->record;
  if (text.compare(0, 6, "start ") == 0) {
    char boot[64] = {0};
    long long wall = 0;
    if (sscanf(text.c_str(), "%7s %127s %d %ld %llu %63s %lld", kind, key,
               &attempt, &pid, &r.start, boot, &wall) != 7 ||
        attempt < 1 || pid <= 1) {
      return false;
    }
    r.boot_id = boot;
    r.start_wall_ms = wall;
  } else if (text.compare(0, 4, "end ") == 0) {
    char how[16] = {0};
    int value = 0, synced = 0;
    if (sscanf(text.c_str(), "%7s %127s %d %ld %15s %d %d", kind, key, &attempt,
               &pid, how, &value, &synced) != 7 ||
        attempt < 1 || pid <= 1) {
      return false;
    }
    if (strcmp(how, "exit") == 0) {
      r.end = AttemptRecord::End::kExit;
    } else if (strcmp(how, "signal") == 0) {
      r.end = AttemptRecord::End::kSignal;
    } else if (strcmp(how, "spawn") == 0) {
      r.end = AttemptRecord::End::kSpawn;
    } else {
      return false;
    }
    out->is_end = true;
    r.ended = true;
    r.value = value;
    r.synced = synced == 1;
  } else {
    return false;
  }
  out->key = key;
  r.attempt = attempt;
  r.pid = static_cast<pid_t>(pid);
  return true;
}

namespace {

// What one process has read of one journal.
struct JournalView {
  uint64_t device = 0, inode = 0;
  uint64_t offset = 0;  // up to the end of the last whole line read
  std::unordered_map<std::string, AttemptRecord> latest;  // by key
};

// Applies the whole lines of `data`; returns how many bytes they span.
size_t ApplyLines(std::string_view data, JournalView* view) {
  size_t used = 0;
  for (;;) {
    const size_t nl = data.find('\n', used);
    if (nl == std::string_view::npos) return used;
    JournalLine line;
    if (ParseJournalLine(data.substr(used, nl - used), &line)) {
      AttemptRecord& latest = view->latest[line.key];
      if (!line.is_end) {
        latest = line.record;
      } else if (latest.attempt == line.record.attempt &&
                 latest.pid == line.record.pid) {
        latest.ended = true;
        latest.end = line.record.end;
        latest.value = line.record.value;
        latest.synced = line.record.synced;
      }
    }
    used = nl + 1;
  }
}

}  // namespace

bool LatestJournalAttempt(Env* env, const std::string& path,
                          const std::string& key, AttemptRecord* record) {
  static std::mutex* const mu = new std::mutex;
  static auto* const views = new std::map<std::string, JournalView>;
  FileInfo info;
  if (!env->GetFileInfo(path, &info).ok()) return false;
  std::lock_guard<std::mutex> lock(*mu);
  JournalView& view = (*views)[path];
  if (view.device != info.device || view.inode != info.inode ||
      info.size < view.offset) {
    view = JournalView();  // a new run's journal
    view.device = info.device;
    view.inode = info.inode;
  }
  if (info.size > view.offset) {
    std::string data;
    if (env->ReadFileFrom(path, view.offset, &data).ok()) {
      view.offset += ApplyLines(data, &view);
    }
  }
  const auto it = view.latest.find(key);
  if (it == view.latest.end()) return false;
  *record = it->second;
  return true;
}

}  // namespace wizq::internal
