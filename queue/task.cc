// The names of task states, origins and run statuses, and the finally
// hook's dedup key (queue/task.h, queue/run_info.h): shared by every store.
#include "queue/task.h"

#include "queue/run_info.h"

namespace wizq {

namespace {
const char* const kStateNames[] = {"pending", "in_progress", "done", "failed"};
const char* const kOriginNames[] = {"Initial", "Spawned", "Retry", "Finally"};
const char* const kRunStatusNames[] = {"running", "paused", "completed",
                                       "failed"};

template <typename E, size_t N>
bool ParseName(const char* const (&names)[N], std::string_view name, E* out) {
  for (size_t i = 0; i < N; i++) {
    if (name == names[i]) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}
}  // namespace

const char* TaskStateName(TaskState s) {
  return kStateNames[static_cast<int>(s)];
}
bool ParseTaskState(std::string_view n, TaskState* s) {
  return ParseName(kStateNames, n, s);
}
const char* OriginName(Origin o) { return kOriginNames[static_cast<int>(o)]; }
bool ParseOrigin(std::string_view n, Origin* o) {
  return ParseName(kOriginNames, n, o);
}
std::string FinallyDedupKey(int64_t owner, int generation) {
  std::string key = "finally:" + std::to_string(owner);
  if (generation > 1) key += ":" + std::to_string(generation);
  return key;
}
const char* RunStatusName(RunStatus s) {
  return kRunStatusNames[static_cast<int>(s)];
}
bool ParseRunStatus(std::string_view n, RunStatus* s) {
  return ParseName(kRunStatusNames, n, s);
}

}  // namespace wizq
