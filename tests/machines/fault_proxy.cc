// wizq_fault_proxy: a TCP proxy between PostgreSQL clients and a server that
// injects the connection faults of the multi-machine torture on command
// (docs/RELIABILITY.md, "Machines on one box"; tests/machines/). The
// commands of its control socket are in fault_proxy_control.cc.
//
//   wizq_fault_proxy --listen ADDR:PORT --upstream ADDR:PORT
//                    --control SOCKET --log FILE
//   wizq_fault_proxy --control SOCKET --send 'COMMAND'
//
// The first form proxies; the second sends one command to a running proxy,
// prints its answer and exits 0 if it was "ok", 1 if "error", 3 if the proxy
// cannot be reached. Commands (a Unix stream socket, one command a line, each
// answered by zero or more lines and a last line "ok N" or "error ..."):
//
//   list                      one line per connection (id, client, user,
//                             database, application_name, state)
//   stall ID|all              stop forwarding both ways, sockets kept open;
//                             "all" also stalls connections accepted later
//   resume ID|all             forward again
//   drop ID|all               reset both sides (RST)
//   half-open ID|all          close the server side; never read from nor
//                             answer the client, keeping its socket until
//                             the client closes it
//   drop-commit ID|any        the next COMMIT of connection ID ("any": of any
//                             connection; each "any" arms one) is not
//                             forwarded; both sides are closed (the client's
//                             with RST): not committed
//   drop-commit-reply ID|any  the next COMMIT is forwarded; the server's reply
//                             to it is dropped and both sides closed once it
//                             came: committed, acknowledgement lost
//
// A COMMIT is a simple Query whose whole text is COMMIT or END (optionally
// WORK or TRANSACTION, then optionally ';'; any case, any spacing), or, in
// the extended protocol, the Execute of a portal bound to a statement whose
// Parse had such a text (named or unnamed). For that the proxy follows both
// message streams (the startup packet, then 1-byte type + 4-byte length); a
// connection that negotiates TLS or GSS encryption is forwarded blind, where
// only stall, resume, drop and half-open apply (use sslmode=disable).
//
// Every fault injected (and every resume) is one JSON line appended to the
// log: time (UTC), mono_ms (CLOCK_MONOTONIC, shared by all machines), conn,
// fault, client, user, application_name; for the COMMIT faults protocol
// ("simple" or "extended"), and for drop-commit-reply outcome, the command
// tag the server answered ("COMMIT"; "ROLLBACK" if the transaction had
// failed; "error"; "server-closed" if the server went away first).
#include "tests/machines/fault_proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tests/machines/pg_wire.h"

namespace wizq::machines {
namespace {

constexpr size_t kMaxPending = 1 << 20;  // stop reading a side past this

// The time now (UTC, ISO 8601 with milliseconds) and, in `mono_ms`, the
// monotonic clock, which every machine on the box shares.
std::string Iso8601Now(int64_t* mono_ms) {
  timespec real, mono;
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  *mono_ms = int64_t{mono.tv_sec} * 1000 + mono.tv_nsec / 1000000;
  tm utc;
  gmtime_r(&real.tv_sec, &utc);
  char buf[64];
  size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  snprintf(buf + n, sizeof buf - n, ".%03ldZ", real.tv_nsec / 1000000);
  return buf;
}

Json Protocol(bool extended) {
  return {{"protocol", extended ? "extended" : "simple"}};
}

// "ADDR:PORT" (IPv4, or [IPv6]:PORT) as a socket address.
sockaddr_storage ParseAddress(const std::string& text, socklen_t* len) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) Die("address without :PORT: " + text);
  std::string host = text.substr(0, colon), port = text.substr(colon + 1);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{}, *res = nullptr;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) {
    Die("not a numeric ADDR:PORT: " + text);
  }
  sockaddr_storage ss{};
  memcpy(&ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return ss;
}

void SetNonBlocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

}  // namespace

[[noreturn]] void Die(const std::string& msg, int code) {
  fprintf(stderr, "wizq_fault_proxy: %s\n", msg.c_str());
  exit(code);
}

