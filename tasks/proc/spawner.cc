#include "tasks/proc/spawner.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tasks/proc/posix_util.h"
#include "util/job_control.h"

namespace wizq::internal {
namespace {

constexpr int kMaxFds = 5;

// The plan's strings, each NUL-terminated: shell, key, boot id, cwd, argv,
// env (spawner_main.cc reads them in this order).
std::string PlanText(const SpawnPlan& p) {
  std::string text;
  auto add = [&text](const std::string& s) {
    text.append(s);
    text.push_back('\0');
  };
  add(p.shell);
  add(p.key);
  add(p.boot_id);
  add(p.cwd);
  for (const std::string& a : p.argv) add(a);
  for (const std::string& e : p.env) add(e);
  return text;
}

Status PlanFd(const std::string& text, ScopedFd* fd) {
  const int m = memfd_create("wizq-plan", MFD_CLOEXEC);
  if (m < 0) return Status::IOErrorFromErrno("cannot create", "a memfd", errno);
  fd->reset(m);
  return WriteFd(m, text, "the spawn plan");
}

}  // namespace

Spawner::~Spawner() { Stop(); }

void Spawner::Stop() {
  releases_.clear();  // at EOF the spawner reaps them all
  if (sock_ >= 0) close(sock_);
  sock_ = -1;
  if (pid_ > 0) {
    job_control::RemoveGroup(pid_);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

Status Spawner::Start() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::IOErrorFromErrno("cannot create", "the spawner's socket",
                                    errno);
  }
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    const int e = errno;
    close(sv[0]);
    close(sv[1]);
    return Status::IOErrorFromErrno("cannot fork", "the spawner", e);
  }
  if (child == 0) SpawnerMain(sv[1], parent);
  close(sv[1]);
  // Also here, so that no signal to the group precedes the child's own.
  setpgid(child, child);
  // Stopped with wizq (Ctrl+Z), so that it starts no queued attempt
  // meanwhile; killed by a second Ctrl+C like the tasks' groups.
  job_control::AddGroup(child);
  fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
  sock_ = sv[0];
  pid_ = child;
  died_ = false;
  return Status::OK();
}

Status Spawner::Spawn(const SpawnPlan& plan, uint32_t limit) {
  if (sock_ < 0) WIZQ_RETURN_IF_ERROR(Start());
  const std::string text = PlanText(plan);
  ScopedFd plan_fd;
  const bool inline_plan = text.size() <= kInlinePlanMax;
  if (!inline_plan) WIZQ_RETURN_IF_ERROR(PlanFd(text, &plan_fd));
  SpawnRequest req;
  AddReleases(&req);
  req.kind = SpawnRequest::kSpawn;
  req.attempt = plan.attempt;
  req.serial = plan.serial;
  req.argc = static_cast<uint32_t>(plan.argv.size());
  req.envc = static_cast<uint32_t>(plan.env.size());
  req.plan_size = static_cast<uint32_t>(text.size());
  req.limit = limit;
  const int fds[kMaxFds] = {plan.in, plan.out, plan.err, plan.journal,
                            plan_fd.get()};
  std::string msg(reinterpret_cast<const char*>(&req), sizeof(req));
  if (inline_plan) msg += text;
  return Send(msg.data(), msg.size(), fds, inline_plan ? 4 : 5);
}

void Spawner::AddReleases(SpawnRequest* req) {
  const size_t n =
      std::min<size_t>(releases_.size(), SpawnRequest::kMaxRelease);
  for (size_t i = 0; i < n; i++) req->release[i] = releases_[i];
  req->nrelease = static_cast<uint32_t>(n);
  req->deadline_ns = deadline_ns_;
  releases_.erase(releases_.begin(),
                  releases_.begin() + static_cast<ptrdiff_t>(n));
}

void Spawner::FlushReleases() {
  while (sock_ >= 0 && !releases_.empty()) Tell(SpawnRequest::kRelease, 0, 0);
}

void Spawner::Release(uint64_t serial) {
  if (sock_ < 0) return;
  releases_.push_back(serial);
  if (releases_.size() >= SpawnRequest::kMaxRelease) FlushReleases();
}

void Spawner::Cancel(uint64_t serial) {
  Tell(SpawnRequest::kCancel, serial, 0);
}

void Spawner::SetLimit(uint32_t limit) { Tell(SpawnRequest::kLimit, 0, limit); }

void Spawner::SetDeadline(int64_t deadline_ns) {
#ifdef WIZQ_MUTANT_NO_LOCAL_DEADLINE
  // Mutant (tests/machines/torture, make torture-mutants): no deadline.
  deadline_ns = 0;
#endif
  if (deadline_ns == deadline_ns_) return;
  deadline_ns_ = deadline_ns;
  Tell(SpawnRequest::kDeadline, 0, 0);
}

void Spawner::Tell(uint32_t kind, uint64_t serial, uint32_t limit) {
  if (sock_ < 0) return;
  SpawnRequest req;
  req.kind = kind;
  req.serial = serial;
  req.limit = limit;
  AddReleases(&req);
  Send(&req, sizeof(req), nullptr, 0).IgnoreError();
}

Status Spawner::Send(const void* msg, size_t size, const int* fds, int nfds) {
  iovec iov = {const_cast<void*>(msg), size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msghdr mh;
  memset(&mh, 0, sizeof(mh));
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (nfds > 0) {
    memset(control, 0, sizeof(control));
    mh.msg_control = control;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  for (;;) {
    if (sendmsg(sock_, &mh, MSG_NOSIGNAL) >= 0) return Status::OK();
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET) died_ = true;
    if (errno != EAGAIN) {
      return Status::IOErrorFromErrno("cannot write to", "the spawner", errno);
    }
    // Full: the spawner may itself wait for its events to be read.
    pollfd p = {sock_, POLLIN | POLLOUT, 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) {
      return Status::IOErrorFromErrno("cannot poll", "the spawner", errno);
    }
    bool died = false;
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      WIZQ_RETURN_IF_ERROR(ReadSome(&died));
    }
    if (died)
      return Status::IOError("the spawner (pid " + std::to_string(pid_) +
                             ") died");
  }
}

Status Spawner::ReadSome(bool* died) {
  *died = died_;
  while (!died_) {
    SpawnEvent ev;
    const ssize_t n = recv(sock_, &ev, sizeof(ev), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {  // EOF or a reset: the spawner is gone
      died_ = true;
      break;
    }
    if (static_cast<size_t>(n) == sizeof(ev)) pending_.push_back(ev);
  }
  *died = died_;
  return Status::OK();
}

Status Spawner::Read(std::vector<SpawnEvent>* events, bool* died) {
  *died = false;
  if (sock_ < 0) return Status::OK();
  WIZQ_RETURN_IF_ERROR(ReadSome(died));
  events->insert(events->end(), pending_.begin(), pending_.end());
  pending_.clear();
  if (*died) Stop();
  return Status::OK();
}

}  // namespace wizq::internal
