// The test bed of the machines torture as the driver sees it: machines
// (tests/machines/machines.sh), the database's cluster, the fault proxy
// between the machines and the database, and processes started in a
// machine. Every method runs a real command; failures of the bed itself
// (not of wizq) are fatal to the torture and say which command failed.
#ifndef WIZQ_TESTS_MACHINES_TORTURE_BED_H_
#define WIZQ_TESTS_MACHINES_TORTURE_BED_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace wizq::machines {

int64_t MonoMs();

// The result of a command run to its end.
struct Ran {
  int code = -1;    // exit status; 128+N for a signal; -1 if it could not run
  std::string out;  // stdout and stderr
};

// Runs `args` with `env` added, to its end or for at most `timeout_s`
// (then it is SIGKILLed with its process group: code 137).
Ran RunCommand(const std::vector<std::string>& args,
               const std::map<std::string, std::string>& env = {},
               int timeout_s = 60);

// Starts `args` with `env` added, in a process group of its own, stdin
// from /dev/null, stdout and stderr appended to `log`; with `stamp`, each
// line prefixed with the host's CLOCK_MONOTONIC ms when it was read (the
// ledger's clock). Its pid.
pid_t StartCommand(const std::vector<std::string>& args,
                   const std::map<std::string, std::string>& env,
                   const std::string& log, bool stamp = false);

// SIGCONT to this process's stopped children: the host-side nsenter of a
// process stopped in a machine stops itself (util-linux passes the stop
// on) and, once continued, continues its child again, so it is continued
// only after the fault ends.
void ContinueStoppedChildren();

struct BedPaths {
  std::string machines_sh;  // tests/machines/machines.sh
  std::string proxy;        // wizq_fault_proxy
  std::string work;         // the torture's directory (host)
};

class Bed {
 public:
  explicit Bed(BedPaths paths);
  ~Bed();  // takes everything down (machines.sh down)

  // Starts the machines and the cluster (port 5432 on 10.213.0.1) and the
  // proxy (10.213.0.1:6432). False with a message in *error.
  bool Up(const std::vector<std::string>& machines, std::string* error);

  // machines.sh COMMAND ARGS...: its result.
  Ran Machines(const std::vector<std::string>& args, int timeout_s = 60);
  // A command to the proxy (list, stall ID, ...): its answer.
  Ran Proxy(const std::string& command);

  // The location for wizq in a machine (through the proxy) and on the
  // host (the cluster's Unix socket).
  std::string MachineStore() const;
  std::string HostStore() const;

  // The command line that runs `args` in `machine`, writing the pid it
  // has there to PidFile(slot) first.
  std::vector<std::string> InMachine(const std::string& machine,
                                     const std::string& slot,
                                     const std::vector<std::string>& args);
  std::string PidFile(const std::string& slot) const;
  // The machine's number i (its address is 10.213.i.2).
  int Index(const std::string& machine) const;
  std::string MachineOfAddress(const std::string& peer) const;
  std::string BootId(const std::string& machine);
  const std::string& pg_dir() const { return pg_dir_; }
  const std::string& proxy_log() const { return proxy_log_; }

 private:
  BedPaths paths_;
  std::string owner_, pg_dir_, proxy_sock_, proxy_log_;
  pid_t proxy_ = -1;
  std::map<std::string, int> index_;
  bool up_ = false;
};

}  // namespace wizq::machines

#endif  // WIZQ_TESTS_MACHINES_TORTURE_BED_H_
