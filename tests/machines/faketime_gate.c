/* libwizq_faketime_gate.so: lets libfaketime run under a program linked
 * with jemalloc (tests/machines/machines.sh preloads it before libfaketime;
 * docs/RELIABILITY.md, "Machines on one box").
 *
 * Without it such a program hangs before main: jemalloc initializes at the
 * first allocation (libstdc++'s constructor) and calls clock_gettime() and
 * pthread_cond_init(), which libfaketime interposes; libfaketime then
 * initializes itself, and its failing dlsym() lookups (__ftime, and
 * timer_settime@GLIBC_2.2 on x86-64) and sem_open() allocate, re-entering
 * jemalloc's unfinished initialization, which waits on its own lock
 * (libfaketime issue #130, still open for 0.9.10).
 *
 * The gate defines the functions of libfaketime that jemalloc calls. Until
 * the gate's constructor ran they bypass libfaketime (a system call, or a
 * condition variable zeroed as glibc does for default attributes), so
 * jemalloc initializes without it. The constructor then has libfaketime
 * initialize itself (its allocations now find jemalloc ready) and from
 * then on every call goes to libfaketime. So only what runs before the
 * gate's constructor (other libraries' constructors) sees the real wall
 * clock. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int (*next_clock_gettime)(clockid_t, struct timespec*);
static int (*next_gettimeofday)(struct timeval*, void*);
static pid_t (*next_getpid)(void);
static int (*next_cond_init)(pthread_cond_t*, const pthread_condattr_t*);
static atomic_int open_gate;

__attribute__((constructor)) static void OpenGate(void) {
  next_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
  next_gettimeofday = dlsym(RTLD_NEXT, "gettimeofday");
  next_getpid = dlsym(RTLD_NEXT, "getpid");
  next_cond_init = dlsym(RTLD_NEXT, "pthread_cond_init");
  if (!next_clock_gettime || !next_gettimeofday || !next_getpid ||
      !next_cond_init) {
    return; /* nothing to hand over to: the gate stays closed */
  }
  struct timespec ts;
  next_clock_gettime(CLOCK_REALTIME, &ts); /* libfaketime initializes */
  atomic_store(&open_gate, 1);
}

int clock_gettime(clockid_t id, struct timespec* ts) {
  if (atomic_load(&open_gate)) return next_clock_gettime(id, ts);
  return (int)syscall(SYS_clock_gettime, id, ts);
}

int gettimeofday(struct timeval* tv, void* tz) {
  if (atomic_load(&open_gate)) return next_gettimeofday(tv, tz);
  return (int)syscall(SYS_gettimeofday, tv, tz);
}

pid_t getpid(void) {
  if (atomic_load(&open_gate)) return next_getpid();
  return (pid_t)syscall(SYS_getpid);
}

int pthread_cond_init(pthread_cond_t* cond, const pthread_condattr_t* attr) {
  if (atomic_load(&open_gate)) return next_cond_init(cond, attr);
  if (attr == NULL) { /* glibc's initializer is all zeros */
    memset(cond, 0, sizeof *cond);
    return 0;
  }
  int (*next)(pthread_cond_t*, const pthread_condattr_t*) =
      dlsym(RTLD_NEXT, "pthread_cond_init");
  return next(cond, attr);
}
