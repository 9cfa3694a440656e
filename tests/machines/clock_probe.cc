// wizq_clock_probe: prints this process's wall clock (CLOCK_REALTIME) and
// monotonic clock (CLOCK_MONOTONIC) in seconds, then which of jemalloc and
// libfaketime are mapped into it:
//
//   1795758049.781 6652.480 jemalloc,faketime
//
// Linked like wizq (jemalloc), it shows what a program under a machine's
// clock offset sees (tests/machines/machines_tooling_test.sh): the wall
// clock moved, the monotonic clock the one every machine shares.
#include <time.h>

#include <cstdio>
#include <cstring>
#include <string>

int main() {
  timespec real, mono;
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  bool jemalloc = false, faketime = false;
  if (FILE* maps = fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (fgets(line, sizeof line, maps)) {
      jemalloc = jemalloc || strstr(line, "/libjemalloc.so");
      faketime = faketime || strstr(line, "/libfaketime");
    }
    fclose(maps);
  }
  std::string libs = std::string(jemalloc ? "jemalloc" : "") +
                     (jemalloc && faketime ? "," : "") +
                     (faketime ? "faketime" : "");
  printf("%lld.%03ld %lld.%03ld %s\n", static_cast<long long>(real.tv_sec),
         real.tv_nsec / 1000000, static_cast<long long>(mono.tv_sec),
         mono.tv_nsec / 1000000, libs.empty() ? "-" : libs.c_str());
  return 0;
}
