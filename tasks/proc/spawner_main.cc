// The spawner's loop (tasks/proc/spawner.h): its setup, wizq's messages, the
// events it holds back, and the poll over wizq's socket and its shells'
// pidfds. Async-signal-safe (spawner_state.h).
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

#include "tasks/proc/spawner_state.h"

namespace wizq::internal {
namespace spawn {

// What the spawner blocks: what a terminal, or a wizq stopping, sends.
constexpr int kBlocked[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                            SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE};

bool Orphaned(const State& st) {
  return !st.connected || getppid() != st.parent;
}

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A send that fails for want of memory is retried (for up to a second);
// any other failure means wizq is gone (the loop then disconnects).
void SendNow(State* st, const SpawnEvent& ev) {
  for (int tries = 0; st->connected;) {
    if (send(kSock, &ev, sizeof(ev), MSG_NOSIGNAL) >= 0) return;
    if (errno == EINTR) continue;
    if ((errno == ENOBUFS || errno == ENOMEM) && ++tries < 1000) {
      const timespec ms = {0, 1'000'000};
      nanosleep(&ms, nullptr);
      continue;
    }
    st->connected = false;
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

bool PastDeadline(const State& st, int64_t now_ns) {
  return st.deadline_ns != 0 && now_ns >= st.deadline_ns;
}

void SendEnded(State* st, const Slot& s, int end, int value) {
  SpawnEvent ev;
  ev.kind = SpawnEvent::kEnded;
  ev.past_deadline = s.past_deadline ? 1 : 0;
  ev.pid = s.pid;
  ev.serial = s.req.serial;
  ev.end = end;
  ev.value = value;
  Send(st, ev);
}

namespace {

void Handle(State* st, const SpawnRequest& req, const char* payload,
            size_t payload_size, const int* fds, int nfds) {
  st->deadline_ns = req.deadline_ns;
  for (uint32_t i = 0; i < req.nrelease && i < SpawnRequest::kMaxRelease; i++) {
    Slot* s = Find(st, req.release[i]);
    if (s != nullptr && s->state == Slot::kEnded) Reap(s);
  }
  const bool inline_plan = nfds == 4 && payload_size == req.plan_size;
  if (req.kind == SpawnRequest::kSpawn && (nfds == 5 || inline_plan)) {
    st->limit = req.limit;
    Queue(st, req, payload, fds, nfds);
    return StartQueued(st, /*orphan_ok=*/true);
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
    case SpawnRequest::kDeadline:  // taken above, as from any message
      break;
  }
}

// One message from wizq, if one is there (`wait`: blocks for it). False
// when there was none; at EOF or an error, also not connected any more.
bool Receive(State* st, bool wait) {
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
    n = recvmsg(kSock, &mh, MSG_CMSG_CLOEXEC | (wait ? 0 : MSG_DONTWAIT));
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (n <= 0) {
    st->connected = false;
    return false;
  }
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
  if (st->disconnected) return;
  st->disconnected = true;
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
}  // namespace spawn

using namespace spawn;  // NOLINT: the loop below is the spawner's

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

// Past the local deadline, every running shell's group is killed, once.
void EnforceDeadline(State* st) {
  if (!PastDeadline(*st, MonoNs())) return;
  for (size_t i = 0; i < st->nslots; i++) {
    Slot* s = &st->slots[i];
    if (s->state != Slot::kRunning || s->past_deadline) continue;
    s->past_deadline = true;
    kill(-s->pid, SIGKILL);
  }
}

// The poll timeout: until the held events are due, the local deadline
// (while a shell runs), or the fallback's.
int PollTimeout(const State& st, bool fallback, bool running) {
  int ms = fallback ? kFallbackPollMs : -1;
  if (running && st.deadline_ns != 0) {
    const int64_t left =
        std::max<int64_t>(0, (st.deadline_ns - MonoNs() + 999'999) / 1'000'000);
    const int cap = static_cast<int>(std::min<int64_t>(left, INT32_MAX));
    ms = ms < 0 ? cap : std::min(ms, cap);
  }
  if (st.nevents > 0) {
    const int64_t due = st.oldest_ns + int64_t{kSpawnerHoldMs} * 1'000'000;
    const int64_t left =
        std::max<int64_t>(0, (due - MonoNs() + 999'999) / 1'000'000);
    ms = ms < 0 ? static_cast<int>(left) : std::min(ms, static_cast<int>(left));
  }
  return ms;
}

void SpawnerMain(int sock, pid_t parent) {
  State st;
  st.parent = parent;
  getrlimit(RLIMIT_NOFILE, &st.nofile);  // before Prepare raises it
  Prepare(sock);
  Buffer polls, index;
  for (;;) {
    if (st.disconnected && !Busy(st)) _exit(0);
    if (!polls.Reserve((st.nslots + 1) * sizeof(pollfd)) ||
        !index.Reserve((st.nslots + 1) * sizeof(uint32_t))) {
      _exit(1);  // wizq sees EOF: its attempts' results are lost
    }
    pollfd* fds = reinterpret_cast<pollfd*>(polls.data);
    uint32_t* slot_of = reinterpret_cast<uint32_t*>(index.data);
    nfds_t n = 0;
    if (st.connected) fds[n++] = {kSock, POLLIN, 0};
    const nfds_t first = n;
    bool waiting = false, unkilled = false;
    for (size_t i = 0; i < st.nslots; i++) {
      const Slot& s = st.slots[i];
      if (s.state != Slot::kRunning) continue;
      waiting = true;
      unkilled = unkilled || !s.past_deadline;
      if (s.pidfd < 0) continue;
      slot_of[n] = static_cast<uint32_t>(i);
      fds[n++] = {s.pidfd, POLLIN, 0};
    }
    const bool fallback = waiting && !st.use_pidfd;
    const int r = poll(fds, n, PollTimeout(st, fallback, unkilled));
    if (r < 0 && errno != EINTR) _exit(1);
    if (r > 0 || fallback) CheckChildren(&st, fds, slot_of, first, n);
    // wizq first: once it is gone, what it sent is taken (a request for a
    // free slot still starts) and what waits is dropped at once, before
    // the syncs of the shells that end (their locks are let go sooner).
    if (first == 1 && r > 0 && fds[0].revents != 0) {
      const bool gone = getppid() != parent;
      while (st.connected && Receive(&st, /*wait=*/false)) {
        if (!gone) break;  // one message a turn while wizq lives
      }
      if (gone || !st.connected) Disconnect(&st);
    }
    if (!st.disconnected && (!st.connected || getppid() != parent)) {
      Disconnect(&st);
    }
    if (r > 0 || fallback) CheckChildren(&st, fds, slot_of, first, n);
    EnforceDeadline(&st);
    if (st.connected) StartQueued(&st, /*orphan_ok=*/false);
    if (FlushDue(st, MonoNs())) Flush(&st);
  }
}

}  // namespace wizq::internal
