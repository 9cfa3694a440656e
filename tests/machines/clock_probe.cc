// wizq_clock_probe: prints this process's wall clock (CLOCK_REALTIME) and
// monotonic clock (CLOCK_MONOTONIC), in seconds, on one line. Linked like
// wizq (jemalloc), it shows what a program under a machine's clock offset
// sees (tests/machines/machines_tooling_test.sh): the wall clock moved,
// the monotonic clock shared with every other machine.
#include <time.h>

#include <cstdio>

int main() {
  timespec real, mono;
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  printf("%lld.%03ld %lld.%03ld\n", static_cast<long long>(real.tv_sec),
         real.tv_nsec / 1000000, static_cast<long long>(mono.tv_sec),
         mono.tv_nsec / 1000000);
  return 0;
}
