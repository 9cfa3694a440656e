// The control side of wizq_fault_proxy (see fault_proxy.cc): the control
// socket, its commands (list, stall, resume, drop, half-open, drop-commit,
// drop-commit-reply) applied to the connections, and the client form that
// sends one command.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/machines/fault_proxy.h"

namespace wizq::machines {

std::string Proxy::Describe(const Conn& c) const {
  const char* state = c.half_open    ? "half-open"
                      : c.stalled    ? "stalled"
                      : c.closing    ? "closing"
                      : c.connecting ? "connecting"
                                     : "forwarding";
  return "conn " + std::to_string(c.id) + " client=" + c.peer +
         " user=" + c.fe.user() + " database=" + c.fe.database() +
         " application_name=" + c.fe.application_name() + " state=" + state +
         " drop_commit=" + std::to_string(c.arm_drop_commit) +
         " drop_commit_reply=" + std::to_string(c.arm_drop_reply) + "\n";
}

void Proxy::Drop(Conn& c) {
  Log(c, "drop");
  CloseSocket(&c.server, true);
  CloseSocket(&c.client, true);
}

void Proxy::HalfOpen(Conn& c) {
  if (c.half_open) return;
  Log(c, "half-open");
  c.half_open = true;
  CloseSocket(&c.server, false);
}

// Applies `apply` to connection `target` (its number) or to every open one
// ("all"); the number of connections, or -1 if there is no such one.
int Proxy::ForTargets(const std::string& target, void (Proxy::*apply)(Conn&)) {
  if (target == "all") {
    int n = 0;
    for (auto& [id, c] : conns_) {
      if (c->client >= 0 && !c->half_open) (this->*apply)(*c), n++;
    }
    return n;
  }
  char* end = nullptr;
  long id = strtol(target.c_str(), &end, 10);
  auto it = conns_.find(static_cast<int>(id));
  if (target.empty() || *end || it == conns_.end() || it->second->client < 0) {
    return -1;
  }
  (this->*apply)(*it->second);
  return 1;
}

std::string Proxy::Command(const std::string& line) {
  std::string verb = line.substr(0, line.find(' '));
  std::string arg =
      verb.size() < line.size() ? line.substr(verb.size() + 1) : std::string();
  while (!arg.empty() && isspace(static_cast<unsigned char>(arg.back()))) {
    arg.pop_back();
  }
  if (verb == "list") {
    std::string out;
    for (auto& [id, c] : conns_) out += Describe(*c);
    return out + "ok " + std::to_string(conns_.size()) + "\n";
  }
  int n = -1;
  if (verb == "stall") {
    if (arg == "all") stall_all_ = true;
    n = ForTargets(arg, &Proxy::Stall);
  } else if (verb == "resume") {
    if (arg == "all") stall_all_ = false;
    n = ForTargets(arg, &Proxy::Resume);
  } else if (verb == "drop") {
    n = ForTargets(arg, &Proxy::Drop);
  } else if (verb == "half-open") {
    n = ForTargets(arg, &Proxy::HalfOpen);
  } else if (verb == "drop-commit" || verb == "drop-commit-reply") {
    bool reply = verb == "drop-commit-reply";
    if (arg == "any") {
      (reply ? any_drop_reply_ : any_drop_commit_)++;
      return "ok armed\n";
    }
    if (arg == "all") return "error use \"any\" for the next COMMIT\n";
    n = ForTargets(arg, reply ? &Proxy::ArmDropReply : &Proxy::ArmDropCommit);
  } else {
    return "error unknown command: " + verb + "\n";
  }
  if (n < 0) return "error no open connection " + arg + "\n";
  return "ok " + std::to_string(n) + "\n";
}

void Proxy::AcceptControl() {
  int fd = accept4(control_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) controls_[fd];
}

void Proxy::ServeControl(int fd, std::string* buffer) {
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n <= 0) {
    close(fd);
    controls_.erase(fd);
    return;
  }
  buffer->append(buf, n);
  size_t nl;
  while ((nl = buffer->find('\n')) != std::string::npos) {
    std::string reply = Command(buffer->substr(0, nl));
    buffer->erase(0, nl + 1);
    // Small answers to a local peer: written whole (the socket blocks).
    send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
  }
}

// The client form: one command, its answer on stdout.
int Send(const std::string& control, const std::string& command) {
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  if (control.size() >= sizeof un.sun_path) Die("control path too long");
  memcpy(un.sun_path, control.c_str(), control.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&un), sizeof un) != 0) {
    Die("cannot reach the proxy at " + control + ": " + strerror(errno), 3);
  }
  std::string line = command + "\n", answer;
  send(fd, line.data(), line.size(), MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);  // the proxy answers, then closes
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) answer.append(buf, n);
  fputs(answer.c_str(), stdout);
  size_t last = answer.rfind('\n', answer.size() < 2 ? 0 : answer.size() - 2);
  last = last == std::string::npos ? 0 : last + 1;
  return answer.compare(last, 2, "ok") == 0 ? 0 : 1;
}

}  // namespace wizq::machines