void CloseSocket(int* fd, bool reset) {
  if (*fd < 0) return;
  if (reset) {
    linger l{1, 0};
    setsockopt(*fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  close(*fd);
  *fd = -1;
}

Proxy::Proxy(const std::string& listen, const std::string& upstream,
             const std::string& control, const std::string& log)
    : control_path_(control) {
  upstream_ = ParseAddress(upstream, &upstream_len_);
  socklen_t len;
  sockaddr_storage addr = ParseAddress(listen, &len);
  listen_fd_ = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    Die("cannot listen on " + listen + ": " + strerror(errno), 3);
  }
  log_ = fopen(log.c_str(), "a");
  if (!log_) Die("cannot open the log " + log + ": " + strerror(errno), 3);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  if (control.size() >= sizeof un.sun_path) Die("control path too long");
  memcpy(un.sun_path, control.c_str(), control.size());
  struct stat st;
  if (lstat(control.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    unlink(control.c_str());  // left by an earlier proxy killed with -9
  }
  control_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  // Bound last: once the control socket exists the proxy is listening.
  if (bind(control_fd_, reinterpret_cast<sockaddr*>(&un), sizeof un) != 0 ||
      ::listen(control_fd_, 16) != 0) {
    Die("cannot listen on " + control + ": " + strerror(errno), 3);
  }
}

void Proxy::Accept() {
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len,
                   SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;
  auto c = std::make_unique<Conn>();
  c->id = next_id_++;
  c->client = fd;
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&peer), len, host, sizeof host,
                  port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    c->peer = std::string(host) + ":" + port;
  }
  c->server = socket(upstream_.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  SetNonBlocking(c->server);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(c->server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(c->server, reinterpret_cast<sockaddr*>(&upstream_),
              upstream_len_) == 0) {
    c->connecting = false;
  } else if (errno != EINPROGRESS) {
    CloseSocket(&c->server, false);
    CloseSocket(&c->client, true);
    return;
  }
  c->stalled = stall_all_;
  if (c->stalled) Log(*c, "stall");
  conns_[c->id] = std::move(c);
}

void Proxy::Log(const Conn& c, const char* fault, const Json& extra) {
  int64_t mono_ms;
  Json line = {{"time", Iso8601Now(&mono_ms)},
               {"mono_ms", mono_ms},
               {"conn", c.id},
               {"fault", fault},
               {"client", c.peer},
               {"user", c.fe.user()},
               {"application_name", c.fe.application_name()}};
  if (extra.is_object()) line.update(extra);
  fprintf(log_, "%s\n",
          line.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
  fflush(log_);
}

// Closes both sides now: the server's with FIN (so it ends the session),
// the client's with RST when `reset_client`.
void Proxy::Finish(Conn& c, bool reset_client) {
  CloseSocket(&c.server, false);
  CloseSocket(&c.client, reset_client);
}

// A COMMIT the client sent, held by the frontend stream: dropped with the
// connection, or forwarded (its reply marked for dropping if so armed).
// False if the connection is gone.
bool Proxy::OnCommit(Conn& c, const FrontendStream::Event& ev) {
  if (c.arm_drop_commit > 0 || any_drop_commit_ > 0) {
    (c.arm_drop_commit > 0 ? c.arm_drop_commit : any_drop_commit_)--;
    Log(c, "drop-commit", Protocol(ev.extended));
    Finish(c, true);
    return false;
  }
  bool drop_reply = c.arm_drop_reply > 0 || any_drop_reply_ > 0;
  if (drop_reply) {
    (c.arm_drop_reply > 0 ? c.arm_drop_reply : any_drop_reply_)--;
    c.be.DropReplyCycle(ev.replies_before, ev.extended);
  }
  c.fe.ForwardCommit(&c.to_server, drop_reply);
  return true;
}

// The reply to a COMMIT was dropped (or the server went away first):
// logged, both sides closed.
void Proxy::DroppedReply(Conn& c, const std::string& outcome) {
  Json extra = Protocol(c.be.reply_extended());
  extra["outcome"] = outcome;
  Log(c, "drop-commit-reply", extra);
  Finish(c, true);
}

// Moves what both streams allow from input to output, applying the
// protocol faults.
void Proxy::Pump(Conn& c) {
  FrontendStream::Step step;
  FrontendStream::Event ev;
  while ((step = c.fe.Next(&c.to_server, &ev)) != FrontendStream::kNeedMore) {
    if (step == FrontendStream::kCommit && !OnCommit(c, ev)) return;
  }
  if (c.fe.TakeEncryptionRequest()) c.be.ExpectEncryptionAnswer();
  if (c.fe.opaque()) c.be.SetOpaque();
  std::string outcome;
  if (c.be.Pump(&c.to_client, &outcome)) {
    return DroppedReply(c, outcome);
  }
  if (c.be.opaque()) c.fe.SetOpaque();
}

// Writes what is pending to each side (never while stalled).
void Proxy::Flush(Conn& c) {
  if (c.stalled || c.half_open) return;
  auto write_some = [&c](int* fd, std::string* out) {
    while (*fd >= 0 && !out->empty()) {
      ssize_t n = send(*fd, out->data(), out->size(), MSG_NOSIGNAL);
      if (n > 0) {
        out->erase(0, n);
      } else if (errno == EAGAIN || errno == EINTR) {
        return;
      } else {
        CloseSocket(&c.server, true);
        CloseSocket(&c.client, true);
        return;
      }
    }
  };
  if (!c.connecting) write_some(&c.server, &c.to_server);
  write_some(&c.client, &c.to_client);
  if (c.closing && c.to_server.empty() && c.to_client.empty()) {
    Finish(c, false);
  }
}

void Proxy::OnEvents(Conn& c, bool client_side, short revents) {
  if (client_side && c.half_open) {
    // The client gave up (FIN or RST): its socket goes too.
    if (revents & (POLLRDHUP | POLLHUP | POLLERR)) CloseSocket(&c.client, true);
    return;
  }
  if (!client_side && c.connecting && (revents & (POLLOUT | POLLERR))) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c.server, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Finish(c, false);
    c.connecting = false;
  }
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    char buf[16384];
    int fd = client_side ? c.client : c.server;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      if (client_side) {
        c.fe.Feed(buf, n);
      } else {
        c.be.Feed(buf, n);
      }
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      // One side closed: forward what is left, then close the other.
      if (!client_side && c.be.armed()) {
        return DroppedReply(c, "server-closed");
      }
      if (n < 0) return Finish(c, true);
      c.closing = true;
    }
  }
  Pump(c);
  Flush(c);
}

