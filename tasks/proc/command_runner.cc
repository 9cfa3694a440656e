#include "tasks/proc/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "tasks/exec/attempt_files.h"
#include "tasks/proc/command_runner_child.h"
#include "tasks/proc/orphans.h"
#include "tasks/proc/orphans_record.h"
#include "tasks/proc/posix_util.h"
#include "util/job_control.h"

namespace wizq {

using internal::AttemptRecord;
using internal::CheckRealDir;
using internal::FileHolders;
using internal::FormatSeconds;
using internal::kNever;
using internal::NowNs;
using internal::OpenFile;
using internal::OrphanState;
using internal::ProbeOrphan;
using internal::ScopedFd;
using internal::SecondsToNs;
using internal::SignalOrphans;
using internal::WriteFd;

namespace {

constexpr const char* kShell = internal::kCommandShell;
constexpr double kStartReapSlackSeconds = 5;
constexpr int kAdoptPollMs = 20;  // how often an adopted attempt is probed

double NsToSeconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

// Signals the task's process group, and the leader itself if it left it.
void SignalTree(pid_t leader, int sig) {
  if (leader <= 1) return;  // an adopted tree whose leader is gone
  kill(-leader, sig);
  if (getpgid(leader) != leader) kill(leader, sig);
}

}  // namespace

// --- CommandRunner -----------------------------------------------------------

namespace {

void ReadStdout(Env* env, const std::string& path, size_t max,
                CommandResult* result) {
  const size_t limit = max == SIZE_MAX ? max : max + 1;
  Status s = env->ReadFilePrefix(path, limit, &result->stdout_text);
  if (!s.ok()) {
    if (result->error.empty()) result->error = s.ToString();
    return;
  }
  if (result->stdout_text.size() > max) {
    result->stdout_text.resize(max);
    result->stdout_truncated = true;
  }
}

}  // namespace

namespace internal {

void ReadStdoutInto(Env* env, const std::string& path, size_t max,
                    CommandResult* result) {
  ReadStdout(env, path, max, result);
}

void DescribeEnd(const AttemptRecord& rec, bool timed_out, double timeout,
                 CommandResult* result) {
  using Outcome = CommandResult::Outcome;
  if (rec.end == AttemptRecord::End::kExit) {
    result->outcome = Outcome::kExited;
    result->exit_code = rec.value;
    if (result->exit_code != 0) {
      result->error = "exit code " + std::to_string(result->exit_code);
    }
  } else if (rec.end == AttemptRecord::End::kSignal) {
    result->outcome = Outcome::kSignaled;
    result->signal = rec.value;
    result->error = "killed by signal " + std::to_string(result->signal) +
                    " (" + strsignal(result->signal) + ")";
  }
  if (timed_out) {
    result->outcome = Outcome::kTimedOut;
    result->error = "timed out after " + FormatSeconds(timeout);
  }
}

}  // namespace internal

struct CommandRunner::Journal {
  std::string path;
  FileInfo file;
  ScopedFd fd;
};

// The run's journal, opened O_APPEND (created, and its directory synced,
// if missing: an orphan's synced end line must not lose its file's name);
// reopened when the file at the path is another (the run was archived).
Status CommandRunner::OpenJournal(const std::string& task_dir,
                                  std::shared_ptr<Journal>* out) {
  const std::string path = AttemptFiles::JournalPath(task_dir);
  FileInfo info;
  Status s = env_->GetFileInfo(path, &info);
  if (!s.ok() && !s.IsNotFound()) return s;
  for (const auto& j : journals_) {
    if (j->path == path && s.ok() && j->file.device == info.device &&
        j->file.inode == info.inode) {
      *out = j;
      return Status::OK();
    }
  }
  auto j = std::make_shared<Journal>();
  j->path = path;
  constexpr int kFlags = O_RDWR | O_APPEND;
  if (s.IsNotFound()) {
    WIZQ_RETURN_IF_ERROR(OpenFile(env_, path, kFlags | O_CREAT, &j->fd));
    const size_t slash = path.rfind('/');
    WIZQ_RETURN_IF_ERROR(env_->SyncDir(path.substr(0, slash)));
  } else {
    WIZQ_RETURN_IF_ERROR(OpenFile(env_, path, kFlags, &j->fd));
  }
  struct stat st;
  if (fstat(j->fd.get(), &st) != 0) {
    return Status::IOErrorFromErrno("cannot stat", path, errno);
  }
  j->file.device = static_cast<uint64_t>(st.st_dev);
  j->file.inode = static_cast<uint64_t>(st.st_ino);
  // A replaced one stays open as long as a child still needs it.
  journals_.erase(
      std::remove_if(journals_.begin(), journals_.end(),
                     [&](const auto& x) { return x->path == path; }),
      journals_.end());
  journals_.push_back(j);
  *out = j;
  return Status::OK();
}

CommandRunner::CommandRunner(Env* env) : env_(env) {}

CommandRunner::~CommandRunner() { TerminateAll(0); }

size_t CommandRunner::running() const {
  return children_.size() + spawn_failures_.size();
}

bool CommandRunner::FindByProcess(pid_t pid, uint64_t* token) const {
  const pid_t group = pid > 0 ? getpgid(pid) : -1;
  for (const auto& c : children_) {
    if (!c->exited && c->pid > 1 && (c->pid == pid || c->pid == group)) {
      *token = c->token;
      return true;
    }
  }
  return false;
}

Status CommandRunner::Start(const CommandSpec& spec, uint64_t token) {
  const int64_t start_ns = NowNs();
  for (const auto& c : children_) {
    if (c->output_dir == spec.output_dir) {
      return Status::Busy("a command of " + spec.output_dir +
                          " is already running");
    }
  }
  const size_t slash = spec.output_dir.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    // Once per directory and runner: a run's tasks all share it.
    const std::string parent = spec.output_dir.substr(0, slash);
    if (checked_dirs_.count(parent) == 0) {
      if (!env_->FileExists(parent)) {
        WIZQ_RETURN_IF_ERROR(env_->CreateDirs(parent, 0700));
      }
      WIZQ_RETURN_IF_ERROR(CheckRealDir(env_, parent));
      checked_dirs_.insert(parent);
    }
  }
  std::shared_ptr<Journal> journal;
  WIZQ_RETURN_IF_ERROR(OpenJournal(spec.output_dir, &journal));
  internal::ChildFds fds;
  WIZQ_RETURN_IF_ERROR(internal::OpenChildFds(env_, spec, &fds));
  if (!spawn_error_.ok()) {  // out of descriptors or processes: stop
    Status s = spawn_error_;
    spawn_error_ = Status::OK();
    return s;
  }
  const uint64_t serial = ++last_serial_;
  sent_limit_ = SpawnLimit();
  Status sent = spawner_.Spawn(
      internal::PlanOf(spec, fds, journal->fd.get(), serial), sent_limit_);
  if (!sent.ok() && spawner_.dead()) {
    // It died before Wait noticed: its attempts are judged, and a new one
    // is started for this one.
    WIZQ_RETURN_IF_ERROR(ReadSpawnEvents());
    sent = spawner_.Spawn(
        internal::PlanOf(spec, fds, journal->fd.get(), serial), sent_limit_);
  }
  WIZQ_RETURN_IF_ERROR(sent);
  auto child = std::make_unique<Child>();
  child->token = token;
  child->serial = serial;
  child->pid = 0;  // until the spawner's kStarted
  child->attempt = spec.attempt;
  child->cwd = spec.cwd;
  child->output_dir = spec.output_dir;
  child->stdout_path =
      AttemptFiles::InTaskDir(spec.output_dir, spec.attempt).stdout_path();
  child->max_stdout_bytes = spec.max_stdout_bytes;
  child->start_ns = start_ns;
  // The timeout runs from kStarted on (it may wait in the spawner first).
  child->has_timeout = spec.timeout_seconds.has_value();
  child->timeout_seconds = spec.timeout_seconds.value_or(0);
  child->grace_seconds = spec.kill_grace_seconds;
  children_.push_back(std::move(child));
  return Status::OK();
}

