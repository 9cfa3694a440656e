// The claim figure: finding the next task to claim in a run of 100k pending
// tasks whose step is at its limit (max_concurrency reached, every claim
// refused), by scanning every pending task (Txn::ClaimNextOfSteps with no
// step filter and the limit in `accept`, as wizq did) and through the index by
// step (Txn::ClaimNextOfSteps, as the run loop does now), in the same process.
#include <cstdio>
#include <memory>

#include "bench/queue_bench.h"
#include "queue/dir/queue.h"

namespace wizq {
namespace bench {

double BenchAndPrintClaim(const BenchOptions& opt) {
  constexpr int64_t kTasks = 100000;
  constexpr int kClaims = 50;
  TempDir dir(opt.base_dir, "claim");
  std::unique_ptr<Queue> q;
  OpenReport report;
  Check("open", Queue::Open(WizqOptions(dir.path()), &q, &report));
  SeedWizq(q.get(), kTasks);  // step "Work"
  double scan_us = 0, index_us = 0;
  Check("claim", q->Transact([&](Txn& txn) {
    // "Work" is at its limit; nothing else is pending.
    auto work_open = [](std::string_view type) { return type != "Work"; };
    auto accept = [](const Task& t) { return t.type != "Work"; };
    int64_t id = 0;
    double t0 = NowUs();
    for (int i = 0; i < kClaims; i++) {
      WIZQ_RETURN_IF_ERROR(txn.ClaimNextOfSteps(nullptr, accept, &id));
      if (id != 0) Die("scan claimed a task of a step at its limit");
    }
    scan_us = (NowUs() - t0) / kClaims;
    t0 = NowUs();
    for (int i = 0; i < kClaims; i++) {
      WIZQ_RETURN_IF_ERROR(txn.ClaimNextOfSteps(work_open, accept, &id));
      if (id != 0) Die("index claimed a task of a step at its limit");
    }
    index_us = (NowUs() - t0) / kClaims;
    return Status::OK();
  }));
  Check("close", q->Close());
  std::printf(
      "\nclaim among %lld pending tasks of a step at its limit: scan %.3f ms, "
      "by step %.3f us per claim (%.0fx)\n",
      static_cast<long long>(kTasks), scan_us / 1000, index_us,
      scan_us / index_us);
  std::fflush(stdout);
  return scan_us / index_us;
}

}  // namespace bench
}  // namespace wizq
