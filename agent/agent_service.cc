// AgentService on the queue directory: every call opens the run with
// OpenMode::kAttach and QueueOptions::leases_only (no worker is registered:
// an agent holds leases, not a worker lock), does its work in one
// transaction and closes it again.
#include "agent/agent_service.h"

#include <limits.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <cmath>

#include "agent/agent_response.h"
#include "agent/run_status.h"
#include "fs/env.h"
#include "queue/claim_holder.h"
#include "queue/queue.h"
#include "tasks/attempt_files.h"
#include "tasks/command_runner.h"
#include "tasks/instructions.h"
#include "tasks/response.h"
#include "tasks/run_rules.h"
#include "util/exit_code.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

// How often `take --wait` looks for work (a Refresh: the log's tail only).
constexpr int kWaitPollMs = 20;
// How long a taker lets an earlier attempt's orphaned tree end (SPEC §6.3).
constexpr double kOrphanGraceSeconds = 1.0;
constexpr double kOrphanMaxWaitSeconds = 10.0;

AgentReply Reply(int code, std::string json, std::string message = "") {
  AgentReply r;
  r.exit_code = code;
  r.json = std::move(json);
  r.message = std::move(message);
  return r;
}

AgentReply EnvError(const Status& s) {
  return Reply(kExitEnvironment, "", s.message());
}

std::string FinishedJson(RunStatus status) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Field("status", "finished");
  w.Field("run_status", RunStatusName(status)).EndObject();
  return out;
}

