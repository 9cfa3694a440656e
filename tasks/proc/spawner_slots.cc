// The spawner's attempts, from request to reaping (tasks/proc/spawner.h):
// queueing, starting the shell (vfork, and what its child does before the
// exec), its end line and kEnded. Async-signal-safe (spawner_state.h).
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

namespace wizq::internal::spawn {
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
  s->past_deadline = false;  // the slot's next attempt is a new one
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
                            char* const* envp, const char* boot, int cwd,
                            const rlimit& nofile) {
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
  // The task gets wizq's descriptor limit, not the spawner's raised one.
  setrlimit(RLIMIT_NOFILE, &nofile);
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
  if (s->pid == 0) {
    ExecShell(s, shell, ptrs, ptrs + req.argc + 1, boot, cwd, st->nofile);
  }
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
void StartQueued(State* st, bool orphan_ok) {
  if (!orphan_ok && Orphaned(*st)) return;
  if (PastDeadline(*st, MonoNs())) return;  // until a later deadline comes
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

}  // namespace wizq::internal::spawn
