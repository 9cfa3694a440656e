#include "tasks/exec/agent_executor.h"

#include "fs/env.h"
#include "tasks/exec/attempt_files.h"
#include "tasks/exec/command_executor.h"
#include "tasks/exec/instructions.h"
#include "tasks/proc/orphans_record.h"
#include "util/environment.h"

namespace wizq {

AgentExecutor::AgentExecutor(Env* env, std::string wizard_dir,
                             std::string command)
    : env_(env != nullptr ? env : Env::Posix()),
      wizard_dir_(std::move(wizard_dir)),
      command_(std::move(command)),
      runner_(env_) {}

AgentExecutor::~AgentExecutor() = default;

bool AgentExecutor::CanRun(const Action& action) const {
  return action.kind == Action::Kind::kPool;
}

Status AgentExecutor::Start(const Attempt& a) {
  if (a.workflow == nullptr) {
    return Status::InvalidArgument("a Pool attempt needs its workflow");
  }
  const Step* step = a.workflow->FindStep(a.step);
  if (step == nullptr) {
    return Status::InvalidArgument("no step " + a.step + " in the workflow");
  }
  Task t;
  t.id = a.task_id;
  t.type = a.step;
  t.inputs = a.value_json;
  t.attempts = a.number;
  t.origin = a.origin;
  PayloadInfo info;
  info.run_id = a.run_id;
  info.idempotency_key = a.idempotency_key;
  info.install_dir = a.install_dir;
  const AttemptFiles files(wizard_dir_, a.task_id, a.number);
  CommandSpec spec;
  spec.script = command_;
  spec.stdin_data = PoolPayload(*a.workflow, *step, t, info) + "\n";
  spec.env = {{kEnvRunId, a.run_id},
              {kEnvTaskId, std::to_string(a.task_id)},
              {kEnvAttempt, std::to_string(a.number)},
              {kEnvInstallDir, a.install_dir},
              {kEnvIdempotencyKey, a.idempotency_key},
              {kEnvStep, a.step}};
  spec.output_dir = files.dir();
  spec.attempt = a.number;
  spec.timeout_seconds = a.timeout_seconds;
  spec.max_stdout_bytes = a.max_response_bytes;
  // The agent's tree of a `wizq run` that died finishes on its own, like a
  // Command's: its response is adopted, the agent not asked again.
  bool adopted = false;
  return runner_.StartOrAdopt(spec, static_cast<uint64_t>(a.task_id),
                              a.adopt_expected, &adopted);
}

bool AgentExecutor::AttemptAdoptable(int64_t task_id, int attempt) const {
  return CommandRunner::Adoptable(
      env_, AttemptFiles::TaskDir(wizard_dir_, task_id), attempt);
}

Status AgentExecutor::Wait(int timeout_ms, Done* done) {
  CommandRunner::Done finished;
  WIZQ_RETURN_IF_ERROR(runner_.Wait(timeout_ms, &finished));
  for (auto& [token, command] : finished) {
    done->emplace_back(static_cast<int64_t>(token),
                       AttemptResultOf(std::move(command)));
  }
  return Status::OK();
}

size_t AgentExecutor::running() const { return runner_.running(); }

bool AgentExecutor::FindByProcess(int pid, int64_t* task_id) const {
  uint64_t token = 0;
  if (!runner_.FindByProcess(static_cast<pid_t>(pid), &token)) return false;
  *task_id = static_cast<int64_t>(token);
  return true;
}

void AgentExecutor::TerminateAll(double grace_seconds) {
  runner_.TerminateAll(grace_seconds);
}

bool AgentExecutor::AttemptStarted(int64_t task_id, int attempt) const {
  // As CommandExecutor's: the same runner's spawner starts the agent's
  // tree and records it in the run's journal.
  const AttemptFiles files(wizard_dir_, task_id, attempt);
  return (env_->FileExists(files.stdout_path()) ||
          env_->FileExists(files.stdin_path())) &&  // the previous layout's
         internal::AttemptBegan(env_, files.dir(), attempt);
}

Status AgentExecutor::ReapOrphans(int64_t task_id) {
  return wizq::ReapOrphans(AttemptFiles::TaskDir(wizard_dir_, task_id), 1.0,
                           10.0, env_);
}

}  // namespace wizq
