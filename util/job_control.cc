#include "util/job_control.h"

#include <signal.h>
#include <time.h>

#include <atomic>

namespace wizq {
namespace job_control {
namespace {

std::atomic<pid_t> g_groups[kMaxGroups];
std::atomic<int64_t> g_stopped_ns{0};

int64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

void AddGroup(pid_t pgid) {
  if (pgid <= 1) return;
  for (auto& slot : g_groups) {
    pid_t empty = 0;
    if (slot.compare_exchange_strong(empty, pgid)) return;
  }
}

void RemoveGroup(pid_t pgid) {
  if (pgid <= 1) return;
  for (auto& slot : g_groups) {
    pid_t expected = pgid;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

void SignalGroups(int sig) {
  for (auto& slot : g_groups) {
    const pid_t pgid = slot.load();
    if (pgid > 1) kill(-pgid, sig);
  }
}

void StopAllAndSelf() {
  SignalGroups(SIGSTOP);
  const int64_t stopped_at = MonotonicNs();
  // SIGSTOP rather than SIGTSTP's default action: the kernel discards
  // SIGTSTP in an orphaned process group. Returns once continued.
  raise(SIGSTOP);
  g_stopped_ns.fetch_add(MonotonicNs() - stopped_at);
  SignalGroups(SIGCONT);
}

int64_t StoppedNs() { return g_stopped_ns.load(); }

int64_t ActiveNowNs() { return MonotonicNs() - StoppedNs(); }

}  // namespace job_control
}  // namespace wizq