void Proxy::Run() {
  // SIGTERM and SIGINT end the loop (ppoll fails with EINTR; they are
  // blocked elsewhere), so the control socket is removed.
  sigset_t block, orig;
  sigemptyset(&block);
  struct sigaction interrupt {};
  interrupt.sa_handler = [](int) {};
  for (int sig : {SIGTERM, SIGINT}) {
    sigaddset(&block, sig);
    sigaction(sig, &interrupt, nullptr);
  }
  sigprocmask(SIG_BLOCK, &block, &orig);
  sigdelset(&orig, SIGTERM);
  sigdelset(&orig, SIGINT);
  struct Slot {
    int conn;  // 0: listen, -1: control listener, -2: a control client
    bool client;
  };
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Slot> slots;
    fds.push_back({listen_fd_, POLLIN, 0}), slots.push_back({0, false});
    fds.push_back({control_fd_, POLLIN, 0}), slots.push_back({-1, false});
    for (auto& [fd, in] : controls_) {
      fds.push_back({fd, POLLIN, 0}), slots.push_back({-2, false});
    }
    for (auto it = conns_.begin(); it != conns_.end();) {
      Conn& c = *it->second;
      if (c.client < 0) {  // over: the server side goes with it
        CloseSocket(&c.server, false);
        it = conns_.erase(it);
        continue;
      }
      ++it;
      if (c.half_open) {
        fds.push_back({c.client, POLLRDHUP, 0}), slots.push_back({c.id, true});
        continue;
      }
      if (c.stalled) continue;  // not even a hang-up is noticed
      bool room = c.to_server.size() + c.fe.buffered() < kMaxPending;
      short ce = (room && !c.closing && !c.fe.paused() ? POLLIN : 0) |
                 (c.to_client.empty() ? 0 : POLLOUT);
      fds.push_back({c.client, ce, 0}), slots.push_back({c.id, true});
      if (c.server < 0) continue;
      bool back_room = c.to_client.size() + c.be.buffered() < kMaxPending;
      short se = (back_room && !c.connecting && !c.closing ? POLLIN : 0) |
                 (c.connecting || !c.to_server.empty() ? POLLOUT : 0);
      fds.push_back({c.server, se, 0}), slots.push_back({c.id, false});
    }
    if (ppoll(fds.data(), fds.size(), nullptr, &orig) < 0) {
      if (errno == EINTR) break;  // SIGTERM or SIGINT
      Die(std::string("poll: ") + strerror(errno), 3);
    }
    for (size_t i = 0; i < fds.size(); i++) {
      if (!fds[i].revents) continue;
      const Slot& s = slots[i];
      if (s.conn == 0) {
        Accept();
      } else if (s.conn == -1) {
        AcceptControl();
      } else if (s.conn == -2) {
        auto it = controls_.find(fds[i].fd);
        if (it != controls_.end()) ServeControl(it->first, &it->second);
      } else {
        auto it = conns_.find(s.conn);
        if (it != conns_.end() &&
            (s.client ? it->second->client : it->second->server) == fds[i].fd) {
          OnEvents(*it->second, s.client, fds[i].revents);
        }
      }
    }
  }
  unlink(control_path_.c_str());
}

}  // namespace wizq::machines

int main(int argc, char** argv) {
  std::map<std::string, std::string> opt;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || i + 1 >= argc) {
      wizq::machines::Die(
          "usage: --listen ADDR:PORT --upstream ADDR:PORT "
          "--control SOCKET --log FILE | --control SOCKET "
          "--send COMMAND");
    }
    opt[a.substr(2)] = argv[++i];
  }
  if (opt.count("send") && opt.count("control")) {
    return wizq::machines::Send(opt["control"], opt["send"]);
  }
  for (const char* need : {"listen", "upstream", "control", "log"}) {
    if (!opt.count(need)) {
      wizq::machines::Die(std::string("missing --") + need);
    }
  }
  signal(SIGPIPE, SIG_IGN);
  wizq::machines::Proxy proxy(opt["listen"], opt["upstream"], opt["control"],
                              opt["log"]);
  proxy.Run();
  return 0;
}
