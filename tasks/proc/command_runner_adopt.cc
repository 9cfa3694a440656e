// CommandRunner, adoption: taking over an attempt that a dead worker started
// (docs/PROTOCOL.md, "Orphans after a crash"; the record is
// tasks/proc/orphans_record.h). An adopted attempt is probed every few
// milliseconds (its record, its supervisor, its lock) instead of being
// waited for with a pidfd: it is not this process's child.
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "tasks/exec/attempt_files.h"
#include "tasks/proc/command_runner.h"
#include "tasks/proc/command_runner_child.h"
#include "tasks/proc/orphans_record.h"
#include "tasks/proc/posix_util.h"
#include "util/job_control.h"

namespace wizq {

using internal::AttemptRecord;
using internal::FormatSeconds;
using internal::NowNs;
using internal::OrphanState;
using internal::ProbeOrphan;
using internal::SecondsToNs;

namespace {

constexpr int64_t kProbeIntervalNs = 20'000'000;

int64_t WallMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

}  // namespace

Status CommandRunner::Adopt(const CommandSpec& spec, uint64_t token,
                            bool* adopted) {
  *adopted = false;
  AttemptRecord rec;
  const OrphanState state =
      ProbeOrphan(env_, spec.output_dir, spec.attempt, &rec);
  if (state == OrphanState::kLost) return Status::OK();
  const int64_t now = NowNs();
  auto child = std::make_unique<Child>();
  child->token = token;
  child->adopted = true;
  // The recorded leader only if the record is this attempt's (a held lock
  // with an earlier attempt's record must not lead to that group).
  child->pid = state == OrphanState::kRunning && rec.attempt == spec.attempt
                   ? rec.pid
                   : 0;
  child->attempt = spec.attempt;
  child->cwd = spec.cwd;
  child->output_dir = spec.output_dir;
  // An attempt of a run started by an older wizq has its files where the
  // previous layout put them.
  child->stdout_path =
      AttemptFiles::ExistingInTaskDir(env_, spec.output_dir, spec.attempt)
          .stdout_path();
  child->max_stdout_bytes = spec.max_stdout_bytes;
  child->start_ns = now;
  child->grace_seconds = spec.kill_grace_seconds;
  if (state == OrphanState::kFinished) {
    child->exited = true;
    child->end = rec;
  } else if (spec.timeout_seconds) {
    // What is left of the step's timeout since the attempt started.
    child->timeout_seconds = *spec.timeout_seconds;
    const int64_t ran_ms =
        rec.start_wall_ms > 0
            ? std::max<int64_t>(0, WallMs() - rec.start_wall_ms)
            : 0;
    child->term_ns = job_control::ActiveNowNs() +
                     std::max<int64_t>(0, SecondsToNs(*spec.timeout_seconds) -
                                              ran_ms * 1'000'000);
  }
  child->next_probe_ns = now + kProbeIntervalNs;
  children_.push_back(std::move(child));
  UpdateLimit();
  *adopted = true;
  return Status::OK();
}

bool CommandRunner::Adoptable(Env* env, const std::string& output_dir,
                              int attempt) {
  return ProbeOrphan(env, output_dir, attempt, nullptr) != OrphanState::kLost;
}

Status CommandRunner::StartOrAdopt(CommandSpec spec, uint64_t token,
                                   bool adopt_expected, bool* adopted) {
  *adopted = false;
  spec.first_claim = spec.attempt == 1 && !adopt_expected;
  const AttemptFiles files =
      AttemptFiles::InTaskDir(spec.output_dir, spec.attempt);
  if (!spec.first_claim &&
      (env_->FileExists(files.stdout_path()) ||
       env_->FileExists(files.stdin_path()))) {  // the previous layout's
    WIZQ_RETURN_IF_ERROR(Adopt(spec, token, adopted));
    if (!*adopted && adopt_expected &&
        internal::AttemptBegan(env_, spec.output_dir, spec.attempt)) {
      // Refunded to be adopted, but its tree died since without an exit
      // record: a lost attempt, charged like one (the reclaim could not
      // know). An attempt that never began (wizq died between creating its
      // files and handing them to the spawner, or while it waited in the
      // spawner's queue; also put back as worker_lost) simply runs now.
      ReportLost(spec, token);
      *adopted = true;
    }
  }
  if (*adopted) return Status::OK();
  return Start(spec, token);
}

void CommandRunner::ReportLost(const CommandSpec& spec, uint64_t token) {
  ReapOrphans(spec.output_dir, 0, 5.0, env_).IgnoreError();
  CommandResult result;
  result.adopted = true;
  result.lost = true;
  result.outcome = CommandResult::Outcome::kSignaled;
  result.error = "attempt " + std::to_string(spec.attempt) +
                 ", started by a worker that died, ended without an exit "
                 "record (killed with its process group, by a signal, or a "
                 "reboot)";
  spawn_failures_.emplace_back(token, std::move(result));
}

void CommandRunner::ProbeAdopted(bool force) {
  const int64_t now = NowNs();
  for (const auto& c : children_) {
    if (!c->adopted || c->exited || (!force && now < c->next_probe_ns)) {
      continue;
    }
    c->next_probe_ns = now + kProbeIntervalNs;
    AttemptRecord rec;
    switch (ProbeOrphan(env_, c->output_dir, c->attempt, &rec)) {
      case OrphanState::kRunning:
        break;
      case OrphanState::kFinished:
        c->exited = true;
        c->end = rec;
        break;
      case OrphanState::kLost:
        c->exited = true;
        // A lock held without a start record (the attempt waited in a
        // spawner whose wizq died) that is let go: it never began.
        c->lost = internal::AttemptBegan(env_, c->output_dir, c->attempt);
        c->never_began = !c->lost;
        break;
    }
  }
}

CommandResult CommandRunner::ReapAdopted(const Child& c) {
  // Whatever the attempt's shell left behind (a background child holding
  // its stdout) is killed, as a live attempt's group is, before its
  // stdout is read. Best effort, like the live case: a tree that outlives
  // it is ended before the task's next attempt.
  ReapOrphans(c.output_dir, 0, 5.0, env_).IgnoreError();
  CommandResult result;
  result.adopted = true;
  result.seconds = static_cast<double>(NowNs() - c.start_ns) / 1e9;
  result.waited_seconds = result.seconds;
  if (c.timed_out) {
    result.outcome = CommandResult::Outcome::kTimedOut;
    result.error = "timed out after " + FormatSeconds(c.timeout_seconds) +
                   " (an adopted attempt of a worker that died)";
    return result;
  }
  if (c.never_began) {
    result.cancelled = true;  // given back, not charged
    result.outcome = CommandResult::Outcome::kSpawnFailed;
    result.error = "attempt " + std::to_string(c.attempt) +
                   " of a worker that died never began";
    return result;
  }
  if (c.lost) {
    result.lost = true;
    result.outcome = CommandResult::Outcome::kSignaled;
    result.error = "attempt " + std::to_string(c.attempt) +
                   ", started by a worker that died, ended without an exit "
                   "record (killed with its process group, by a signal, or "
                   "a reboot)";
    return result;
  }
  internal::DescribeEnd(c.end, false, 0, &result);
  internal::ReadStdoutInto(env_, c.stdout_path, c.max_stdout_bytes, &result);
  return result;
}

}  // namespace wizq
