// The spawner's state and the pieces its loop (spawner_main.cc) and its
// attempts' lifecycle (spawner_slots.cc) share. Everything here runs in a
// fork of a multi-threaded wizq: system calls and plain memory only, no
// allocation (memory comes from mmap), no locks, no stdio. Internal to
// tasks/spawner*.cc.
#ifndef WIZQ_TASKS_SPAWNER_STATE_H_
#define WIZQ_TASKS_SPAWNER_STATE_H_

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "tasks/proc/spawner.h"

namespace wizq::internal::spawn {

constexpr int kSock = 3;            // the spawner's end of the socket pair
constexpr int kFallbackPollMs = 5;  // without pidfds

// A fixed buffer that numbers and strings are appended to.
struct Line {
  char buf[512];
  size_t len = 0;
  void Str(const char* s) {
    while (*s != '\0' && len < sizeof(buf)) buf[len++] = *s++;
  }
  void Num(int64_t v) {
    if (v < 0) {
      Str("-");
      v = -v;
    }
    char digits[24];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v > 0);
    while (n > 0 && len < sizeof(buf)) buf[len++] = digits[--n];
  }
};

// One write(2) to the O_APPEND journal: a line is never interleaved with
// another writer's (a short write is not retried: it would be).
inline void Append(int fd, const Line& line) {
  ssize_t n;
  do {
    n = write(fd, line.buf, line.len);
  } while (n < 0 && errno == EINTR);
}

// Field 22 of /proc/self/stat: the start time in clock ticks after boot.
inline uint64_t OwnStartTicks() {
  char text[1024];
  const int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n;
  do {
    n = read(fd, text, sizeof(text) - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char* p = strrchr(text, ')');
  if (p == nullptr) return 0;
  int field = 2;  // after ")": the state is field 3
  for (++p; *p != '\0' && field < 22; ++p) {
    if (*p == ' ') field++;
  }
  uint64_t v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + static_cast<uint64_t>(*p++ - '0');
  return v;
}

inline int64_t WallMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

inline void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// Memory that grows (mmap: no malloc here).
struct Buffer {
  char* data = nullptr;
  size_t size = 0;
  bool Reserve(size_t want) {
    if (want <= size) return true;
    size_t n = size == 0 ? 65536 : size;
    while (n < want) n *= 2;
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    if (size > 0) {
      memcpy(p, data, size);
      munmap(data, size);
    }
    data = static_cast<char*>(p);
    size = n;
    return true;
  }
};

// One attempt, from its request until wizq released its leader.
struct Slot {
  enum State { kFree, kQueued, kRunning, kEnded } state = kFree;
  uint64_t seq = 0;  // arrival order: queued ones start first come first
  pid_t pid = 0;
  int pidfd = -1;
  int in = -1, err = -1;  // until the shell starts
  Buffer plan;            // the request's plan (kept for the slot's reuse)
  int lock = -1;  // the attempt's stdout: held until the end line is out
  int journal = -1;
  SpawnRequest req;
  volatile int spawn_errno = 0;  // set by the vfork child if exec fails
  bool past_deadline = false;    // killed at the local deadline
  char key[256];
};

struct State {
  pid_t parent = 0;
  Buffer events;  // held back (see spawner.h)
  size_t nevents = 0;
  int64_t oldest_ns = 0;      // of the held events
  bool urgent = false;        // one of them may not wait
  bool connected = true;      // wizq's end is open and answers
  bool disconnected = false;  // Disconnect has run
  rlimit nofile = {};         // RLIMIT_NOFILE as wizq had it (the shells')
  bool use_pidfd = true;
  uint32_t limit = SpawnRequest::kNoLimit;  // shells at once
  int64_t deadline_ns = 0;  // the local deadline (spawner.h); 0: none
  uint64_t seq = 0;
  Buffer ptrs, slots_mem, recv;
  Slot* slots = nullptr;
  size_t nslots = 0;
};

// --- spawner_main.cc ----------------------------------------------------

bool Orphaned(const State& st);
int64_t MonoNs();
// Whether the local deadline has passed (spawner.h): nothing may run.
bool PastDeadline(const State& st, int64_t now_ns);
// Held until Flush; sent at once when it cannot be held.
void Send(State* st, SpawnEvent ev);
void SendEnded(State* st, const Slot& s, int end, int value);

// --- spawner_slots.cc ---------------------------------------------------

// Starts queued attempts, first come first, while the limit allows; once
// wizq is gone only when `orphan_ok` (a request wizq sent before it died
// starts if a slot is free; what waits in the queue never does).
void StartQueued(State* st, bool orphan_ok);
// Takes a kSpawn request into a slot (queued; StartQueued starts it).
void Queue(State* st, const SpawnRequest& req, const char* inline_plan,
           const int* fds, int nfds);
// The slot of attempt `serial` (null if none).
Slot* Find(State* st, uint64_t serial);
// Ends a request that no shell came of: kEnded with a spawn errno.
void Refuse(State* st, Slot* s, int err);
// Closes the slot's descriptors and frees it.
void Free(Slot* s);
// Reaps the slot's ended shell, then frees it.
void Reap(Slot* s);
// The shell of a running slot has exited (a zombie): its end line, kEnded.
void Ended(State* st, Slot* s, const siginfo_t& info);
// Whether the slot's shell has exited; *info says how (not reaped).
bool Exited(Slot* s, siginfo_t* info);

}  // namespace wizq::internal::spawn

#endif  // WIZQ_TASKS_SPAWNER_STATE_H_
