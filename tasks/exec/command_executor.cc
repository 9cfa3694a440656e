#include "tasks/exec/command_executor.h"

#include <algorithm>
#include <utility>

#include "fs/env.h"
#include "tasks/exec/attempt_files.h"
#include "tasks/proc/orphans_record.h"
#include "tasks/proc/posix_util.h"
#include "util/environment.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

constexpr uint64_t kStderrTailBytes = 400;

// What a Command reads on stdin (SPEC §3): {"kind": ..., "value": ...}.
std::string StdinOf(const Attempt& a) {
  std::string text;
  JsonWriter w(&text);
  w.BeginObject().Field("kind", a.step);
  w.Key("value").RawValue(a.value_json).EndObject();
  text.push_back('\n');
  return text;
}

}  // namespace

AttemptResult AttemptResultOf(CommandResult c) {
  using In = CommandResult::Outcome;
  using Out = AttemptResult::Outcome;
  AttemptResult r;
  switch (c.outcome) {
    case In::kExited:
      r.outcome = c.exit_code == 0 ? Out::kResponded : Out::kExited;
      break;
    case In::kSignaled:
      r.outcome = Out::kSignaled;
      break;
    case In::kTimedOut:
      r.outcome = Out::kTimedOut;
      break;
    case In::kSpawnFailed:
      r.outcome = Out::kSpawnFailed;
      break;
  }
  r.exit_code = c.exit_code;
  r.signal = c.signal;
  r.response = std::move(c.stdout_text);
  r.response_truncated = c.stdout_truncated;
  r.error = std::move(c.error);
  r.seconds = c.seconds;
  r.adopted = c.adopted;
  r.waited_ms = static_cast<int64_t>(c.waited_seconds * 1000);
  r.lost = c.lost;
  r.never_started = c.cancelled;
  return r;
}

CommandExecutor::CommandExecutor(Env* env, std::string wizard_dir)
    : env_(env != nullptr ? env : Env::Posix()),
      wizard_dir_(std::move(wizard_dir)),
      runner_(env_) {
  runner_.set_report_begun(true);  // TakeBegun
}

CommandExecutor::~CommandExecutor() = default;

bool CommandExecutor::CanRun(const Action& action) const {
  return action.kind == Action::Kind::kCommand;
}

Status CommandExecutor::Start(const Attempt& a) {
  const AttemptFiles files(wizard_dir_, a.task_id, a.number);
  CommandSpec spec;
  spec.script = a.action->script;
  spec.cwd = a.base_dir;
  spec.stdin_data = StdinOf(a);
  spec.env = {{kEnvRunId, a.run_id},
              {kEnvTaskId, std::to_string(a.task_id)},
              {kEnvAttempt, std::to_string(a.number)},
              {kEnvInstallDir, a.install_dir},
              {kEnvIdempotencyKey, a.idempotency_key},
              {kEnvStep, a.step},
              {kEnvOrigin, OriginName(a.origin)}};
  spec.output_dir = files.dir();
  spec.attempt = a.number;
  spec.timeout_seconds = a.timeout_seconds;
  spec.max_stdout_bytes = a.max_response_bytes;
  bool adopted = false;
  WIZQ_RETURN_IF_ERROR(runner_.StartOrAdopt(
      spec, static_cast<uint64_t>(a.task_id), a.adopt_expected, &adopted));
  adoption_notes_.erase(a.task_id);
  if (adopted) {
    NoteAdoptionWait(spec, a.task_id);
    adopted_begun_.push_back(a.task_id);  // it runs (or ran) already
  }
  attempts_[a.task_id] = a.number;
  return Status::OK();
}