int CommandRunner::MillisToNextEvent(int64_t deadline_ns) const {
  // Signals are due on the active clock (job_control.h), the deadline on
  // the monotonic one.
  int64_t next = kNever;
  for (const auto& c : children_) {
    if (!c->timed_out) next = std::min(next, c->term_ns);
    next = std::min(next, c->kill_ns);
  }
  if (next != kNever) next += NowNs() - job_control::ActiveNowNs();
  next = std::min(next, deadline_ns);
  if (next == kNever) return -1;
  const int64_t ns = next - NowNs();
  if (ns <= 0) return 0;
  return static_cast<int>(
      std::min<int64_t>((ns + 999'999) / 1'000'000, INT_MAX));
}

Status CommandRunner::PollChildren(int timeout_ms) {
  bool any_adopted = false;
  for (const auto& c : children_) any_adopted = any_adopted || c->adopted;
  if (any_adopted && timeout_ms != 0) {
    timeout_ms =
        timeout_ms < 0 ? kAdoptPollMs : std::min(timeout_ms, kAdoptPollMs);
  }
  pollfd fds[2] = {{spawner_.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const int n = poll(fds, 2, timeout_ms);  // a -1 descriptor is ignored
  if (n < 0 && errno != EINTR) {
    return Status::IOErrorFromErrno("cannot poll", "task processes", errno);
  }
  woken_ = n > 0 && fds[1].revents != 0;
  if (n > 0 && fds[0].revents != 0) WIZQ_RETURN_IF_ERROR(ReadSpawnEvents());
  if (any_adopted) ProbeAdopted(/*force=*/false);
  return Status::OK();
}

// Cancelled, or refused for want of descriptors, memory or processes: an
// environment error that the next Start reports, not the task's failure.
bool CommandRunner::NeverStarted(const Child& c) {
  const int e = c.end.value;
  return !c.adopted && c.pid <= 0 && c.end.ended &&
         c.end.end == AttemptRecord::End::kSpawn &&
         (e == ECANCELED || e == EMFILE || e == ENFILE || e == ENOMEM ||
          e == EAGAIN);
}

void CommandRunner::Started(Child* c, pid_t pid, int64_t at_ns) {
  c->pid = pid;
  if (report_begun_) begun_.push_back(c->token);
  const int64_t now = NowNs();
  // The spawner may have held the event back a little (tasks/proc/spawner.h).
  c->start_ns = at_ns > 0 && at_ns <= now ? at_ns : now;
  if (c->has_timeout) {
    // On the clock that stands still while wizq is stopped (Ctrl+Z).
    c->term_ns = job_control::ActiveNowNs() - (now - c->start_ns) +
                 SecondsToNs(c->timeout_seconds);
  }
  job_control::AddGroup(pid);  // stopped with wizq, killed by a 2nd Ctrl+C
}

void CommandRunner::set_max_running(int n) {
  max_running_ = n;
  UpdateLimit();
}

uint32_t CommandRunner::SpawnLimit() const {
  if (max_running_ < 0) return internal::SpawnRequest::kNoLimit;
  int adopted = 0;
  for (const auto& c : children_) adopted += c->adopted && !c->exited;
  return static_cast<uint32_t>(std::max(0, max_running_ - adopted));
}

void CommandRunner::UpdateLimit() {
  const uint32_t limit = SpawnLimit();
  if (limit == sent_limit_) return;
  sent_limit_ = limit;
  spawner_.SetLimit(limit);  // nothing to tell when none runs yet
}

void CommandRunner::TakeBegun(std::vector<uint64_t>* tokens) {
  tokens->insert(tokens->end(), begun_.begin(), begun_.end());
  begun_.clear();
}

void CommandRunner::CancelWaiting() {
  for (const auto& c : children_) {
    if (!c->adopted && c->pid <= 0 && !c->exited && c->signalled == 0) {
      spawner_.Cancel(c->serial);
      c->signalled = -1;
    }
  }
}

Status CommandRunner::ReadSpawnEvents() {
  std::vector<internal::SpawnEvent> events;
  bool died = false;
  const pid_t spawner = spawner_.pid();
  WIZQ_RETURN_IF_ERROR(spawner_.Read(&events, &died));
  for (const internal::SpawnEvent& ev : events) {
    for (const auto& c : children_) {
      if (c->adopted || c->serial != ev.serial) continue;
      if (ev.pid > 0 && c->pid <= 0) Started(c.get(), ev.pid, ev.at_ns);
      if (ev.kind == internal::SpawnEvent::kEnded) {
        // The spawner may have held the event back (tasks/proc/spawner.h).
        const int64_t now = NowNs();
        c->end_ns = ev.at_ns > 0 && ev.at_ns <= now ? ev.at_ns : now;
        c->exited = true;
        c->end.ended = true;
        c->end.end = static_cast<AttemptRecord::End>(ev.end);
        c->end.value = ev.value;
        c->past_deadline = ev.past_deadline != 0;
        if (NeverStarted(*c) && ev.value != ECANCELED) {
          spawn_error_ = Status::IOErrorFromErrno(
              "cannot start", "/bin/sh -c (the spawner)", ev.value);
        }
      }
    }
  }
  if (!died) return Status::OK();
  // Its events may have been held back (tasks/proc/spawner.h), so each attempt
  // is judged by the journal: recorded ends stand; what began and has no
  // end is ended (nothing records it any more); what never began is given
  // back, not failed.
  for (const auto& c : children_) {
    if (c->adopted || c->exited) continue;
    c->exited = true;
    c->spawner_died = spawner;
    AttemptRecord rec;
    const OrphanState state =
        ProbeOrphan(env_, c->output_dir, c->attempt, &rec);
    if (state == OrphanState::kFinished) {
      c->end = rec;
      continue;
    }
    if (!internal::AttemptBegan(env_, c->output_dir, c->attempt)) {
      c->end.ended = true;
      c->end.end = AttemptRecord::End::kSpawn;
      c->end.value = ECANCELED;
      c->pid = 0;
      continue;
    }
    ReapOrphans(c->output_dir, 0, 5.0, env_).IgnoreError();
    c->end = AttemptRecord();  // not ended: lost
  }
  return Status::OK();
}

// A timed-out task's whole tree: its group, and whatever else still holds
// its lock, the stdout file (a grandchild that left the group with setsid).
static void SignalTimedOut(Env* env, pid_t leader,
                           const std::string& stdout_path, int sig) {
  SignalTree(leader, sig);
  FileInfo lock;
  if (env->GetFileInfo(stdout_path, &lock).ok()) {
    SignalOrphans(FileHolders(lock), sig);
  }
}

void CommandRunner::EnforceTimeouts() {
  const int64_t now = job_control::ActiveNowNs();  // term_ns and kill_ns
  for (const auto& c : children_) {
    // One not started yet is signalled once the spawner says it runs.
    if (c->exited || (!c->adopted && c->pid <= 0)) continue;
    if (!c->timed_out && now >= c->term_ns) {
      c->timed_out = true;
      SignalTimedOut(env_, c->pid, c->stdout_path, SIGTERM);
      c->kill_ns = now + SecondsToNs(c->grace_seconds);
    }
    if (now >= c->kill_ns) {
      SignalTimedOut(env_, c->pid, c->stdout_path, SIGKILL);
      c->kill_ns = kNever;
    }
  }
}

CommandResult CommandRunner::Reap(const Child& c) {
  if (c.adopted) return ReapAdopted(c);
  // Until the spawner is released, the leader is an unreaped zombie (or
  // still alive) and its pid, the group id, cannot be reused: this
  // reaches only what the task left behind.
  if (c.pid > 0) {
    job_control::RemoveGroup(c.pid);
    if (c.spawner_died == 0) kill(-c.pid, SIGKILL);
  }
  spawner_.Release(c.serial);
  CommandResult result;
  result.seconds =
      NsToSeconds((c.end_ns > 0 ? c.end_ns : NowNs()) - c.start_ns);
  if (!c.end.ended) {
    result.outcome = CommandResult::Outcome::kSignaled;
    result.signal = SIGKILL;
    result.error = c.spawner_died != 0
                       ? "exit status lost: the wizq-spawner process (pid " +
                             std::to_string(c.spawner_died) +
                             ") that started and watched it died"
                       : "killed by signal 9 (Killed)";
    return result;
  }
  if (NeverStarted(c)) {
    result.outcome = CommandResult::Outcome::kSpawnFailed;
    result.cancelled = true;
    result.error = std::string("not started: ") + strerror(c.end.value);
    return result;
  }
  if (c.end.end == AttemptRecord::End::kSpawn) {
    result.outcome = CommandResult::Outcome::kSpawnFailed;
    result.error = std::string("cannot run ") + kShell + " -c in " +
                   (c.cwd.empty() ? "." : c.cwd) + ": " + strerror(c.end.value);
    AppendStderr(c, "wizq: " + result.error + "\n");
    return result;
  }
  internal::DescribeEnd(c.end, c.timed_out, c.timeout_seconds, &result);
  if (c.past_deadline && result.outcome == CommandResult::Outcome::kSignaled) {
    result.error =
        "killed at this worker's local deadline: its claim could not be "
        "renewed on the store in time (another worker may take the task)";
  }
  ReadStdout(env_, c.stdout_path, c.max_stdout_bytes, &result);
  return result;
}

// Best effort: the result carries the same text; this copy is for a
// reader of the stderr file.
void CommandRunner::AppendStderr(const Child& c, const std::string& text) {
  ScopedFd err;
  const std::string path =
      AttemptFiles::InTaskDir(c.output_dir, c.attempt).stderr_path();
  if (OpenFile(env_, path, O_WRONLY | O_APPEND, &err).ok()) {
    WriteFd(err.get(), text, path).IgnoreError();
  }
}

void CommandRunner::CollectExited(Done* done) {
  for (size_t i = 0; i < children_.size();) {
    if (!children_[i]->exited) {
      ++i;
      continue;
    }
    done->emplace_back(children_[i]->token, Reap(*children_[i]));
    children_.erase(children_.begin() + static_cast<ptrdiff_t>(i));
  }
  UpdateLimit();  // an adopted attempt that ended frees a place
}

Status CommandRunner::Wait(int timeout_ms, Done* done) {
  const size_t before = done->size();
  woken_ = false;
  for (auto& failure : spawn_failures_) done->push_back(std::move(failure));
  spawn_failures_.clear();
  const int64_t deadline =
      timeout_ms < 0 ? kNever : NowNs() + int64_t{timeout_ms} * 1'000'000;
  while (!children_.empty()) {
    const bool have_some = done->size() > before;
    WIZQ_RETURN_IF_ERROR(
        PollChildren(have_some ? 0 : MillisToNextEvent(deadline)));
    EnforceTimeouts();
    CollectExited(done);
    if (done->size() > before || !begun_.empty() || NowNs() >= deadline ||
        woken_) {
      break;
    }
  }
  return Status::OK();
}

void CommandRunner::TerminateAll(double grace_seconds) {
  spawn_failures_.clear();
  // An adopted attempt is not this process's to stop: it is left running
  // for the next worker to adopt again.
  for (size_t i = 0; i < children_.size();) {
    if (children_[i]->adopted) {
      children_.erase(children_.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  std::vector<std::string> dirs;
  for (const auto& c : children_) dirs.push_back(c->output_dir);
  // SIGTERM, SIGKILL after the grace; an attempt that the spawner starts
  // meanwhile is signalled once it says so. The spawner reports each end.
  const int64_t kill_at = NowNs() + SecondsToNs(grace_seconds);
  const int64_t give_up = kill_at + SecondsToNs(kStartReapSlackSeconds);
  Done dropped;
  int sig = SIGTERM;
  while (!children_.empty() && NowNs() < give_up) {
    if (NowNs() >= kill_at) sig = SIGKILL;
    for (const auto& c : children_) {
      if (c->pid <= 0 && !c->exited && c->signalled == 0) {
        spawner_.Cancel(c->serial);  // never starts, if it waits still
        c->signalled = -1;
      }
      if (c->pid <= 0) continue;
      if (c->pid > 0 && !c->exited && c->signalled != sig) {
        SignalTree(c->pid, sig);
        c->signalled = sig;
      }
    }
    const int64_t until = sig == SIGTERM ? kill_at : give_up;
    const int64_t ms = std::max<int64_t>(0, (until - NowNs()) / 1'000'000);
    // A failed poll only ends this wait early.
    PollChildren(static_cast<int>(std::min<int64_t>(ms, 50))).IgnoreError();
    CollectExited(&dropped);
  }
  for (const auto& c : children_) {
    if (c->pid > 0 && c->spawner_died == 0) SignalTree(c->pid, SIGKILL);
    c->exited = true;
  }
  CollectExited(&dropped);
  // The leaders are reaped; wait until the rest of each tree (a child of
  // the shell still exiting, a process that left the group) lets go of its
  // lock, so that nothing of these tasks outlives this call.
  // Best effort: this runs on interruption or destruction, with nobody to
  // report to; a tree that outlives it is ended by the next Start or
  // ReapOrphans of its directory.
  for (const std::string& dir : dirs) {
    ReapOrphans(dir, 0.2, 5.0, env_).IgnoreError();
  }
  spawner_.FlushReleases();
  begun_.clear();  // none of them is reported any more
}

}  // namespace wizq
