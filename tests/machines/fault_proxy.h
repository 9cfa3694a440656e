// The inside of wizq_fault_proxy (tests/machines/fault_proxy.cc), shared
// with its control side (fault_proxy_control.cc): a proxied connection, the
// Proxy, and the helpers both use.
#ifndef WIZQ_TESTS_MACHINES_FAULT_PROXY_H_
#define WIZQ_TESTS_MACHINES_FAULT_PROXY_H_

#include <sys/socket.h>

#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/machines/pg_wire.h"

namespace wizq::machines {

using Json = nlohmann::ordered_json;

// Prints "wizq_fault_proxy: MSG" on stderr and exits with `code`.
[[noreturn]] void Die(const std::string& msg, int code = 2);

// Closes `fd` with RST when `reset` (SO_LINGER 0), else with FIN.
void CloseSocket(int* fd, bool reset);

// One proxied connection: the two sockets, what waits to be written to
// each, the protocol state of both directions and the faults set on it.
struct Conn {
  int id = 0;
  int client = -1;
  int server = -1;
  bool connecting = true;  // the upstream connect is under way
  std::string to_server, to_client;
  FrontendStream fe;
  BackendStream be;
  bool stalled = false;
  bool half_open = false;
  bool closing = false;  // flush what is pending, then close both
  int arm_drop_commit = 0, arm_drop_reply = 0;
  std::string peer;
};

class Proxy {
 public:
  Proxy(const std::string& listen, const std::string& upstream,
        const std::string& control, const std::string& log);
  void Run();

 private:
  void Accept();
  void AcceptControl();
  void ServeControl(int fd, std::string* buffer);
  std::string Command(const std::string& line);
  int ForTargets(const std::string& target, void (Proxy::*apply)(Conn&));
  void Stall(Conn& c) { c.stalled = true, Log(c, "stall"); }
  void Resume(Conn& c) { c.stalled = false, Log(c, "resume"); }
  void Drop(Conn& c);
  void HalfOpen(Conn& c);
  void ArmDropCommit(Conn& c) { c.arm_drop_commit++; }
  void ArmDropReply(Conn& c) { c.arm_drop_reply++; }
  void OnEvents(Conn& c, bool client_side, short revents);
  void Pump(Conn& c);
  bool OnCommit(Conn& c, const FrontendStream::Event& ev);
  void DroppedReply(Conn& c, const std::string& outcome);
  void Flush(Conn& c);
  void Finish(Conn& c, bool reset_client);
  void Log(const Conn& c, const char* fault, const Json& extra = {});
  std::string Describe(const Conn& c) const;

  int listen_fd_ = -1;
  int control_fd_ = -1;
  std::string control_path_;
  FILE* log_ = nullptr;
  sockaddr_storage upstream_{};
  socklen_t upstream_len_ = 0;
  std::map<int, std::unique_ptr<Conn>> conns_;
  std::map<int, std::string> controls_;  // control client fd -> its input
  int next_id_ = 1;
  bool stall_all_ = false;
  int any_drop_commit_ = 0, any_drop_reply_ = 0;
};

// The client form: one command, its answer on stdout.
int Send(const std::string& control, const std::string& command);

}  // namespace wizq::machines

#endif  // WIZQ_TESTS_MACHINES_FAULT_PROXY_H_
