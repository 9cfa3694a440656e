// The MACHINE line every benchmark prints before its measurements and after
// them (before its RESULT line, which stays the last), so that figures taken
// on two machines, or at two moments on one, can be compared
// (docs/BENCHMARKS.md, "The machine"):
//
//   MACHINE fdatasync_us=<median> load=<1-min loadavg> cores=<nproc>
//
// fdatasync_us is the median of kMachineSyncs `pwrite` of 4 KiB over the
// same block of a scratch file in the benchmark's directory, each followed
// by `fdatasync` (the file's size does not change, as in a wizq commit over
// the log's preallocated space). load is the first field of /proc/loadavg,
// cores the CPUs this process may run on (what `nproc` prints).
//
// queue_bench and mcp_bench call MachineLine(); the shell benchmarks print
// the same line through bench/machine_probe.sh, which runs machine_probe
// (bench/machine_probe.cc, built with the benchmarks).
#ifndef WIZQ_BENCH_MACHINE_H_
#define WIZQ_BENCH_MACHINE_H_

#include <string>
#include <vector>

namespace wizq {
namespace bench {

constexpr int kMachineSyncs = 200;

// The MACHINE line (no newline) for a benchmark working in `dir`. Exits
// with status 3 and a message on stderr if `dir` takes no scratch file.
std::string MachineLine(const std::string& dir);

// The middle of `v` (the upper one of an even count; 0 if empty): the
// benchmarks' figure of several rounds.
double Median(std::vector<double> v);

}  // namespace bench
}  // namespace wizq

#endif  // WIZQ_BENCH_MACHINE_H_
