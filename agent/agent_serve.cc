#include "agent/agent_serve.h"

#include <limits.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "agent/agent_service.h"
#include "fs/env.h"
#include "fs/path.h"
#include "orchestrator/run.h"
#include "orchestrator/run_loop.h"
#include "tasks/exec/attempt_files.h"
#include "tasks/proc/command_runner.h"
#include "util/environment.h"
#include "util/exit_code.h"
#include "util/shell_quote.h"

namespace wizq {
namespace {

using Json = nlohmann::json;

// One COMMAND at work on one leased task.
struct Job {
  int64_t task_id = 0;
  std::string lease;
  int64_t lease_ms = 60000;
  int64_t next_heartbeat_ms = 0;  // wall clock
  // With a store: CLOCK_MONOTONIC ms past which the lease may have lapsed
  // (its last renewal began at most lease_ms before; less a fifth).
  int64_t deadline_mono_ms = 0;
};

int64_t MonoMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

// How long `serve` on a store rides out a store it cannot reach, once it
// reached it (a database restart, a cut link): the default worker lease.
constexpr int64_t kStoreOutageMs = 30000;
constexpr useconds_t kStoreRetryMicros = 300 * 1000;

// `exec` the argv: the shell is replaced by COMMAND (no shell semantics),
// while CommandRunner still gives it its own group, lock and files.
std::string ExecScript(const std::vector<std::string>& argv) {
  std::string script = "exec";
  for (const std::string& a : argv) script += " " + ShellQuote(a);
  return script;
}

class Server {
 public:
  explicit Server(const ServeOptions& o)
      : o_(o),
        env_(o.env != nullptr ? o.env : Env::Posix()),
        service_(AgentService::Open(o.place, o.env)),
        runner_(env_) {}

  int Run(std::string* error);

 private:
  int64_t NowMs() const {
    return static_cast<int64_t>(env_->NowMicros() / 1000);
  }
  void Note(const std::string& line) const {
    if (o_.note) o_.note(line);
  }
  // Takes one task and starts its COMMAND; false when none was taken.
  bool TakeOne(double wait_seconds, std::string* error, int* code);
  Status Start(const std::string& payload, int64_t asked_mono_ms);
  void Heartbeats();
  // On a store, another machine's agent may be given a task once its lease
  // lapsed: the spawner ends every COMMAND at the earliest job's local
  // deadline, even once this process is killed (SPEC §14).
  void SetLocalDeadline();
  void Finish(uint64_t token, const CommandResult& r);
  AgentReply Deliver(const Job& job, const CommandResult& r);
  // True (after a pause) if a call that failed with `reply` should be made
  // again: an I/O error of a store reached before, for at most
  // kStoreOutageMs in a row.
  bool RideOut(const AgentReply& reply);

