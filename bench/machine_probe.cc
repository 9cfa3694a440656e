// machine_probe DIR: prints the MACHINE line (bench/machine.h) measured in
// DIR, for the shell benchmarks (bench/machine_probe.sh).
#include <cstdio>

#include "bench/machine.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: machine_probe DIR\n");
    return 2;
  }
  std::printf("%s\n", wizq::bench::MachineLine(argv[1]).c_str());
  return 0;
}