Status CommandExecutor::Wait(int timeout_ms, Done* done) {
  CommandRunner::Done finished;
  WIZQ_RETURN_IF_ERROR(runner_.Wait(timeout_ms, &finished));
  for (auto& [token, command] : finished) {
    const int64_t id = static_cast<int64_t>(token);
    AttemptResult r = AttemptResultOf(std::move(command));
    auto it = attempts_.find(id);
    if (r.outcome != AttemptResult::Outcome::kResponded &&
        it != attempts_.end()) {
      r.stderr_tail =
          LastLine(AttemptFiles::Existing(env_, wizard_dir_, id, it->second)
                       .stderr_path());
    }
    if (it != attempts_.end()) attempts_.erase(it);
    done->emplace_back(id, std::move(r));
  }
  return Status::OK();
}

void CommandExecutor::TakeBegun(std::vector<int64_t>* task_ids) {
  task_ids->insert(task_ids->end(), adopted_begun_.begin(),
                   adopted_begun_.end());
  adopted_begun_.clear();
  std::vector<uint64_t> tokens;
  runner_.TakeBegun(&tokens);
  for (uint64_t t : tokens) task_ids->push_back(static_cast<int64_t>(t));
}

size_t CommandExecutor::running() const { return runner_.running(); }

bool CommandExecutor::FindByProcess(int pid, int64_t* task_id) const {
  uint64_t token = 0;
  if (!runner_.FindByProcess(static_cast<pid_t>(pid), &token)) return false;
  *task_id = static_cast<int64_t>(token);
  return true;
}

void CommandExecutor::TerminateAll(double grace_seconds) {
  runner_.TerminateAll(grace_seconds);
  attempts_.clear();
  adopted_begun_.clear();
}

void CommandExecutor::NoteAdoptionWait(const CommandSpec& spec,
                                       int64_t task_id) {
  internal::AttemptRecord rec;
  if (internal::ProbeOrphan(env_, spec.output_dir, spec.attempt, &rec) !=
      internal::OrphanState::kRunning) {
    return;
  }
  std::string note =
      "waiting for its earlier attempt " + std::to_string(spec.attempt) + " (";
  note += rec.pid > 1 ? "process group " + std::to_string(rec.pid)
                      : std::string("its process tree");
  note += "), started by a worker that died, to finish";
  if (spec.timeout_seconds) {
    const double ran =
        rec.start_wall_ms > 0
            ? std::max(0.0, (static_cast<double>(env_->NowMicros()) / 1000 -
                             static_cast<double>(rec.start_wall_ms)) /
                                1000)
            : 0;
    note += ", up to " +
            internal::FormatSeconds(std::max(0.0, *spec.timeout_seconds - ran));
  }
  adoption_notes_[task_id] = note;
}

std::string CommandExecutor::AdoptionNote(int64_t task_id) const {
  auto it = adoption_notes_.find(task_id);
  return it == adoption_notes_.end() ? "" : it->second;
}

bool CommandExecutor::AttemptStarted(int64_t task_id, int attempt) const {
  const AttemptFiles files(wizard_dir_, task_id, attempt);
  return (env_->FileExists(files.stdout_path()) ||
          env_->FileExists(files.stdin_path())) &&  // the previous layout's
         internal::AttemptBegan(env_, files.dir(), attempt);
}

bool CommandExecutor::AttemptAdoptable(int64_t task_id, int attempt) const {
  return CommandRunner::Adoptable(
      env_, AttemptFiles::TaskDir(wizard_dir_, task_id), attempt);
}

Status CommandExecutor::ReapOrphans(int64_t task_id) {
  return wizq::ReapOrphans(AttemptFiles::TaskDir(wizard_dir_, task_id),
                           kOrphanGraceSeconds, kOrphanMaxWaitSeconds, env_);
}

std::string CommandExecutor::LastLine(const std::string& path) const {
  uint64_t size = 0;
  if (!env_->GetFileSize(path, &size).ok()) return "";
  const uint64_t start = size > kStderrTailBytes ? size - kStderrTailBytes : 0;
  std::string tail;
  if (!env_->ReadFileFrom(path, start, &tail).ok()) return "";
  if (tail.size() > size - start) tail.resize(size - start);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) {
    tail.pop_back();
  }
  const size_t nl = tail.rfind('\n');
  return nl == std::string::npos ? tail : tail.substr(nl + 1);
}

}  // namespace wizq