  const ServeOptions& o_;
  Env* const env_;
  std::unique_ptr<AgentService> service_;
  CommandRunner runner_;
  std::map<uint64_t, Job> jobs_;  // by task id
  bool finished_ = false;
  bool told_no_run_ = false;
  bool reached_store_ = false;
  int64_t store_lost_since_ = 0;  // CLOCK_MONOTONIC ms; 0: not lost
  int run_code_ = kExitCompleted;
};

bool Server::RideOut(const AgentReply& reply) {
  if (!reply.io_error) {
    reached_store_ = reached_store_ || reply.exit_code != kExitEnvironment;
    store_lost_since_ = 0;
    return false;
  }
  if (o_.place.store.empty() || !reached_store_) return false;
  const int64_t now = MonoMs();
  if (store_lost_since_ == 0) {
    store_lost_since_ = now;
    Note(reply.message + "; trying again for up to " +
         std::to_string(kStoreOutageMs / 1000) + " s");
  }
  if (now - store_lost_since_ > kStoreOutageMs) return false;
  usleep(kStoreRetryMicros);
  return true;
}

void Server::SetLocalDeadline() {
  if (o_.place.store.empty()) return;  // a lapse is seen on this machine
  int64_t first = 0;
  for (const auto& [token, job] : jobs_) {
    if (first == 0 || job.deadline_mono_ms < first)
      first = job.deadline_mono_ms;
  }
  runner_.set_local_deadline(first);
}

Status Server::Start(const std::string& payload, int64_t asked_mono_ms) {
  const Json p = Json::parse(payload);
  Job job;
  job.task_id = p["task_id"].get<int64_t>();
  job.lease = p["lease"].get<std::string>();
  job.lease_ms = std::max<int64_t>(
      1, std::llround(p["lease_seconds"].get<double>() * 1000));
  job.next_heartbeat_ms = NowMs() + job.lease_ms / 3;
  job.deadline_mono_ms = asked_mono_ms + job.lease_ms - job.lease_ms / 5;
  const int attempt = p["attempt"].get<int>();
  CommandSpec spec;
  spec.script = ExecScript(o_.command);
  spec.stdin_data = payload + "\n";
  spec.env = {{kEnvRunId, p["run_id"].get<std::string>()},
              {kEnvTaskId, std::to_string(job.task_id)},
              {kEnvAttempt, std::to_string(attempt)},
              {kEnvInstallDir, o_.place.dir},
              {kEnvIdempotencyKey, p["idempotency_key"].get<std::string>()},
              {kEnvStep, p["task"]["kind"].get<std::string>()},
              {kEnvLease, job.lease}};
  spec.output_dir = AttemptFiles::TaskDir(service_->workspace(), job.task_id);
  spec.attempt = attempt;
  if (p["timeout_seconds"].is_number()) {
    // The store counts the step's timeout from the claim, and may give the
    // retry to another agent at once: this COMMAND gets SIGTERM a grace
    // before that time, counted from the take (no later than the claim),
    // and SIGKILL at it; not a timeout and a grace from its spawn.
    const int64_t timeout_ms = std::max<int64_t>(
        1, std::llround(p["timeout_seconds"].get<double>() * 1000));
    const int64_t ends = asked_mono_ms + timeout_ms;
    const int64_t grace = std::min<int64_t>(2000, timeout_ms / 4);
    spec.timeout_seconds = std::max<double>(
        0.001, static_cast<double>(ends - grace - MonoMs()) / 1000.0);
    spec.kill_grace_seconds = static_cast<double>(grace) / 1000.0;
  }
  const uint64_t token = static_cast<uint64_t>(job.task_id);
  jobs_[token] = job;
  SetLocalDeadline();  // before the COMMAND starts
  const Status started = runner_.Start(spec, token);
  if (!started.ok()) {
    jobs_.erase(token);
    SetLocalDeadline();
    return started;
  }
  Note("task " + std::to_string(job.task_id) + " (" +
       p["task"]["kind"].get<std::string>() + ") attempt " +
       std::to_string(attempt) + ": started");
  return Status::OK();
}

bool Server::TakeOne(double wait_seconds, std::string* error, int* code) {
  TakeRequest req;
  req.steps = o_.steps;
  req.wait_seconds = wait_seconds;
  req.agent = o_.agent;
  const int64_t asked = MonoMs();  // the lease starts no earlier
  const AgentReply r = service_->Take(req);
  if (r.exit_code == kExitNothingToTake) {
    const Json j = Json::parse(r.json, nullptr, false);
    if (j.is_object() && j.value("status", "") == "finished") {
      finished_ = true;
      run_code_ = j.value("run_status", "") == "completed" ? kExitCompleted
                                                           : kExitTaskFailed;
    }
    return false;
  }
  if (r.exit_code == kExitEnvironment && r.message.rfind("no run ", 0) == 0) {
    // Started before its run: wait for the run to appear.
    if (!told_no_run_) Note(r.message + "; waiting for it");
    told_no_run_ = true;
    usleep(200 * 1000);
    return false;
  }
  if (RideOut(r)) return false;  // its COMMANDs go on meanwhile
  if (r.exit_code != kExitCompleted) {
    *error = r.message;
    *code = kExitEnvironment;
    return false;
  }
  // The lease runs from the claim, which a long wait may put well after
  // the asking: a deadline from the asking would end the COMMAND early.
  Status s = Start(r.json, std::max(asked, r.lease_from_mono_ms));
  if (!s.ok()) {
    *error = s.message();
    *code = kExitEnvironment;
  }
  return s.ok();
}

void Server::Heartbeats() {
  const int64_t now = NowMs();
  for (auto& [token, job] : jobs_) {
    if (job.next_heartbeat_ms > now) continue;
    const int64_t asked = MonoMs();
    const AgentReply r = service_->Heartbeat(job.task_id, job.lease);
    // A store that could not be reached is asked again soon: the outage
    // may end well before the next third of the lease.
    job.next_heartbeat_ms =
        now + (r.io_error ? std::min<int64_t>(job.lease_ms / 3, 300)
                          : job.lease_ms / 3);
    if (r.exit_code == kExitCompleted) {
      // From when the store renewed it: a heartbeat that waited for the
      // run (behind a frozen machine's transaction) renewed it late.
      const int64_t from = std::max(asked, r.lease_from_mono_ms);
      job.deadline_mono_ms = from + job.lease_ms - job.lease_ms / 5;
    } else {
      Note("task " + std::to_string(job.task_id) + ": " + r.message);
    }
  }
  SetLocalDeadline();
}

void Server::Finish(uint64_t token, const CommandResult& r) {
  auto it = jobs_.find(token);
  if (it == jobs_.end()) return;
  const Job job = it->second;
  jobs_.erase(it);
  SetLocalDeadline();
  // A result is delivered while its lease may hold (the store refuses it
  // once given away); a store that cannot be reached meanwhile is asked
  // again, so that a database restart does not cost the attempt.
  AgentReply reply = Deliver(job, r);
  while (MonoMs() < job.deadline_mono_ms + job.lease_ms / 5 && RideOut(reply)) {
    reply = Deliver(job, r);
  }
  Note("task " + std::to_string(job.task_id) + ": " +
       (reply.exit_code == kExitCompleted ? reply.json : reply.message));
}

AgentReply Server::Deliver(const Job& job, const CommandResult& r) {
  AgentReply reply;
  if (r.outcome == CommandResult::Outcome::kExited && r.exit_code == 0 &&
      !r.stdout_truncated) {
    reply = service_->Done(job.task_id, job.lease, r.stdout_text);
  } else if (r.outcome == CommandResult::Outcome::kTimedOut) {
    // Killed at the step's timeout, as `run --agent` kills it; the store
    // has normally timed the attempt out already (this is then refused).
    reply = service_->Fail(job.task_id, job.lease, kReasonTimeout,
                           "the agent command " + r.error);
  } else {
    std::string why = r.stdout_truncated ? "its output was too large" : r.error;
    reply = service_->Fail(job.task_id, job.lease, kReasonAgentFailed,
                           "the agent command failed: " + why);
  }
  return reply;
}

int Server::Run(std::string* error) {
  int code = kExitCompleted;
  while (true) {
    if (StopRequested()) {
      runner_.TerminateAll(2.0);
      Note("interrupted: " + std::to_string(jobs_.size()) +
           " task(s) stopped; their leases lapse and they go back");
      return kExitInterrupted;
    }
    while (!finished_ &&
           jobs_.size() < static_cast<size_t>(std::max(1, o_.jobs))) {
      // Block in take only when nothing of ours runs.
      if (!TakeOne(jobs_.empty() ? 0.5 : 0, error, &code)) break;
    }
    if (code != kExitCompleted) {
      runner_.TerminateAll(2.0);
      return code;
    }
    if (finished_ && jobs_.empty()) return run_code_;
    if (jobs_.empty()) continue;
    int64_t next = NowMs() + 200;
    for (const auto& [t, job] : jobs_)
      next = std::min(next, job.next_heartbeat_ms);
    CommandRunner::Done done;
    Status s = runner_.Wait(
        static_cast<int>(std::max<int64_t>(0, next - NowMs())), &done);
    if (!s.ok()) {
      *error = s.message();
      runner_.TerminateAll(2.0);
      return kExitEnvironment;
    }
    for (const auto& [token, result] : done) Finish(token, result);
    Heartbeats();
  }
}

}  // namespace

int ServeAgent(const ServeOptions& options, std::string* error) {
  if (options.command.empty()) {
    *error = "a COMMAND to run for each task is required (after --)";
    return kExitInvalid;
  }
  ServeOptions o = options;
  if (!RealPath(options.place.dir, &o.place.dir).ok()) {
    *error = "no such install directory: " + options.place.dir;
    return kExitEnvironment;
  }
  Server server(o);
  return server.Run(error);
}

}  // namespace wizq
