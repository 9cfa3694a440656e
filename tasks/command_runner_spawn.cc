#include "tasks/command_runner_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace wizq::internal {
namespace {

// Everything below runs in the forked supervisor: async-signal-safe system
// calls only, no allocation, no locks, no stdio.

constexpr int kLockFd = 3;    // stdout's own descriptor, flocked, that the
                              // whole tree inherits
constexpr int kRecordFd = 4;  // the journal, the supervisor's own

// A fixed buffer that numbers and strings are appended to.
struct Line {
  char buf[256];
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
  // After ")": state is field 3; start time is field 22.
  int field = 2;
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

// One write(2) to the O_APPEND journal: a line is never interleaved with
// another supervisor's (a short write is not retried: it would be).
void Append(int fd, const Line& line) {
  ssize_t n;
  do {
    n = write(fd, line.buf, line.len);
  } while (n < 0 && errno == EINTR);
}

// Moves the plan's descriptors to 0..4 and closes the rest, wizq's own
// files among them (its worker lock must not outlive it). None of the
// sources is below 3, but one may be 3 or 4 where another belongs: those
// are copied above 4 first. False if a descriptor could not be had.
void CloseRange(int first, int last) {  // inclusive; last < 0: to the end
  if (last >= 0 && last < first) return;
#ifdef SYS_close_range
  if (syscall(SYS_close_range, static_cast<unsigned>(first),
              last < 0 ? ~0u : static_cast<unsigned>(last), 0u) == 0) {
    return;
  }
#endif
  const long max = sysconf(_SC_OPEN_MAX);
  const int end = last >= 0 ? last : static_cast<int>(max > 0 ? max : 1024);
  for (int fd = first; fd <= end; fd++) close(fd);
}

bool ArrangeFds(const SupervisorPlan& p) {
  int from[5] = {p.in, p.out, p.err, p.lock, p.record};
  // wizq's own descriptors go first, so that a low RLIMIT_NOFILE leaves
  // room for the copies below.
  int sorted[5];
  memcpy(sorted, from, sizeof(sorted));
  for (int i = 1; i < 5; i++) {
    for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
      const int t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  }
  int next = 3;
  for (int fd : sorted) {
    CloseRange(next, fd - 1);
    next = fd + 1;
  }
  CloseRange(next, -1);
  for (int i = 0; i < 5; i++) {
    if ((from[i] == 3 || from[i] == 4) && from[i] != i) {
      from[i] = fcntl(from[i], F_DUPFD, 5);
      if (from[i] < 0) return false;
    }
  }
  for (int i = 0; i < 5; i++) {
    if (from[i] == i) {
      fcntl(i, F_SETFD, 0);
    } else if (dup2(from[i], i) != i) {
      return false;
    }
  }
  fcntl(kRecordFd, F_SETFD, FD_CLOEXEC);
  CloseRange(5, -1);
  return true;
}

void SetDisposition(int sig, void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = handler;
  sigaction(sig, &sa, nullptr);
}

[[noreturn]] void Supervise(const SupervisorPlan& p, pid_t parent) {
  setpgid(0, 0);
  // The group's SIGTERM (a timeout, Ctrl+C) is for the shell: the
  // supervisor stays to record how it ended. SIGKILL still ends both.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) SetDisposition(sig, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Without its descriptors nothing can be recorded: wizq reports exit
  // code 127 of a supervisor that wrote no record.
  if (!ArrangeFds(p)) _exit(127);
  const pid_t self = getpid();
  Line first;
  first.Str("start ");
  first.Str(p.key);
  first.Str(" ");
  first.Num(p.attempt);
  first.Str(" ");
  first.Num(self);
  first.Str(" ");
  first.Num(static_cast<int64_t>(OwnStartTicks()));
  first.Str(" ");
  first.Str(p.boot_id[0] != '\0' ? p.boot_id : "unknown");
  first.Str(" ");
  first.Num(WallMs());
  first.Str("\n");
  Append(kRecordFd, first);

  // The cwd is entered here, in the supervisor (which uses no path after
  // this), so a missing one is seen without relying on vfork's shared
  // memory: a vfork that is really a fork (ThreadSanitizer's) shares none.
  volatile int spawn_errno = 0;
  if (p.cwd != nullptr && chdir(p.cwd) != 0) spawn_errno = errno;
  pid_t shell = -2;  // -2: not started (no cwd), -1: vfork failed
  if (spawn_errno == 0) shell = vfork();
  if (shell == 0) {
    // The shell gets default dispositions (wizq ignores SIGPIPE; exec keeps
    // ignored signals ignored).
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
      SetDisposition(sig, SIG_DFL);
    }
    execve(p.shell, p.argv, p.envp);
    spawn_errno = errno;
    _exit(127);
  }
  Line end;
  end.Str("end ");
  end.Str(p.key);
  end.Str(" ");
  end.Num(p.attempt);
  end.Str(" ");
  end.Num(self);
  int status = 0;
  if (shell == -1) {
    end.Str(" spawn ");
    end.Num(errno);
  } else {
    pid_t r = -1;
    while (shell > 0) {
      r = waitpid(shell, &status, 0);
      if (r >= 0 || errno != EINTR) break;
    }
    if (spawn_errno != 0) {
      end.Str(" spawn ");
      end.Num(spawn_errno);
    } else if (r == shell && WIFSIGNALED(status)) {
      end.Str(" signal ");
      end.Num(WTERMSIG(status));
    } else {
      end.Str(" exit ");
      end.Num(r == shell ? WEXITSTATUS(status) : 255);
    }
  }
  // Nobody is left to record the result durably: the record must not
  // survive a power cut that the response it vouches for does not. syncfs
  // also makes the stdout file's name durable (wizq never syncs the tasks
  // directory); it is paid only by an orphan.
  const bool orphaned = getppid() != parent;
  if (orphaned) syncfs(STDOUT_FILENO);
  end.Str(orphaned ? " 1\n" : " 0\n");
  Append(kRecordFd, end);
  if (orphaned) fdatasync(kRecordFd);
  _exit(0);
}

}  // namespace

int ForkSupervisor(const SupervisorPlan& plan, pid_t* pid) {
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) return errno;
  if (child == 0) Supervise(plan, parent);
  // Also here, so that no signal to the group can come before the child's
  // own setpgid (the classic race).
  setpgid(child, child);
  *pid = child;
  return 0;
}

}  // namespace wizq::internal
