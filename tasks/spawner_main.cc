// The spawner's side (tasks/spawner.h). Everything here runs in a fork of
// a multi-threaded wizq: system calls and plain memory only, no
// allocation (memory comes from mmap), no locks, no stdio.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>

#include "tasks/spawner.h"

namespace wizq::internal {
namespace {

constexpr int kSock = 3;            // the spawner's end of the socket pair
constexpr int kFallbackPollMs = 5;  // without pidfds
// What the spawner blocks: what a terminal, or a wizq stopping, sends.
constexpr int kBlocked[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                            SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE};

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
void Append(int fd, const Line& line) {
  ssize_t n;
  do {
    n = write(fd, line.buf, line.len);
  } while (n < 0 && errno == EINTR);
}

// Field 22 of /proc/self/stat: the start time in clock ticks after boot.
uint64_t OwnStartTicks() {
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

int64_t WallMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

void CloseFd(int* fd) {
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
  char key[256];
};

struct State {
  pid_t parent = 0;
  Buffer events;  // held back (see spawner.h)
  size_t nevents = 0;
  int64_t oldest_ns = 0;  // of the held events
  bool urgent = false;    // one of them may not wait
  bool connected = true;  // wizq's end is open
  bool use_pidfd = true;
  uint32_t limit = SpawnRequest::kNoLimit;  // shells at once
  uint64_t seq = 0;
  Buffer ptrs, slots_mem, recv;
  Slot* slots = nullptr;
  size_t nslots = 0;
};

bool Orphaned(const State& st) {
  return !st.connected || getppid() != st.parent;
}

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void SendNow(State* st, const SpawnEvent& ev) {
  while (st->connected) {
    if (send(kSock, &ev, sizeof(ev), MSG_NOSIGNAL) >= 0) return;
    if (errno != EINTR) st->connected = false;
  }
}

// Held until Flush; sent at once when it cannot be held.
void Send(State* st, SpawnEvent ev) {
  ev.at_ns = MonoNs();
  const bool routine = ev.kind == SpawnEvent::kStarted || ev.end != 2;
  if (!st->events.Reserve((st->nevents + 1) * sizeof(SpawnEvent))) {
    return SendNow(st, ev);
  }
  if (st->nevents == 0) st->oldest_ns = ev.at_ns;
  reinterpret_cast<SpawnEvent*>(st->events.data)[st->nevents++] = ev;
  st->urgent = st->urgent || !routine;
}

void Flush(State* st) {
  const SpawnEvent* evs = reinterpret_cast<SpawnEvent*>(st->events.data);
  for (size_t i = 0; i < st->nevents; i++) SendNow(st, evs[i]);
  st->nevents = 0;
  st->urgent = false;
}

void SendEnded(State* st, const Slot& s, int end, int value) {
  SpawnEvent ev;
  ev.kind = SpawnEvent::kEnded;
  ev.pid = s.pid;
  ev.serial = s.req.serial;
  ev.end = end;
  ev.value = value;
  Send(st, ev);
}

Slot* FreeSlot(State* st) {
  for (size_t i = 0; i < st->nslots; i++) {
    if (st->slots[i].state == Slot::kFree) return &st->slots[i];
  }
  const size_t n = st->nslots == 0 ? 64 : st->nslots * 2;
  if (!st->slots_mem.Reserve(n * sizeof(Slot))) return nullptr;
  st->slots = reinterpret_cast<Slot*>(st->slots_mem.data);
  for (size_t i = st->nslots; i < n; i++) new (&st->slots[i]) Slot();
  Slot* s = &st->slots[st->nslots];
  st->nslots = n;
  return s;
}

void FreeSlotFds(Slot* s) {
  for (int* fd : {&s->pidfd, &s->in, &s->err, &s->lock, &s->journal}) {
    CloseFd(fd);
  }
}

void Free(Slot* s) {
  FreeSlotFds(s);
  s->state = Slot::kFree;
  s->pid = 0;
}

void Reap(Slot* s) {
  while (s->pid > 0 && waitpid(s->pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  Free(s);
}

// A string of the plan; advances *p. Null past the end.
const char* Next(const char** p, const char* end) {
  if (*p >= end) return nullptr;
  const char* s = *p;
  while (*p < end && **p != '\0') ++*p;
  if (*p >= end) return nullptr;
  ++*p;
  return s;
}

// What the shell's process does between vfork and exec.
[[noreturn]] void ExecShell(Slot* slot, const char* shell, char* const* argv,
                            char* const* envp, const char* boot, int cwd) {
  setpgid(0, 0);
  // Every disposition is the default (exec keeps that); the signals the
  // spawner blocks are let through again.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  Line start;
  start.Str("start ");
  start.Str(slot->key);
  start.Str(" ");
  start.Num(slot->req.attempt);
  start.Str(" ");
  start.Num(getpid());
  start.Str(" ");
  start.Num(static_cast<int64_t>(OwnStartTicks()));
  start.Str(" ");
  start.Str(boot[0] != '\0' ? boot : "unknown");
  start.Str(" ");
  start.Num(WallMs());
  start.Str("\n");
  Append(slot->journal, start);
  if (cwd >= 0 && fchdir(cwd) != 0) {
    slot->spawn_errno = errno;
    _exit(127);
  }
  // All sources are above 4 (the spawner keeps 0-4 for itself).
  if (dup2(slot->in, 0) != 0 || dup2(slot->lock, 1) != 1 ||
      dup2(slot->err, 2) != 2 || dup2(slot->lock, 3) != 3) {
    slot->spawn_errno = errno;
    _exit(127);
  }
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
#endif
  {
    for (int fd = 4; fd < 65536; fd++) close(fd);
  }
  execve(shell, argv, envp);
  slot->spawn_errno = errno;
  _exit(127);
}

void EndLine(Slot* s, int end, int value, bool synced) {
  static const char* const kEnds[] = {"exit", "signal", "spawn"};
  Line line;
  line.Str("end ");
  line.Str(s->key);
  line.Str(" ");
  line.Num(s->req.attempt);
  line.Str(" ");
  line.Num(s->pid);
  line.Str(" ");
  line.Str(kEnds[end]);
  line.Str(" ");
  line.Num(value);
  line.Str(synced ? " 1\n" : " 0\n");
  Append(s->journal, line);
}

// The shell has exited (a zombie): the end line, then kEnded. The zombie
// stays until wizq releases it, or is reaped now when wizq is gone.
void Ended(State* st, Slot* s, const siginfo_t& info) {
  int end = 0, value = 0;
  if (s->spawn_errno != 0) {
    end = 2;
    value = s->spawn_errno;
  } else if (info.si_code == CLD_EXITED) {
    value = info.si_status;
  } else {
    end = 1;
    value = info.si_status;
  }
  const bool orphaned = Orphaned(*st);
  // Nobody is left to record the result durably: the line must not outlive
  // a power cut that the output it vouches for does not (syncfs also makes
  // the stdout file's name durable: the journal is in the same directory).
  if (orphaned) syncfs(s->journal);
  EndLine(s, end, value, orphaned);
  if (orphaned) fdatasync(s->journal);
  FreeSlotFds(s);
  s->state = Slot::kEnded;
  SendEnded(st, *s, end, value);
  if (Orphaned(*st)) Reap(s);
}

// Whether the slot's shell has exited; *info says how (not reaped).
bool Exited(Slot* s, siginfo_t* info) {
  memset(info, 0, sizeof(*info));
  if (waitid(P_PID, static_cast<id_t>(s->pid), info,
             WEXITED | WNOHANG | WNOWAIT) != 0) {
    return false;
  }
  return info->si_pid == s->pid;
}

// Ends a request that no shell came of: kEnded with a spawn errno.
void Refuse(State* st, Slot* s, int err) {
  Free(s);  // the lock first: wizq may look at it as soon as it knows
  SendEnded(st, *s, 2, err);  // (pid 0: nothing started)
}

// Starts a queued attempt's shell: its plan, its cwd, vfork and exec.
void Launch(State* st, Slot* s) {
  const SpawnRequest& req = s->req;
  const size_t nptr = size_t{req.argc} + req.envc + 2;
  if (!st->ptrs.Reserve(nptr * sizeof(char*))) return Refuse(st, s, ENOMEM);
  const char* p = s->plan.data;
  const char* end = p + req.plan_size;
  const char* shell = Next(&p, end);
  const char* key = Next(&p, end);
  const char* boot = Next(&p, end);
  const char* cwd_path = Next(&p, end);
  char** ptrs = reinterpret_cast<char**>(st->ptrs.data);
  bool ok = cwd_path != nullptr;  // and so are the three before it
  for (uint32_t i = 0; ok && i < req.argc + req.envc; i++) {
    const char* a = Next(&p, end);
    ok = a != nullptr;
    ptrs[i < req.argc ? i : i + 1] = const_cast<char*>(a);  // argv, env
  }
  if (!ok || strlen(key) >= sizeof(s->key)) return Refuse(st, s, EINVAL);
  ptrs[req.argc] = nullptr;
  ptrs[req.argc + req.envc + 1] = nullptr;
  memcpy(s->key, key, strlen(key) + 1);
  int cwd = -1;
  if (cwd_path[0] != '\0') {
    cwd = open(cwd_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cwd < 0) return Refuse(st, s, errno);
  }
  s->spawn_errno = 0;
  s->pid = vfork();
  if (s->pid == 0) ExecShell(s, shell, ptrs, ptrs + req.argc + 1, boot, cwd);
  const int vfork_errno = errno;
  if (cwd >= 0) close(cwd);
  // The tree holds the lock now; the spawner must not (ReapOrphans ends
  // whatever holds a lock: never the process that records every attempt).
  CloseFd(&s->in);
  CloseFd(&s->err);
  CloseFd(&s->lock);
  if (s->pid < 0) {
    s->pid = 0;
    return Refuse(st, s, vfork_errno);
  }
  s->state = Slot::kRunning;
  if (st->use_pidfd) {
#ifdef SYS_pidfd_open
    s->pidfd = static_cast<int>(syscall(SYS_pidfd_open, s->pid, 0));
#endif
    if (s->pidfd < 0) st->use_pidfd = false;
  }
  if (s->spawn_errno == 0) {
    SpawnEvent ev;
    ev.kind = SpawnEvent::kStarted;
    ev.pid = s->pid;
    ev.serial = req.serial;
    Send(st, ev);
  }
}

// Starts queued attempts, first come first, while the limit allows.
void StartQueued(State* st) {
  for (;;) {
    uint32_t running = 0;
    Slot* first = nullptr;
    for (size_t i = 0; i < st->nslots; i++) {
      Slot* s = &st->slots[i];
      if (s->state == Slot::kRunning) running++;
      if (s->state == Slot::kQueued &&
          (first == nullptr || s->seq < first->seq)) {
        first = s;
      }
    }
    if (first == nullptr || running >= st->limit) return;
    Launch(st, first);
  }
}

// The plan into the slot: from the message (`inline_plan`, null when the
// plan came as a memfd: `plan_fd`).
bool TakePlan(Slot* s, const char* inline_plan, int plan_fd) {
  const size_t size = s->req.plan_size;
  if (!s->plan.Reserve(size + 1)) return false;
  if (inline_plan != nullptr) {
    memcpy(s->plan.data, inline_plan, size);
    return true;
  }
  size_t got = 0;
  while (got < size) {
    const ssize_t n =
        pread(plan_fd, s->plan.data + got, size - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// fds: stdin, stdout, stderr, journal[, plan] (all above 4: 0-4 are
// taken); without the fifth, the plan is `inline_plan`.
void Queue(State* st, const SpawnRequest& req, const char* inline_plan,
           const int* fds, int nfds) {
  Slot* s = FreeSlot(st);
  const int plan_fd = nfds == 5 ? fds[4] : -1;
  if (s == nullptr) {
    SpawnEvent ev;
    ev.kind = SpawnEvent::kEnded;
    ev.serial = req.serial;
    ev.end = 2;
    ev.value = ENOMEM;
    Send(st, ev);
    for (int i = 0; i < nfds; i++) close(fds[i]);
    return;
  }
  s->state = Slot::kQueued;
  s->seq = ++st->seq;
  s->req = req;
  s->pid = 0;
  s->in = fds[0];
  s->lock = fds[1];
  s->err = fds[2];
  s->journal = fds[3];
  const bool ok = TakePlan(s, plan_fd < 0 ? inline_plan : nullptr, plan_fd);
  if (plan_fd >= 0) close(plan_fd);
  if (!ok) Refuse(st, s, ENOMEM);
}

Slot* Find(State* st, uint64_t serial) {
  for (size_t i = 0; i < st->nslots; i++) {
    Slot* s = &st->slots[i];
    if (s->state != Slot::kFree && s->req.serial == serial) return s;
  }
  return nullptr;
}

void Handle(State* st, const SpawnRequest& req, const char* payload,
            size_t payload_size, const int* fds, int nfds) {
  for (uint32_t i = 0; i < req.nrelease && i < SpawnRequest::kMaxRelease; i++) {
    Slot* s = Find(st, req.release[i]);
    if (s != nullptr && s->state == Slot::kEnded) Reap(s);
  }
  const bool inline_plan = nfds == 4 && payload_size == req.plan_size;
  if (req.kind == SpawnRequest::kSpawn && (nfds == 5 || inline_plan)) {
    st->limit = req.limit;
    Queue(st, req, payload, fds, nfds);
    return StartQueued(st);
  }
  for (int i = 0; i < nfds; i++) close(fds[i]);
  Slot* s = Find(st, req.serial);
  switch (req.kind) {
    case SpawnRequest::kSpawn: {  // without its descriptors
      SpawnEvent ev;
      ev.kind = SpawnEvent::kEnded;
      ev.serial = req.serial;
      ev.end = 2;
      ev.value = EBADF;
      Send(st, ev);
      break;
    }
    case SpawnRequest::kRelease:  // done above
      break;
    case SpawnRequest::kCancel:
      if (s != nullptr && s->state == Slot::kQueued) Refuse(st, s, ECANCELED);
      break;
    case SpawnRequest::kLimit:
      st->limit = req.limit;
      break;
  }
}

// One message from wizq; false at EOF.
bool Receive(State* st) {
  if (!st->recv.Reserve(sizeof(SpawnRequest) + kInlinePlanMax)) return false;
  iovec iov = {st->recv.data, sizeof(SpawnRequest) + kInlinePlanMax};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 5)];
  msghdr mh;
  memset(&mh, 0, sizeof(mh));
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control;
  mh.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(kSock, &mh, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  int fds[5];
  int nfds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const int k = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < k; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (nfds < 5) {
        fds[nfds++] = fd;
      } else {
        close(fd);
      }
    }
  }
  SpawnRequest req;
  if (static_cast<size_t>(n) < sizeof(req) || (mh.msg_flags & MSG_TRUNC)) {
    for (int i = 0; i < nfds; i++) close(fds[i]);
    return true;  // not wizq's: ignored
  }
  memcpy(&req, st->recv.data, sizeof(req));
  if ((mh.msg_flags & MSG_CTRUNC) != 0 && req.kind == SpawnRequest::kSpawn) {
    // Out of descriptors: refused, as an environment error (not started).
    for (int i = 0; i < nfds; i++) close(fds[i]);
    SpawnEvent ev;
    ev.kind = SpawnEvent::kEnded;
    ev.serial = req.serial;
    ev.end = 2;
    ev.value = EMFILE;
    Send(st, ev);
    return true;
  }
  Handle(st, req, st->recv.data + sizeof(req),
         static_cast<size_t>(n) - sizeof(req), fds, nfds);
  return true;
}

// wizq is gone: what it queued never starts (its attempts never began),
// what ended is reaped, what runs is waited for and recorded.
void Disconnect(State* st) {
  if (!st->connected) return;
  st->connected = false;
  close(kSock);
  for (size_t i = 0; i < st->nslots; i++) {
    Slot* s = &st->slots[i];
    if (s->state == Slot::kQueued) Free(s);
    if (s->state == Slot::kEnded) Reap(s);
  }
}

// The running shells that may have exited: those whose pidfd polled
// readable, or all of them without pidfds.
void CheckChildren(State* st, const pollfd* fds, const uint32_t* slot_of,
                   nfds_t first, nfds_t n) {
  siginfo_t info;
  if (!st->use_pidfd) {
    for (size_t i = 0; i < st->nslots; i++) {
      Slot* s = &st->slots[i];
      if (s->state == Slot::kRunning && Exited(s, &info)) Ended(st, s, info);
    }
    return;
  }
  for (nfds_t k = first; k < n; k++) {
    Slot* s = &st->slots[slot_of[k]];
    if (fds[k].revents != 0 && s->state == Slot::kRunning && Exited(s, &info)) {
      Ended(st, s, info);
    }
  }
}

bool Busy(const State& st) {
  for (size_t i = 0; i < st.nslots; i++) {
    if (st.slots[i].state != Slot::kFree) return true;
  }
  return false;
}

// stdio from /dev/null, the socket at kSock, nothing else: wizq's own
// files (its worker lock above all) must not stay open in here.
void ArrangeFds(int sock) {
  const int moved = fcntl(sock, F_DUPFD, 10);
  const int null = open("/dev/null", O_RDWR);
  for (int fd = 0; fd <= 2; fd++) {
    if (null >= 0 && null != fd) dup2(null, fd);
  }
  if (moved >= 0) dup2(moved, kSock);
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 4u, ~0u, 0u) == 0) return;
#endif
  for (int fd = 4; fd < 65536; fd++) close(fd);
}

void Prepare(int sock) {
  setpgid(0, 0);
  prctl(PR_SET_NAME, "wizq-spawner", 0, 0, 0);
  // wizq's handlers are not valid in here: defaults, and the signals a
  // terminal or a stopping wizq sends are blocked (not ignored: a blocked
  // signal is not inherited as pending, an ignored one would be inherited
  // as ignored, and undoing that costs the shell's vfork child a call per
  // signal).
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++) sigaction(sig, &sa, nullptr);
  sigset_t blocked;
  sigemptyset(&blocked);
  for (int sig : kBlocked) sigaddset(&blocked, sig);
  sigprocmask(SIG_SETMASK, &blocked, nullptr);
  ArrangeFds(sock);
  // Up to six descriptors per attempt (fewer once its shell runs).
  rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

}  // namespace

// Whether the held events go now: wizq must refill the queue (no more wait
// than may run), hears of a refusal at once, and never later than kHoldMs.
bool FlushDue(const State& st, int64_t now) {
  if (st.nevents == 0) return false;
  if (st.urgent || !st.connected || st.nevents >= 64 ||
      now - st.oldest_ns >= int64_t{kSpawnerHoldMs} * 1'000'000) {
    return true;
  }
  uint32_t queued = 0;
  for (size_t i = 0; i < st.nslots; i++)
    queued += st.slots[i].state == Slot::kQueued;
  return queued <= st.limit;
}

// The poll timeout: until the held events are due, or the fallback's.
int PollTimeout(const State& st, bool fallback) {
  int ms = fallback ? kFallbackPollMs : -1;
  if (st.nevents > 0) {
    const int64_t due = st.oldest_ns + int64_t{kSpawnerHoldMs} * 1'000'000;
    const int64_t left =
        std::max<int64_t>(0, (due - MonoNs() + 999'999) / 1'000'000);
    ms = ms < 0 ? static_cast<int>(left) : std::min(ms, static_cast<int>(left));
  }
  return ms;
}

void SpawnerMain(int sock, pid_t parent) {
  Prepare(sock);
  State st;
  st.parent = parent;
  Buffer polls, index;
  for (;;) {
    if (!st.connected && !Busy(st)) _exit(0);
    if (!polls.Reserve((st.nslots + 1) * sizeof(pollfd)) ||
        !index.Reserve((st.nslots + 1) * sizeof(uint32_t))) {
      _exit(1);  // wizq sees EOF: its attempts' results are lost
    }
    pollfd* fds = reinterpret_cast<pollfd*>(polls.data);
    uint32_t* slot_of = reinterpret_cast<uint32_t*>(index.data);
    nfds_t n = 0;
    if (st.connected) fds[n++] = {kSock, POLLIN, 0};
    const nfds_t first = n;
    bool waiting = false;
    for (size_t i = 0; i < st.nslots; i++) {
      const Slot& s = st.slots[i];
      if (s.state != Slot::kRunning) continue;
      waiting = true;
      if (s.pidfd < 0) continue;
      slot_of[n] = static_cast<uint32_t>(i);
      fds[n++] = {s.pidfd, POLLIN, 0};
    }
    const bool fallback = waiting && !st.use_pidfd;
    const int r = poll(fds, n, PollTimeout(st, fallback));
    if (r < 0 && errno != EINTR) _exit(1);
    if (r > 0 || fallback) CheckChildren(&st, fds, slot_of, first, n);
    if (first == 1 && r > 0 && fds[0].revents != 0 && !Receive(&st)) {
      Disconnect(&st);
    }
    if (st.connected && getppid() != parent) Disconnect(&st);
    if (st.connected) StartQueued(&st);
    if (FlushDue(st, MonoNs())) Flush(&st);
  }
}

}  // namespace wizq::internal
