#include "queue/dir/workers.h"

#include <fcntl.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "util/json_writer.h"

namespace wizq {

namespace {

// Which pids this process can see: the host's boot id and the identity of
// its pid namespace. "" when /proc does not tell.
const std::string& OwnPidSpace() {
  static const std::string space = [] {
    struct stat ns;
    std::string boot;
    if (::stat("/proc/self/ns/pid", &ns) != 0 ||
        !Env::Posix()
             ->ReadUserFile("/proc/sys/kernel/random/boot_id", &boot)
             .ok()) {
      return std::string();
    }
    while (!boot.empty() && boot.back() == '\n') boot.pop_back();
    return boot + ":" + std::to_string(ns.st_dev) + ":" +
           std::to_string(ns.st_ino);
  }();
  return space;
}

// Whether the recorded `pid` of entry `doc` is gone from this pid space.
// A record of another pid space (a container sharing the directory, or
// another host) names a pid we cannot check: it is not gone. A record
// without pid_space (older wizq) is taken as ours.
bool PidGoneHere(const simdjson::dom::element& doc, int64_t pid) {
  if (pid <= 0) return false;
  std::string_view space;
  if (!doc["pid_space"].get(space) &&
      (OwnPidSpace().empty() || space != OwnPidSpace())) {
    return false;
  }
  return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

Status WorkerRegistry::Register(const std::string& run_id, int64_t now_ms) {
  self_ = NewWorkerId();
  const std::string path = dir_ + "/" + self_;
  WIZQ_RETURN_IF_ERROR(env_->LockFile(path, /*wait=*/false, &self_lock_));
  std::string info;
  JsonWriter w(&info);
  w.BeginObject().Field("worker", self_);
  w.Key("pid").Int(getpid());
  w.Field("run_id", run_id);
  if (!OwnPidSpace().empty()) w.Field("pid_space", OwnPidSpace());
  w.Key("started_ms").Int(now_ms).EndObject();
  info.push_back('\n');
  // Not synced: the entry only matters while this process lives.
  std::unique_ptr<WritableFile> file;
  WIZQ_RETURN_IF_ERROR(env_->NewWritableFile(path, &file));
  WIZQ_RETURN_IF_ERROR(file->Append(info));
  return file->Close();
}

Status WorkerRegistry::Unregister() {
  if (!self_lock_) return Status::OK();
  Status s = env_->RemoveFile(dir_ + "/" + self_);
  self_lock_.reset();
  return s;
}

// The lock can outlive the worker for a few milliseconds: a child being
// started with posix_spawn holds copies of all of wizq's descriptors until
// its exec closes them. So a held lock whose recorded process is gone is a
// dead worker too.
bool WorkerRegistry::RecordedPidIsGone(const std::string& path) {
  std::string text;
  if (!env_->ReadFile(path, &text).ok()) return false;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  int64_t pid = 0;
  if (parser.parse(text).get(doc) || doc["pid"].get(pid) || pid <= 0) {
    return false;  // no record yet (being registered): trust the lock
  }
  return PidGoneHere(doc, pid);
}

bool WorkerRegistry::IsAlive(const std::string& id) {
  if (id == self_) return true;
  auto it = cache_.find(id);
  if (it != cache_.end()) return it->second;
  const std::string path = dir_ + "/" + id;
  bool alive = false;
  if (id.find('/') == std::string::npos && env_->FileExists(path)) {
    std::unique_ptr<FileLock> lock;
    Status s = env_->LockFile(path, /*wait=*/false, &lock);
    alive = s.IsBusy() && !RecordedPidIsGone(path);
    // Dead: tidy its entry away. Best effort: a stale entry whose lock is
    // free reads as dead again next time.
    if (s.ok()) env_->RemoveFile(path).IgnoreError();
  }
  cache_[id] = alive;
  return alive;
}

Status WorkerRegistry::ListLive(std::vector<LiveWorker>* live) {
  std::vector<std::string> names;
  Status s = env_->ListDir(dir_, &names);
  if (s.IsNotFound()) return Status::OK();
  WIZQ_RETURN_IF_ERROR(s);
  for (const std::string& name : names) {
    if (name == self_ || !IsAlive(name)) continue;
    LiveWorker w;
    w.id = name;
    std::string text;
    if (env_->ReadFile(dir_ + "/" + name, &text).ok()) {
      simdjson::dom::parser parser;
      simdjson::dom::element doc;
      if (!parser.parse(text).get(doc)) {
        std::string_view run_id;
        if (!doc["run_id"].get(run_id)) w.run_id = run_id;
        if (doc["pid"].get(w.pid)) w.pid = 0;
      }
    }
    live->push_back(w);
  }
  return Status::OK();
}

namespace {

// Whether another process holds the lock of the entry at `path`. A shared,
// non-blocking flock on a read-only descriptor: it conflicts with the
// worker's exclusive lock and needs no write access.
bool EntryLockHeld(Env* env, const std::string& path) {
  int fd = -1;
  if (!env->OpenDescriptor(path, O_RDONLY, &fd).ok()) return false;
  // Raw flock on a descriptor the Env handed out (fs/env.h allows it).
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases a lock we took
  return held;
}

}  // namespace

Status ProbeWorkers(Env* env, const std::string& dir,
                    std::vector<WorkerEntry>* entries) {
  std::vector<std::string> names;
  Status s = env->ListDir(dir, &names);
  if (s.IsNotFound()) return Status::OK();
  WIZQ_RETURN_IF_ERROR(s);
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    WorkerEntry e;
    e.id = name;
    std::string text;
    if (!env->ReadFile(path, &text).ok()) continue;  // removed meanwhile
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (text.empty() || parser.parse(text).get(doc)) {
      // Being registered (or its worker died in between): its lock must not
      // be probed; the pid in its name tells.
      e.pid = std::strtoll(name.c_str() + (name.empty() ? 0 : 1), nullptr, 10);
      e.alive = e.pid > 0 &&
                !(kill(static_cast<pid_t>(e.pid), 0) != 0 && errno == ESRCH);
      entries->push_back(e);
      continue;
    }
    std::string_view run_id;
    if (!doc["run_id"].get(run_id)) e.run_id = run_id;
    if (doc["pid"].get(e.pid)) e.pid = 0;
    if (doc["started_ms"].get(e.started_ms)) e.started_ms = 0;
    e.alive = EntryLockHeld(env, path) && !PidGoneHere(doc, e.pid);
    entries->push_back(e);
  }
  return Status::OK();
}

}  // namespace wizq
