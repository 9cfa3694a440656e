// The verdict of a machines torture: the ledger and each run's history
// checked (history.h), the faults counted by kind, the summary lines
// (driver.cc's header comment gives their format).
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/machines/torture/torture.h"

namespace wizq::machines {

int Torture::Report(const std::vector<Fault>& faults) {
  std::vector<std::string> errors;
  std::ifstream in(Ledger() + "/ledger");
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<LedgerRecord> ledger = ParseLedger(text.str(), &errors);
  for (const std::string& e : CheckCalibration(ledger)) errors.push_back(e);
  RunVerdict sum;
  for (const CheckInput& run : runs_) {
    RunVerdict v = CheckRun(run, ledger, faults);
    printf("run %s: %s, %d tasks, extra runs %d (matched %d)\n", v.run.c_str(),
           v.status.c_str(), v.tasks, v.extra_runs, v.extra_runs_matched);
    sum.lost += v.lost, sum.duplicated += v.duplicated,
        sum.overlapped += v.overlapped;
    sum.overlapped_frozen_machine += v.overlapped_frozen_machine;
    sum.late_agent += v.late_agent;
    sum.stale += v.stale, sum.extra_runs += v.extra_runs,
        sum.flipped += v.flipped;
    sum.extra_runs_matched += v.extra_runs_matched;
    sum.extra_runs_unmatched += v.extra_runs_unmatched;
    sum.idle_claims += v.idle_claims;
    for (const std::string& e : v.errors) {
      if (o_.allow_unmatched && (e.rfind("extra run unmatched", 0) == 0 ||
                                 e.rfind("idle claim", 0) == 0)) {
        printf("WARNING %s: %s\n", v.run.c_str(), e.c_str());
        continue;
      }
      errors.push_back(v.run + ": " + e);
    }
  }
  std::map<std::string, int> injected, counted;
  std::map<std::string, std::map<std::string, int>> details;
  int total = 0;
  for (const Fault& f : faults) {
    injected[f.kind]++;
    if (!f.occurred || !InFlight(f, ledger)) continue;
    counted[f.kind]++;
    total++;
  }
  bool enough = true;
  for (const std::string& k : o_.kinds) {
    printf("fault %-18s injected %4d counted %4d\n", k.c_str(), injected[k],
           counted[k]);
    if (counted[k] < o_.min_per_kind) {
      enough = false;
      errors.push_back("fault " + k + " counted " + std::to_string(counted[k]) +
                       " times, fewer than --min-per-kind " +
                       std::to_string(o_.min_per_kind));
    }
  }
  for (const std::string& w : hung_) {
    const std::string e =
        "hung: worker " + w + " did not exit within 30 s of its run's end";
    if (o_.allow_unmatched) {
      printf("WARNING %s\n", e.c_str());
    } else {
      errors.push_back(e);
    }
  }
  for (const std::string& e : errors) printf("ERROR %s\n", e.c_str());
  printf(
      "machines=%d lease=%llds runs=%zu injected=%zu extra_runs=%d matched=%d "
      "overlapped_frozen_machine=%d late_agent=%d hung=%zu idle_claims=%d\n",
      o_.machines, static_cast<long long>(o_.lease_s), runs_.size(),
      faults.size(), sum.extra_runs, sum.extra_runs_matched,
      sum.overlapped_frozen_machine, sum.late_agent, hung_.size(),
      sum.idle_claims);
  printf(
      "MACHINES-TORTURE faults=%d lost=%d duplicated=%d overlapped=%d stale=%d "
      "extra_runs_unmatched=%d flipped=%d\n",
      total, sum.lost, sum.duplicated, sum.overlapped, sum.stale,
      sum.extra_runs_unmatched, sum.flipped);
  fflush(stdout);
  return errors.empty() && enough ? 0 : 1;
}

}  // namespace wizq::machines
