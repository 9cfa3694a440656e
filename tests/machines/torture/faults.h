// The fault injector of the machines torture. One fault at a time, each
// injected for real and healed (docs/RELIABILITY.md, "Many machines under
// faults"):
//
//   partition        the machine's link down, then up (short: 0.3-1.2 s;
//                    long: the lease + 1-4 s)
//   machine_death    kill -9 of every process of the machine (half of them
//                    a reboot: a new boot id); its workers start again
//                    0.5-8 s later
//   freeze_machine   every process of it stopped (cgroup freezer), then
//                    thawed (short or long)
//   stop_worker      SIGSTOP of one `wizq run`, then SIGCONT (short, long)
//   db_crash         PostgreSQL stop -m immediate, then start
//   terminate        pg_terminate_backend of a transaction or listener
//                    session (any machine), or of a machine's worker's
//                    liveness session
//   stall            one connection of the machine stalled at the proxy
//                    for 0.3-2 s, then resumed
//   drop             one connection of the machine reset (RST)
//   half_open        one connection's server side closed, the client left
//                    hanging
//   drop_commit      the next COMMIT of a transaction session of the
//                    machine not forwarded (not committed)
//   drop_commit_reply  its reply dropped (committed, acknowledgement lost)
//
// `may_rerun` marks what may cost an attempt its claim: a machine death, a
// freeze, stop or partition longer than the lease, a lost liveness session.
#ifndef WIZQ_TESTS_MACHINES_TORTURE_FAULTS_H_
#define WIZQ_TESTS_MACHINES_TORTURE_FAULTS_H_

#include <atomic>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/machines/torture/bed.h"
#include "tests/machines/torture/history.h"

namespace wizq::machines {

extern const std::vector<std::string> kFaultKinds;

Json FaultJson(const Fault& f);

class Injector {
 public:
  // Each fault, of one of `kinds` (of kFaultKinds), is also appended to
  // `log` (JSON lines: FaultJson). `ledger`: the history's ledger file,
  // read as it grows to aim at machines with an attempt in flight.
  Injector(Bed* bed, uint32_t seed, int64_t lease_ms,
           std::vector<std::string> machines, std::vector<std::string> kinds,
           std::string log, std::string ledger);

  // Injects one fault of a kind chosen at random (the kinds that occurred
  // least so far first), on a machine that is up, and heals it; blocks for
  // the fault's length.
  void InjectOne();

  // The faults so far (drop_commit* completed from the proxy's log).
  std::vector<Fault> Faults();
  // Machines whose processes were killed and may be started again after
  // the given monotonic time; the supervisor asks.
  int64_t DownUntil(const std::string& machine);
  int Injected();

 private:
  int64_t Pick(int64_t lo, int64_t hi);
  std::string PickMachine();
  // Machines with an attempt started in the last few seconds and not
  // ended, from the ledger's new lines.
  std::set<std::string> Busy();
  std::string PickKind();
  std::map<std::string, std::vector<Json>> Firings();
  std::map<std::string, int> Fired();
  void Record(Fault f);
  void Partition(Fault* f);
  void Death(Fault* f);
  void Freeze(Fault* f);
  void StopWorker(Fault* f);
  void Terminate(Fault* f);
  void ProxyFault(Fault* f);
  // A proxied connection of `machine` ("id app"), preferring `app`.
  bool PickConnection(const std::string& machine, const std::string& app,
                      std::string* id, std::string* app_found);
  void Sleep(int64_t ms);

  Bed* bed_;
  std::mt19937 rng_;
  int64_t lease_ms_;
  std::vector<std::string> machines_;
  std::vector<std::string> kinds_;
  std::string log_;
  std::string ledger_;
  std::streamoff ledger_read_ = 0;
  std::map<std::string, std::pair<std::string, int64_t>> running_;  // m, t0
  std::mutex mu_;
  std::vector<Fault> faults_;
  std::map<std::string, int64_t> down_until_;
  std::map<std::string, int> occurred_;
};

}  // namespace wizq::machines

#endif  // WIZQ_TESTS_MACHINES_TORTURE_FAULTS_H_
