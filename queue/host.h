// HostId: which machine (and which container on it) a worker runs on, as a
// claim records it (SPEC §14: "a claim records the host it runs on").
//
// Two claims were made on the same host when their boot id (the kernel's
// run), PID namespace (which processes they can see and signal) and local
// workspace (the device and inode of the directory that holds attempt
// journals and task output) are all equal: only then can a worker read
// the other's attempt journal and wait for, adopt or end its process
// trees. Containers on one kernel differ by PID namespace or workspace.
#ifndef WIZQ_QUEUE_HOST_H_
#define WIZQ_QUEUE_HOST_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace wizq {

class Env;

struct HostId {
  std::string boot_id;  // /proc/sys/kernel/random/boot_id
  uint64_t pid_ns = 0;  // inode of /proc/self/ns/pid
  uint64_t workspace_dev = 0, workspace_ino = 0;

  bool empty() const { return boot_id.empty(); }
  // "<boot id>/<pid ns>/<dev>:<ino>": the form events and rows record.
  std::string Key() const;
  static bool Parse(std::string_view key, HostId* out);
  bool operator==(const HostId& o) const {
    return boot_id == o.boot_id && pid_ns == o.pid_ns &&
           workspace_dev == o.workspace_dev && workspace_ino == o.workspace_ino;
  }
  bool operator!=(const HostId& o) const { return !(*this == o); }

  // This process's host, with `workspace` (an existing directory) as its
  // local workspace.
  static Status Current(Env* env, const std::string& workspace, HostId* out);
};

// A new worker id: "w<pid>-<8 random hex digits>" (every store's workers).
std::string NewWorkerId();

}  // namespace wizq

#endif  // WIZQ_QUEUE_HOST_H_
