#include "queue/host.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "fs/env.h"
#include "util/random.h"

namespace wizq {

std::string HostId::Key() const {
  return boot_id + "/" + std::to_string(pid_ns) + "/" +
         std::to_string(workspace_dev) + ":" + std::to_string(workspace_ino);
}

bool HostId::Parse(std::string_view key, HostId* out) {
  const size_t a = key.find('/');
  const size_t b = a == std::string_view::npos ? a : key.find('/', a + 1);
  const size_t c = b == std::string_view::npos ? b : key.find(':', b + 1);
  if (c == std::string_view::npos || a == 0) return false;
  auto number = [](std::string_view s, uint64_t* n) {
    if (s.empty() || s.size() > 20) return false;
    *n = 0;
    for (char ch : s) {
      if (ch < '0' || ch > '9') return false;
      *n = *n * 10 + static_cast<uint64_t>(ch - '0');
    }
    return true;
  };
  HostId h;
  h.boot_id = std::string(key.substr(0, a));
  if (!number(key.substr(a + 1, b - a - 1), &h.pid_ns) ||
      !number(key.substr(b + 1, c - b - 1), &h.workspace_dev) ||
      !number(key.substr(c + 1), &h.workspace_ino)) {
    return false;
  }
  *out = std::move(h);
  return true;
}

Status HostId::Current(Env* env, const std::string& workspace, HostId* out) {
  HostId h;
  // The kernel's view of this process, read through /proc (fs/env.h
  // allows /proc inspection outside Env).
  Status s =
      Env::Posix()->ReadUserFile("/proc/sys/kernel/random/boot_id", &h.boot_id);
  if (!s.ok()) return s.Annotate("reading this machine's boot id");
  while (!h.boot_id.empty() &&
         (h.boot_id.back() == '\n' || h.boot_id.back() == ' ')) {
    h.boot_id.pop_back();
  }
  struct stat ns;
  if (::stat("/proc/self/ns/pid", &ns) != 0) {
    return Status::IOErrorFromErrno("stat", "/proc/self/ns/pid", errno);
  }
  h.pid_ns = static_cast<uint64_t>(ns.st_ino);
  FileInfo info;
  WIZQ_RETURN_IF_ERROR(env->GetFileInfo(workspace, &info));
  h.workspace_dev = info.device;
  h.workspace_ino = info.inode;
  *out = std::move(h);
  return Status::OK();
}

std::string NewWorkerId() {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "w%d-%08x", static_cast<int>(getpid()),
                static_cast<unsigned>(Random32()));
  return buf;
}

}  // namespace wizq
