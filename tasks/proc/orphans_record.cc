#include "tasks/proc/orphans_record.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace wizq::internal {

bool ParseAttemptRecord(std::string_view text, AttemptRecord* r) {
  *r = AttemptRecord();
  const size_t nl = text.find('\n');
  if (nl == std::string_view::npos) return false;
  const std::string first(text.substr(0, nl));
  long pid = 0;
  char boot[64] = {0};
  int attempt = 0;
  long long wall = 0;
  const int n = sscanf(first.c_str(), "%ld %llu %63s %d %lld", &pid, &r->start,
                       boot, &attempt, &wall);
  if (n < 3 || pid <= 1) return false;
  r->pid = static_cast<pid_t>(pid);
  r->boot_id = boot;
  if (n == 5 && attempt > 0) {
    r->attempt = attempt;
    r->start_wall_ms = wall;
  }
  const std::string_view rest = text.substr(nl + 1);
  const size_t nl2 = rest.find('\n');
  if (nl2 == std::string_view::npos) return true;  // not ended (or torn)
  const std::string second(rest.substr(0, nl2));
  char how[16] = {0};
  int end_attempt = 0, value = 0, synced = 0;
  if (sscanf(second.c_str(), "end %d %15s %d %d", &end_attempt, how, &value,
             &synced) != 4 ||
      end_attempt != r->attempt) {
    return true;
  }
  if (strcmp(how, "exit") == 0) {
    r->end = AttemptRecord::End::kExit;
  } else if (strcmp(how, "signal") == 0) {
    r->end = AttemptRecord::End::kSignal;
  } else if (strcmp(how, "spawn") == 0) {
    r->end = AttemptRecord::End::kSpawn;
  } else {
    return true;
  }
  r->ended = true;
  r->value = value;
  r->synced = synced == 1;
  return true;
}

}  // namespace wizq::internal
