// Shared by queue_bench's sources: queue_bench.cc (the drains, main),
// queue_bench_util.cc (timing, probes, scratch directories, seeding a
// queue) and queue_bench_open.cc (the recovery figure).
#ifndef WIZQ_BENCH_QUEUE_BENCH_H_
#define WIZQ_BENCH_QUEUE_BENCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/machine.h"  // Median
#include "queue/dir/queue.h"
#include "util/status.h"

namespace wizq {
namespace bench {

struct BenchOptions {
  std::string base_dir;
  int64_t slice = 500;  // tasks drained per turn
  bool sqlite_100k = true;
  bool open_only = false;   // only the recovery figure (no RESULT line)
  bool claim_only = false;  // only the claim figure (no RESULT line)
};

// --- timing and statistics (queue_bench_util.cc) ---
double NowUs();    // monotonic
double CpuUs();    // user + system CPU of this process
int64_t WallMs();  // wall clock
double Percentile(std::vector<double>* v, double p);  // sorts *v
[[noreturn]] void Die(const std::string& what);
void Check(const std::string& what, const Status& s);  // Die unless ok

// A scratch directory under `base`, removed with its contents.
class TempDir {
 public:
  TempDir(const std::string& base, const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Drained stores' directories, removed at the end: deleting them between
// slices would leave metadata for the next fdatasync's journal commit.
std::vector<std::unique_ptr<TempDir>>& Graveyard();

uint64_t FileSize(const std::string& path);
// audit.jsonl's size without its preallocated free space.
uint64_t LogicalLogSize(const std::string& path);

// Write requests and cache flushes the block device under `dir` completed.
struct DiskCounters {
  uint64_t writes = 0, flushes = 0;
};
DiskCounters ReadDiskCounters(const std::string& dir);

// --- probes of the machine (queue_bench_util.cc) ---
double MeasureFdatasyncUs(const std::string& base);
double MeasureFirstTouchUs(bool huge);
double MeasureCpuMs();

// --- wizq stores (queue_bench_util.cc) ---
std::string TaskInputs(int64_t k);  // the inputs of the k-th seeded task
QueueOptions WizqOptions(const std::string& dir);
void SeedWizq(Queue* q, int64_t n);  // n pending tasks, untimed

// --- the recovery figure (queue_bench_open.cc) ---
// `queue_bench --open-once DIR`: opens the run in DIR once, prints
// "<ms> <page faults>" and exits.
int OpenOnce(const std::string& dir);
// Builds a 100k-task run with a 10k-event tail, opens it in fresh processes
// and in this one, prints the figures; returns the fresh-process median.
double BenchAndPrintOpen(const BenchOptions& opt);

// --- the claim figure (queue_bench_claim.cc) ---
// Claims among 100k pending tasks of a step at its limit, by scan and by
// the index by step; prints both, returns scan / index.
double BenchAndPrintClaim(const BenchOptions& opt);

}  // namespace bench
}  // namespace wizq

#endif  // WIZQ_BENCH_QUEUE_BENCH_H_
