// The MACHINE line of every benchmark (bench/machine.h).
#include "bench/machine.h"

#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

namespace wizq {
namespace bench {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "machine probe: %s: %s\n", what.c_str(),
               std::strerror(errno));
  std::exit(3);
}

// The median of kMachineSyncs pwrite(4 KiB) + fdatasync over one block of
// an unlinked scratch file in `dir`, in microseconds.
double MedianFdatasyncUs(const std::string& dir) {
  std::string path = dir + "/machine-probe-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) Fail("cannot create a scratch file in " + dir);
  unlink(path.c_str());
  char block[4096];
  std::memset(block, 'x', sizeof block);
  // The block exists on disk before the first timed write.
  if (pwrite(fd, block, sizeof block, 0) != sizeof block || fdatasync(fd)) {
    Fail("pwrite + fdatasync in " + dir);
  }
  std::vector<double> us;
  for (int i = 0; i < kMachineSyncs; i++) {
    block[i % sizeof block] = static_cast<char>('a' + i % 26);
    const auto start = std::chrono::steady_clock::now();
    if (pwrite(fd, block, sizeof block, 0) != sizeof block || fdatasync(fd)) {
      Fail("pwrite + fdatasync in " + dir);
    }
    us.push_back(std::chrono::duration<double, std::micro>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  }
  close(fd);
  return Median(std::move(us));
}

// The 1-minute load average as /proc/loadavg writes it ("?" if unreadable).
std::string LoadAverage() {
  std::string load;
  std::ifstream("/proc/loadavg") >> load;
  return load.empty() ? "?" : load;
}

// The CPUs this process may run on, as nproc counts them.
int Cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}

}  // namespace

std::string MachineLine(const std::string& dir) {
  char line[128];
  std::snprintf(line, sizeof line, "MACHINE fdatasync_us=%.1f load=%s cores=%d",
                MedianFdatasyncUs(dir), LoadAverage().c_str(), Cores());
  return line;
}

}  // namespace bench
}  // namespace wizq