void SleepMs(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

class DirAgentService : public AgentService {
 public:
  DirAgentService(std::string dir, Env* env)
      : dir_(std::move(dir)), env_(env != nullptr ? env : Env::Posix()) {}

  AgentReply Take(const TakeRequest& request) override;
  AgentReply Heartbeat(int64_t task_id, const std::string& lease) override;
  AgentReply Done(int64_t task_id, const std::string& lease,
                  const std::string& response) override;
  AgentReply Fail(int64_t task_id, const std::string& lease,
                  std::string_view reason, const std::string& message) override;
  AgentReply Release(int64_t task_id, const std::string& lease) override;
  AgentReply RunStatus() override;

 private:
  std::string InstallDir() const;
  Status OpenQueue(std::unique_ptr<Queue>* q, bool* finished);
  Status Thaw(const QueueState& s);
  const Step* PoolStepOf(const Task& t) const;
  int64_t LeaseMs(const Task& t) const;
  Txn::LeaseTerms TermsOf(const Task& t, const std::string& agent) const;
  bool Takeable(const Task& t, const std::vector<std::string>& steps,
                int64_t now) const;
  bool WorthATransaction(const QueueState& s,
                         const std::vector<std::string>& steps) const;
  Status Settle(Txn& txn);
  void ReapLost(const std::vector<int64_t>& ids, const std::string& wizard);
  Status TryTake(Queue* q, const TakeRequest& request, std::string* payload);
  AgentReply WithLease(
      int64_t task_id, const std::string& lease, const char* what,
      const std::function<Status(Txn&, const Task&, AgentReply*)>& fn);

  const std::string dir_;
  Env* const env_;
  std::string frozen_;  // the workflow text `workflow_` was thawed from
  std::unique_ptr<Workflow> workflow_;
};

// The install directory as an absolute path (as given if it cannot be
// resolved).
std::string DirAgentService::InstallDir() const {
  char buf[PATH_MAX];
  return realpath(dir_.c_str(), buf) != nullptr ? buf : dir_;
}

Status DirAgentService::OpenQueue(std::unique_ptr<Queue>* q, bool* finished) {
  QueueOptions o;
  o.env = env_;
  o.install_dir = InstallDir();
  o.mode = OpenMode::kAttach;
  o.leases_only = true;
  // A dead `wizq run`'s Command attempts are its successor's to adopt.
  o.reclaim_worker_claims = false;
  OpenReport report;
  Status s = Queue::Open(o, q, &report);
  if (s.IsNotFound()) {
    return Status::NotFound("no run in " + dir_ +
                            " (start one with: wizq run WORKFLOW --dir " +
                            dir_ + ")");
  }
  WIZQ_RETURN_IF_ERROR(s);
  *finished = report.action == OpenAction::kFinished;
  return Thaw((*q)->state());
}

// The run's frozen workflow, parsed once per run.
Status DirAgentService::Thaw(const QueueState& s) {
  const std::string& frozen = s.run().workflow;
  if (workflow_ && frozen == frozen_) return Status::OK();
  std::unique_ptr<Workflow> wf;
  Status p = Workflow::Parse(frozen, "the run's frozen workflow", &wf);
  if (!p.ok()) return Status::Corruption(p.message());
  workflow_ = std::move(wf);
  frozen_ = frozen;
  return Status::OK();
}

const Step* DirAgentService::PoolStepOf(const Task& t) const {
  if (t.origin == Origin::kFinally) return nullptr;  // hooks are Commands
  const Step* step = workflow_->FindStep(t.type);
  if (step == nullptr || step->action.kind != Action::Kind::kPool) {
    return nullptr;
  }
  return step;
}

int64_t DirAgentService::LeaseMs(const Task& t) const {
  const Step* step = workflow_->FindStep(t.type);
  const double s =
      step ? step->options.lease_seconds : StepOptions::kDefaultLeaseSeconds;
  return std::max<int64_t>(1, std::llround(s * 1000));
}

// The lease of the step's options, and its timeout (SPEC §9: enforced by
// the store from the claim on, heartbeats or not).
Txn::LeaseTerms DirAgentService::TermsOf(const Task& t,
                                         const std::string& agent) const {
  Txn::LeaseTerms terms;
  terms.lease_ms = LeaseMs(t);
  terms.agent = agent;
  const Step* step = workflow_->FindStep(t.type);
  if (step != nullptr && step->options.timeout_seconds) {
    terms.timeout_ms = std::max<int64_t>(
        1, std::llround(*step->options.timeout_seconds * 1000));
    terms.retry_on_timeout = step->options.retry_on_timeout;
  }
  return terms;
}

bool DirAgentService::Takeable(const Task& t,
                               const std::vector<std::string>& steps,
                               int64_t now) const {
  if (t.state != TaskState::kPending || t.retry_at_ms > now) return false;
  if (PoolStepOf(t) == nullptr) return false;
  return steps.empty() ||
         std::find(steps.begin(), steps.end(), t.type) != steps.end();
}

// Cheap, on the state as last read: is there a task to take, a lapsed
// lease to put back, an attempt past its timeout, or an end to record?
bool DirAgentService::WorthATransaction(
    const QueueState& s, const std::vector<std::string>& steps) const {
  const int64_t now = static_cast<int64_t>(env_->NowMicros() / 1000);
  if (s.run().status != wizq::RunStatus::kRunning) return true;
  if (!s.hooks_due().empty() || s.AllSettled()) return true;
  for (int64_t id : s.in_progress()) {
    const Task* t = s.Find(id);
    if (!t->lease_token.empty() && t->lease_expires_ms < now) return true;
    if (AttemptTimedOut(*t, now)) return true;
  }
  for (int64_t id : s.pending()) {
    if (Takeable(*s.Find(id), steps, now)) return true;
  }
  return false;
}

// What the run loop does after its results (tasks/run_rules.h): due
// finally hooks are submitted and a run whose tasks have all settled is
// finished, so a run whose last tasks are agents' does not wait for a
// `wizq run`.
Status DirAgentService::Settle(Txn& txn) {
  return SettleRun(txn, *workflow_,
                   txn.now_ms() - txn.state().run().started_ms);
}

// Tasks failed as worker_lost by a reclaim: what their attempt may have
// left running (an agent `serve` started, then died) is ended now, since
// no later attempt will do it.
void DirAgentService::ReapLost(const std::vector<int64_t>& ids,
                               const std::string& wizard) {
  for (int64_t id : ids) {
    ReapOrphans(AttemptFiles::TaskDir(wizard, id), kOrphanGraceSeconds,
                kOrphanMaxWaitSeconds, env_)
        .IgnoreError();
  }
}

Status DirAgentService::TryTake(Queue* q, const TakeRequest& request,
                                std::string* payload) {
  int64_t id = 0;
  std::string token;
  std::vector<int64_t> lost;
  WIZQ_RETURN_IF_ERROR(q->Transact([&](Txn& txn) {
    id = 0;
    lost = txn.reclaimed().lost;
    WIZQ_RETURN_IF_ERROR(Settle(txn));
    if (txn.state().run().status != wizq::RunStatus::kRunning)
      return Status::OK();
    const int64_t now = txn.now_ms();
    int64_t want = 0;
    for (int64_t pid : txn.state().pending()) {
      if (Takeable(*txn.state().Find(pid), request.steps, now)) {
        want = pid;
        break;
      }
    }
    if (want == 0) return Status::OK();
    return txn.ClaimLeased([want](const Task& t) { return t.id == want; },
                           TermsOf(*txn.state().Find(want), request.agent), &id,
                           &token);
  }));
  ReapLost(lost, q->wizard_dir());
  if (id == 0) return Status::OK();
  const QueueState& s = q->state();
  const Task& t = *s.Find(id);
  // An earlier attempt's process tree (a `serve` that died) ends before
  // this one is handed out: two attempts never overlap (SPEC §6.3).
  WIZQ_RETURN_IF_ERROR(ReapOrphans(AttemptFiles::TaskDir(q->wizard_dir(), id),
                                   kOrphanGraceSeconds, kOrphanMaxWaitSeconds,
                                   env_));
  PayloadInfo info;
  info.run_id = s.run().run_id;
  info.idempotency_key = IdempotencyKey(info.run_id, s.run().started_ms, t);
  info.lease = token;
  info.lease_seconds = static_cast<double>(LeaseMs(t)) / 1000;
  info.install_dir = InstallDir();
  *payload = PoolPayload(*workflow_, *PoolStepOf(t), t, info);
  return Status::OK();
}

AgentReply DirAgentService::Take(const TakeRequest& request) {
  if (!(request.wait_seconds >= 0)) {
    return Reply(kExitInvalid, "", "--wait must be a number of seconds >= 0");
  }
  const int64_t deadline =
      static_cast<int64_t>(env_->NowMicros() / 1000) +
      static_cast<int64_t>(std::min(request.wait_seconds, 1e9) * 1000);
  std::unique_ptr<Queue> q;
  bool finished = false;
  Status s = OpenQueue(&q, &finished);
  if (!s.ok()) return EnvError(s);
  for (const std::string& name : request.steps) {
    const Step* step = workflow_->FindStep(name);
    if (step == nullptr || step->action.kind != Action::Kind::kPool) {
      return Reply(kExitInvalid, "",
                   "--step " + name + ": the run's workflow has no Pool step " +
                       "of that name");
    }
  }
  std::string payload;
  while (true) {
    const QueueState& st = q->state();
    if (st.run().status != wizq::RunStatus::kRunning) {
      q->Close().IgnoreError();
      return Reply(kExitNothingToTake, FinishedJson(st.run().status));
    }
    if (WorthATransaction(st, request.steps)) {
      s = TryTake(q.get(), request, &payload);
      if (!s.ok()) return EnvError(s);
      if (!payload.empty()) {
        q->Close().IgnoreError();
        return Reply(kExitCompleted, payload);
      }
      // The run may have finished meanwhile.
      if (q->state().run().status != wizq::RunStatus::kRunning) continue;
    }
    if (static_cast<int64_t>(env_->NowMicros() / 1000) >= deadline) break;
    SleepMs(kWaitPollMs);
    s = q->Refresh();
    if (!s.ok()) return EnvError(s);
  }
  q->Close().IgnoreError();
  return Reply(kExitNothingToTake, "{\"status\":\"idle\"}");
}

// Runs `fn` for the holder of `lease` on `task_id`, in one transaction with
// the lease check. A lost lease records nothing but the reclaim any
// transaction does, and answers exit 3.
AgentReply DirAgentService::WithLease(
    int64_t task_id, const std::string& lease, const char* what,
    const std::function<Status(Txn&, const Task&, AgentReply*)>& fn) {
  std::unique_ptr<Queue> q;
  bool finished = false;
  Status s = OpenQueue(&q, &finished);
  if (!s.ok()) return EnvError(s);
  AgentReply reply;
  std::vector<int64_t> lost;
  const Task* task = q->state().Find(task_id);
  if (finished && task != nullptr) {
    reply = Reply(kExitEnvironment, "",
                  WhyNotHeld(*task) + " (the run has finished, " +
                      RunStatusName(q->state().run().status) + ")");
  } else if (finished) {
    reply = Reply(kExitInvalid, "",
                  "no task " + std::to_string(task_id) + " in this run");
  } else {
    s = q->Transact([&](Txn& txn) {
      lost = txn.reclaimed().lost;
      reply = AgentReply();
      Status u = txn.UseLease(task_id, lease);
      if (u.IsConflict() || u.IsInvalidArgument()) {
        reply = Reply(u.IsConflict() ? kExitEnvironment : kExitInvalid, "",
                      u.message());
        return Settle(txn);  // the reclaim is kept; nothing else is done
      }
      WIZQ_RETURN_IF_ERROR(u);
      WIZQ_RETURN_IF_ERROR(fn(txn, *txn.state().Find(task_id), &reply));
      return Settle(txn);
    });
    if (!s.ok()) {
      return EnvError(
          s.Annotate(std::string(what) + " task " + std::to_string(task_id)));
    }
  }
  ReapLost(lost, q->wizard_dir());
  q->Close().IgnoreError();
  return reply;
}

AgentReply DirAgentService::Heartbeat(int64_t task_id,
                                      const std::string& lease) {
  return WithLease(
      task_id, lease, "renewing the lease of",
      [&](Txn& txn, const Task& t, AgentReply* reply) {
        int64_t expires = 0;
        const int64_t ms = LeaseMs(t);
        WIZQ_RETURN_IF_ERROR(txn.RenewLease(task_id, lease, ms, &expires));
        std::string out;
        JsonWriter w(&out);
        w.BeginObject().Key("task_id").Int(task_id);
        w.Key("lease_expires_ms").Int(expires);
        w.Key("lease_seconds").Double(ms / 1000.0).EndObject();
        *reply = Reply(kExitCompleted, out);
        return Status::OK();
      });
}

AgentReply DirAgentService::Done(int64_t task_id, const std::string& lease,
                                 const std::string& response) {
  return WithLease(
      task_id, lease, "completing",
      [&](Txn& txn, const Task& task, AgentReply* reply) {
        const Task t = task;  // the state changes under the reference
        std::vector<NewTask> children;
        std::string text;
        Status v = AgentResponseText(response, &text);
        if (v.ok()) v = ChildrenOf(*workflow_, t, text, &children);
        std::string out;
        JsonWriter w(&out);
        w.BeginObject().Key("task_id").Int(task_id);
        if (!v.ok()) {
          const Step* step = workflow_->FindStep(t.type);
          bool again = false;
          WIZQ_RETURN_IF_ERROR(txn.Fail(
              task_id, kReasonInvalidResponse, v.message(),
              step == nullptr || step->options.retry_on_invalid_response,
              RetryDelayMs(t.attempts), &again));
          w.Field("status", "invalid_response").Field("will_retry", again);
          w.EndObject();
          *reply = Reply(kExitTaskFailed, out,
                         "invalid response for task " +
                             std::to_string(task_id) + " (" + t.type +
                             "): " + v.message() + "; the attempt failed (" +
                             std::string(kReasonInvalidResponse) + ")" +
                             (again ? " and the task will be retried"
                                    : " and the task failed for good"));
          return Status::OK();
        }
        std::vector<int64_t> ids;
        WIZQ_RETURN_IF_ERROR(txn.Complete(task_id, children, &ids));
        w.Field("status", "done").Key("children").BeginArray();
        for (int64_t id : ids) w.Int(id);
        w.EndArray().EndObject();
        *reply = Reply(kExitCompleted, out);
        return Status::OK();
      });
}

AgentReply DirAgentService::Fail(int64_t task_id, const std::string& lease,
                                 std::string_view reason,
                                 const std::string& message) {
  return WithLease(
      task_id, lease, "failing",
      [&](Txn& txn, const Task& task, AgentReply* reply) {
        const int attempts = task.attempts;
        const Step* step = workflow_->FindStep(task.type);
        const bool retryable = reason != kReasonTimeout || step == nullptr ||
                               step->options.retry_on_timeout;
        bool again = false;
        WIZQ_RETURN_IF_ERROR(txn.Fail(
            task_id, reason, message.empty() ? "the agent gave up" : message,
            retryable, RetryDelayMs(attempts), &again));
        std::string out;
        JsonWriter w(&out);
        w.BeginObject().Key("task_id").Int(task_id);
        w.Field("status", "failed").Field("will_retry", again).EndObject();
        *reply = Reply(kExitCompleted, out);
        return Status::OK();
      });
}

AgentReply DirAgentService::Release(int64_t task_id, const std::string& lease) {
  return WithLease(
      task_id, lease, "giving back",
      [&](Txn& txn, const Task&, AgentReply* reply) {
        WIZQ_RETURN_IF_ERROR(txn.Release(task_id, kReasonReleased));
        std::string out;
        JsonWriter w(&out);
        w.BeginObject().Key("task_id").Int(task_id);
        w.Field("status", "released").EndObject();
        *reply = Reply(kExitCompleted, out);
        return Status::OK();
      });
}

AgentReply DirAgentService::RunStatus() {
  QueueOptions o;
  o.env = env_;
  o.install_dir = dir_;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Queue> q;
  Status s = Queue::Open(o, &q, nullptr);
  if (s.IsNotFound()) {
    return Reply(kExitEnvironment, "", "no run in " + dir_);
  }
  if (!s.ok()) return EnvError(s);
  return Reply(kExitCompleted,
               RunStatusJson(q->state(),
                             static_cast<int64_t>(env_->NowMicros() / 1000)));
}

}  // namespace

std::unique_ptr<AgentService> AgentService::Open(const std::string& install_dir,
                                                 Env* env) {
  return std::make_unique<DirAgentService>(install_dir, env);
}

}  // namespace wizq
