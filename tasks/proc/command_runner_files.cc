// CommandRunner, what an attempt starts with: its stdin (a memfd), its
// stdout (the attempt's lock, taken after whatever an earlier tree of the
// task left running has ended) and stderr files, and the plan the spawner
// runs (tasks/proc/spawner.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <string_view>

#include "queue/pg/pg_location.h"  // kPgScrubbedEnv
#include "tasks/exec/attempt_files.h"
#include "tasks/proc/command_runner.h"
#include "tasks/proc/command_runner_child.h"
#include "tasks/proc/orphans_record.h"
#include "tasks/proc/posix_util.h"

extern char** environ;

namespace wizq::internal {
namespace {

constexpr double kStartReapSlackSeconds = 5;

// The inherited environment with `overrides` replacing or adding entries,
// and without the store's credentials (SPEC §14: WIZQ_STORE, PGPASSWORD;
// queue/pg/pg_location.h kPgScrubbedEnv), which no task body or agent gets.
std::vector<std::string> MergedEnv(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::set<std::string_view> names(std::begin(kPgScrubbedEnv),
                                   std::end(kPgScrubbedEnv));
  for (const auto& [name, value] : overrides) names.insert(name);
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (names.count(entry.substr(0, entry.find('='))) == 0) {
      env.emplace_back(entry);
    }
  }
  // Later overrides of the same name win.
  for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
    if (names.erase(it->first) == 1)
      env.push_back(it->first + "=" + it->second);
  }
  return env;
}

// The attempt's stdin: a memfd holding `data` at offset 0 (a pipe already
// holding it where memfds are missing and it fits): no file, no inode on
// disk. The supervisor's shell reads it like a file.
Status MakeStdin(const std::string& data, ScopedFd* in) {
  int fd = memfd_create("wizq-stdin", MFD_CLOEXEC);
  if (fd >= 0) {
    if (fd <= STDERR_FILENO) {
      const int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
      close(fd);
      fd = moved;
      if (fd < 0) return Status::IOErrorFromErrno("cannot dup", "stdin", errno);
    }
    in->reset(fd);
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = pwrite(fd, data.data() + done, data.size() - done,
                               static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        return Status::IOErrorFromErrno("cannot write", "stdin", errno);
      done += static_cast<size_t>(n);
    }
    return Status::OK();
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    return Status::IOErrorFromErrno("cannot create", "a stdin pipe", errno);
  }
  ScopedFd read_end, write_end;
  read_end.reset(p[0]);
  write_end.reset(p[1]);
  if (data.size() > static_cast<size_t>(fcntl(p[1], F_GETPIPE_SZ)) &&
      fcntl(p[1], F_SETPIPE_SZ, static_cast<int>(data.size())) < 0) {
    return Status::NotSupported(
        "the input of this task (" + std::to_string(data.size()) +
        " bytes) does not fit in a pipe, and memfd_create is not available");
  }
  WIZQ_RETURN_IF_ERROR(WriteFd(p[1], data, "stdin"));
  if (p[0] <= STDERR_FILENO) {
    const int moved = fcntl(p[0], F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    if (moved < 0)
      return Status::IOErrorFromErrno("cannot dup", "stdin", errno);
    read_end.reset(moved);
  }
  in->reset(read_end.release());
  return Status::OK();
}

// Whether the tree lock at `path` (a stdout file, or the previous layout's
// running.lock) is held; *exists (may be null) whether the file is there.
Status LockBusy(Env* env, const std::string& path, bool* busy, bool* exists) {
  *busy = false;
  ScopedFd fd;
  Status s = OpenFile(env, path, O_RDONLY, &fd);
  if (exists != nullptr) *exists = s.ok();
  if (s.IsNotFound()) return Status::OK();
  WIZQ_RETURN_IF_ERROR(s);
  bool locked = false;
  WIZQ_RETURN_IF_ERROR(TryLock(fd.get(), path, &locked));
  *busy = !locked;
  return Status::OK();
}

// Whether an earlier attempt's tree of the task may still run: the latest
// earlier attempt whose stdout exists holds its lock (the trees of those
// before it were ended before it started), or the previous layout's
// running.lock is held. Attempt 1 of a new run costs one failed open.
Status EarlierTreeBusy(Env* env, const CommandSpec& spec, bool* busy) {
  WIZQ_RETURN_IF_ERROR(
      LockBusy(env, AttemptFiles::LockPath(spec.output_dir), busy, nullptr));
  for (int k = spec.attempt - 1; !*busy && k >= 1; --k) {
    bool exists = false;
    WIZQ_RETURN_IF_ERROR(
        LockBusy(env, AttemptFiles::InTaskDir(spec.output_dir, k).stdout_path(),
                 busy, &exists));
    if (exists) break;
  }
  return Status::OK();
}

}  // namespace

// Opens the attempt's stdout and takes its lock, after ending whatever an
// earlier tree of the task (or of this very attempt, started by a worker
// that died) left running; then its stderr and stdin.
Status OpenChildFds(Env* env, const CommandSpec& spec, ChildFds* fds) {
  const AttemptFiles files =
      AttemptFiles::InTaskDir(spec.output_dir, spec.attempt);
  const std::string out = files.stdout_path();
  bool busy = false;
  if (!spec.first_claim)
    WIZQ_RETURN_IF_ERROR(EarlierTreeBusy(env, spec, &busy));
  for (int round = 0;; ++round) {
    if (busy) {
      if (round > 1) {
        return Status::Busy("an earlier attempt of this task still holds " +
                            out);
      }
      WIZQ_RETURN_IF_ERROR(
          ReapOrphans(spec.output_dir, spec.kill_grace_seconds,
                      spec.kill_grace_seconds + kStartReapSlackSeconds, env));
    }
    WIZQ_RETURN_IF_ERROR(OpenFile(env, out, O_RDWR | O_CREAT, &fds->out));
    bool locked = false;
    WIZQ_RETURN_IF_ERROR(TryLock(fds->out.get(), out, &locked));
    if (locked) break;
    fds->out.reset(-1);
    busy = true;
  }
  // Truncated only now that no tree writes to it.
  if (ftruncate(fds->out.get(), 0) != 0) {
    return Status::IOErrorFromErrno("cannot truncate", out, errno);
  }
  WIZQ_RETURN_IF_ERROR(OpenFile(env, files.stderr_path(),
                                O_WRONLY | O_CREAT | O_TRUNC, &fds->err));
  return MakeStdin(spec.stdin_data, &fds->in);
}

// What the spawner (tasks/proc/spawner.h) starts: /bin/sh -c script, leading
// its own process group.
internal::SpawnPlan PlanOf(const CommandSpec& spec, const ChildFds& fds,
                           int journal, uint64_t serial) {
  internal::SpawnPlan plan;
  plan.serial = serial;
  plan.attempt = spec.attempt;
  plan.shell = kCommandShell;
  plan.key = AttemptFiles::TaskKey(spec.output_dir);
  plan.boot_id = internal::CurrentBootId();
  plan.cwd = spec.cwd;
  plan.argv = {"sh", "-c", spec.script};
  plan.env = MergedEnv(spec.env);
  plan.in = fds.in.get();
  plan.out = fds.out.get();
  plan.err = fds.err.get();
  plan.journal = journal;
  return plan;
}

}  // namespace wizq::internal
