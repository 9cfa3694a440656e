// The worker registry, `.wizard/workers/`: one file per worker process,
// named by its worker id and held locked (flock) by that process for its
// whole life. A worker whose file can be locked by someone else is dead.
// The file holds {"worker","pid","run_id","pid_space","started_ms"}: the
// pid is only checked by a reader in the same pid_space (boot id and pid
// namespace); a worker of another one (a container sharing the directory)
// lives as long as its lock is held.
#ifndef WIZQ_QUEUE_WORKERS_H_
#define WIZQ_QUEUE_WORKERS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fs/env.h"
#include "queue/dir/dir_private.h"
#include "queue/host.h"  // NewWorkerId
#include "util/status.h"

namespace wizq {

struct LiveWorker {
  std::string id;
  std::string run_id;
  int64_t pid = 0;
};

// REQUIRES: every call is made under the queue directory lock, so that a
// worker between creating and locking its entry is never judged dead.
class WorkerRegistry {
 public:
  WorkerRegistry(Env* env, std::string dir) : env_(env), dir_(std::move(dir)) {}

  // Registers this process as a worker of `run_id`: creates and locks its
  // entry. The lock is held until Unregister or destruction.
  Status Register(const std::string& run_id, int64_t now_ms);
  // Removes this worker's entry and releases its lock.
  Status Unregister();
  const std::string& self() const { return self_; }

  // True if worker `id` is alive (this process counts as alive). A dead
  // worker's entry is removed on the way. Results are cached until
  // ForgetCache().
  bool IsAlive(const std::string& id);
  void ForgetCache() { cache_.clear(); }
  // Every other live worker, with what its entry says.
  Status ListLive(std::vector<LiveWorker>* live);

 private:
  bool RecordedPidIsGone(const std::string& path);

  Env* env_;
  std::string dir_;
  std::string self_;
  std::unique_ptr<FileLock> self_lock_;
  std::map<std::string, bool> cache_;
};

// One entry of the registry as a reader sees it (ProbeWorkers).
struct WorkerEntry {
  std::string id;
  std::string run_id;
  int64_t pid = 0;
  int64_t started_ms = 0;  // when it registered; 0 if the entry is empty
  bool alive = false;
};

// Every entry of the registry in `dir` (`.wizard/workers`) and whether its
// worker lives: its lock is held and its recorded process exists. Writes
// nothing — no lock file is created, no dead entry removed — so it works on
// a read-only copy of a run, where every entry reads as dead unless a live
// process holds its lock. Needs no directory lock: only entries with a
// complete record are probed, and a worker writes its record after it has
// taken its lock; an empty entry (a worker registering) counts alive while
// the pid in its name exists. (A probe that holds a dead entry's shared
// lock at the moment another process's IsAlive tries it makes that process
// fall back on the recorded pid for one transaction.)
// OK with nothing if `dir` does not exist.
Status ProbeWorkers(Env* env, const std::string& dir,
                    std::vector<WorkerEntry>* entries);

}  // namespace wizq

#endif  // WIZQ_QUEUE_WORKERS_H_
