// The machines torture's driver (driver.cc: the bed, the rounds, the
// slots; report.cc: the verdict). Internal to wizq_machines_torture.
#ifndef WIZQ_TESTS_MACHINES_TORTURE_TORTURE_H_
#define WIZQ_TESTS_MACHINES_TORTURE_TORTURE_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/machines/torture/bed.h"
#include "tests/machines/torture/faults.h"
#include "tests/machines/torture/history.h"
#include "tests/machines/torture/options.h"

namespace wizq::machines {

// One process the supervisor keeps running: a worker or an agent.
struct Slot {
  std::string name, machine;
  bool agent = false;
  std::string via;  // an agent over "cli" or "mcp"; "": `wizq agent serve`
  bool run_agent = false;  // a worker `wizq run --agent`
  pid_t pid = -1;          // the host-side nsenter
  int64_t start_at = 0;
  bool done = false;
};

class Torture {
 public:
  Torture(Options o, std::string work)
      : o_(std::move(o)),
        work_(std::move(work)),
        rng_(o_.seed),
        bed_({o_.source + "/tests/machines/machines.sh",
              o_.build + "/wizq_fault_proxy", work_}) {}
  int Run();

 private:
  std::vector<std::string> hung_;  // workers killed after their run
  std::string want_libs_;          // WantLibs(), once known
  int64_t Pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  std::string Wizq() const { return o_.build + "/wizq"; }
  std::string Body() const { return o_.build + "/wizq_torture_body"; }
  std::string Ledger() const { return work_ + "/ledger"; }
  // Beside the MCP SDK that tests/mcp/npm_setup.sh installed.
  std::string McpAgent() const { return o_.build + "/node/mcp_agent.mjs"; }
  bool SetUp(std::string* error);
  void Calibrate(const std::string& machine, int64_t offset_s);
  std::string WantLibs();
  std::string Workflow(int round);
  bool OneRound(int round, std::atomic<bool>* active);
  void Supervise(std::vector<Slot>* slots, const std::string& run, bool over);
  void StartSlot(Slot* s, const std::string& run);
  void EndSlots(std::vector<Slot>* slots, const std::string& run);
  void Backtraces(pid_t root, const std::string& path);
  Json Status(const std::string& run);
  void Answer(const std::string& run, const Json& status);
  int Report(const std::vector<Fault>& faults);
  // The supervisor's starts and exits, for a post-mortem: slots.jsonl.
  void Event(const Json& e) {
    std::ofstream(work_ + "/slots.jsonl", std::ios::app) << e.dump() << "\n";
  }

  Options o_;
  std::string work_;
  std::mt19937 rng_;
  Bed bed_;
  std::vector<std::string> machines_;
  std::vector<CheckInput> runs_;
  std::map<std::string, std::map<std::string, std::string>> answers_;
  std::unique_ptr<Injector> injector_;
};

}  // namespace wizq::machines

#endif  // WIZQ_TESTS_MACHINES_TORTURE_TORTURE_H_
