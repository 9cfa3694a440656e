// AgentService on the store contract (queue/store.h): every call opens the
// run with OpenMode::kAttach and StoreOptions::leases_only (no worker is
// registered: an agent holds leases, not a worker's liveness; on
// PostgreSQL the run's row is not locked), does its work in one
// transaction (a heartbeat maybe in none: agent_lease.cc) and closes it
// again. Here: opening the run, take and status.
#include "agent/agent_service.h"

#include <limits.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "agent/run_status.h"
#include "agent/store_agent_service.h"
#include "fs/env.h"
#include "fs/path.h"
#include "queue/run_place.h"
#include "queue/store.h"
#include "tasks/exec/attempt_files.h"
#include "tasks/exec/instructions.h"
#include "tasks/proc/command_runner.h"
#include "tasks/workflow/run_rules.h"
#include "util/exit_code.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

// How soon `take --wait` looks again after a transaction that found
// nothing to do although the run's state said there was (another taker
// was first, or the store's clock differs from this machine's): no commit
// may announce the next chance.
constexpr int kRecheckMs = 20;
// How many pending tasks Look reads at once.
constexpr int64_t kLookPage = 64;
// How long a taker lets an earlier attempt's orphaned tree end (SPEC §6.3).
constexpr double kOrphanGraceSeconds = 1.0;
constexpr double kOrphanMaxWaitSeconds = 10.0;

std::string FinishedJson(RunStatus status) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Field("status", "finished");
  w.Field("run_status", RunStatusName(status)).EndObject();
  return out;
}

// When the store puts back (lease lapsed) or times out (past its step's
// timeout) a leased attempt, by the clock alone: the first ms at which it
// does (Task::lease_expires_ms, deadline_ms).
int64_t LeaseDueMs(const Task& t) {
  int64_t due = t.lease_expires_ms + 1;
  if (t.deadline_ms > 0) due = std::min(due, t.deadline_ms + 1);
  return due;
}

}  // namespace

AgentReply StoreAgentService::Reply(int code, std::string json,
                                    std::string message) {
  AgentReply r;
  r.exit_code = code;
  r.json = std::move(json);
  r.message = std::move(message);
  return r;
}

AgentReply StoreAgentService::OpenError(const Status& s) {
  return s.IsInvalidArgument() ? Reply(kExitInvalid, "", s.message())
                               : EnvError(s);
}

AgentReply StoreAgentService::EnvError(const Status& s) {
  AgentReply r = Reply(kExitEnvironment, "", s.message());
  r.io_error = s.IsIOError();
  return r;
}

// The install directory as an absolute path (as given if it cannot be
// resolved).
std::string StoreAgentService::InstallDir() const { return RealPathOr(dir_); }

Status StoreAgentService::OpenRun(std::unique_ptr<Store>* store,
                                  bool* finished) {
  StoreOptions o;
  o.env = env_;
  o.mode = OpenMode::kAttach;
  o.leases_only = true;
  // A dead `wizq run`'s Command attempts are its successor's to adopt.
  o.reclaim_worker_claims = false;
  OpenReport report;
  Status s = place_.Open(o, store, &report);
  if (s.IsNotFound()) {
    return Status::NotFound("no run " + place_.Describe() +
                            " (start one with: wizq run WORKFLOW --dir " +
                            dir_ +
                            (place_.database() ? ", on the same store)" : ")"));
  }
  WIZQ_RETURN_IF_ERROR(s);
  *finished = report.action == OpenAction::kFinished;
  RunInfo run;
  WIZQ_RETURN_IF_ERROR((*store)->GetRun(&run));
  return Thaw(run);
}

// The run's frozen workflow, parsed once per run.
Status StoreAgentService::Thaw(const RunInfo& run) {
  if (workflow_ && run.workflow == frozen_) return Status::OK();
  std::unique_ptr<Workflow> wf;
  Status p = Workflow::Parse(run.workflow, "the run's frozen workflow", &wf);
  if (!p.ok()) return Status::Corruption(p.message());
  workflow_ = std::move(wf);
  frozen_ = run.workflow;
  return Status::OK();
}

const Step* StoreAgentService::PoolStepOf(const Task& t) const {
  if (t.origin == Origin::kFinally) return nullptr;  // hooks are Commands
  const Step* step = workflow_->FindStep(t.type);
  if (step == nullptr || step->action.kind != Action::Kind::kPool) {
    return nullptr;
  }
  return step;
}

int64_t StoreAgentService::LeaseMs(const std::string& step_name) const {
  const Step* step = workflow_->FindStep(step_name);
  const double s =
      step ? step->options.lease_seconds : StepOptions::kDefaultLeaseSeconds;
  return std::max<int64_t>(1, std::llround(s * 1000));
}

// What a take claims: the lowest-id ready task of a Pool step (of those
// `request` names), under a new lease of its step's `lease` option, with
// its step's timeout (SPEC §9: enforced by the store from the claim on,
// heartbeats or not). InvalidArgument for a name that is no Pool step.
Status StoreAgentService::PoolFilter(const TakeRequest& request,
                                     ClaimFilter* f) const {
  for (const std::string& name : request.steps) {
    const Step* step = workflow_->FindStep(name);
    if (step == nullptr || step->action.kind != Action::Kind::kPool) {
      return Status::InvalidArgument(
          "--step " + name +
          ": the run's workflow has no Pool step of that name");
    }
  }
  *f = ClaimFilter();
  for (const Step& step : workflow_->steps()) {
    if (step.action.kind != Action::Kind::kPool) continue;
    if (!request.steps.empty() &&
        std::find(request.steps.begin(), request.steps.end(), step.name) ==
            request.steps.end()) {
      continue;
    }
    f->steps.insert(step.name);
    f->step_lease_ms[step.name] = LeaseMs(step.name);
    if (step.options.timeout_seconds) {
      f->timeouts[step.name] = {
          std::max<int64_t>(1,
                            std::llround(*step.options.timeout_seconds * 1000)),
          step.options.retry_on_timeout};
    }
  }
  f->lease = true;
  f->lease_ms = LeaseMs("");
  f->agent = request.agent;
  return Status::OK();
}

// Cheap, without a transaction: is there a task to take, a lapsed lease
// to put back, an attempt past its timeout, or an end to record? When not,
// *wake_ms is when one becomes due by the clock alone (a retry's time, a
// lease's expiry, an attempt's limit; INT64_MAX: never), which no commit
// announces.
Status StoreAgentService::Look(Store& store, const ClaimFilter& filter,
                               bool* worth, int64_t* wake_ms) {
  const int64_t now = NowMs();
  *worth = true;
  *wake_ms = INT64_MAX;
  RunCounts counts;
  WIZQ_RETURN_IF_ERROR(store.Counts(&counts));
  if (counts.hooks_due > 0 || counts.all_settled) return Status::OK();
  std::vector<Task> tasks;
  TaskFilter leased;
  leased.states = {TaskState::kInProgress};
  leased.leased = true;
  WIZQ_RETURN_IF_ERROR(store.ListTasks(leased, &tasks));
  for (const Task& t : tasks) {
    const int64_t due = LeaseDueMs(t);
    if (due <= now) return Status::OK();
    *wake_ms = std::min(*wake_ms, due);
  }
  *worth = false;
  if (filter.steps.empty()) return Status::OK();  // no Pool step to take
  // Pending tasks of the steps, a page at a time: the first is normally
  // ready, and only tasks waiting for their retry are read past it.
  TaskFilter ready;
  ready.states = {TaskState::kPending};
  ready.steps.assign(filter.steps.begin(), filter.steps.end());
  ready.hooks = TaskFilter::Hooks::kNone;
  ready.limit = kLookPage;
  do {
    WIZQ_RETURN_IF_ERROR(store.ListTasks(ready, &tasks));
    for (const Task& t : tasks) {
      *worth = t.retry_at_ms <= now;
      if (*worth) return Status::OK();
      *wake_ms = std::min(*wake_ms, t.retry_at_ms);
    }
    if (!tasks.empty()) ready.after_id = tasks.back().id;
  } while (static_cast<int64_t>(tasks.size()) == kLookPage);
  return Status::OK();
}

// What the run loop does after its results (tasks/workflow/run_rules.h): due
// finally hooks are submitted and a run whose tasks have all settled is
// finished, so a run whose last tasks are agents' does not wait for a
// `wizq run`.
Status StoreAgentService::Settle(StoreTxn& txn) {
  RunInfo run;
  WIZQ_RETURN_IF_ERROR(txn.GetRun(&run));
  return SettleRun(txn, *workflow_, txn.now_ms() - run.started_ms);
}

// Tasks failed as worker_lost by a reclaim: what their attempt may have
// left running (an agent `serve` started, then died) is ended now, since
// no later attempt will do it.
void StoreAgentService::ReapLost(const std::vector<int64_t>& ids) {
  const std::string& workspace = workspace_;
  if (workspace.empty()) return;  // nothing of the run ran here
  for (int64_t id : ids) {
    ReapOrphans(AttemptFiles::TaskDir(workspace, id), kOrphanGraceSeconds,
                kOrphanMaxWaitSeconds, env_)
        .IgnoreError();
  }
}

// Claims a task and builds its payload, or leaves *payload empty; *status:
// the run's status after the transaction (its settling may finish it).
Status StoreAgentService::TryTake(Store& store, const ClaimFilter& filter,
                                  std::string* payload, int64_t* lease_from,
                                  wizq::RunStatus* status) {
  Task t;
  RunInfo run;
  std::vector<int64_t> lost;
  WIZQ_RETURN_IF_ERROR(store.Transact([&](StoreTxn& txn) {
    t = Task();
    lost = txn.reclaimed().lost;
    WIZQ_RETURN_IF_ERROR(Settle(txn));
    WIZQ_RETURN_IF_ERROR(txn.GetRun(&run));
    if (run.status != wizq::RunStatus::kRunning) return Status::OK();
    std::vector<Task> claimed;
    WIZQ_RETURN_IF_ERROR(txn.Claim(filter, &claimed));
    if (claimed.empty()) return Status::OK();
    t = claimed[0];
    *lease_from = txn.lease_from_mono_ms();
    // The payload goes to the agent right after this commit: its attempt
    // starts with the claim (a lapsed lease's attempt counts). Recorded as
    // the lease's holder, which this transaction acts for.
    WIZQ_RETURN_IF_ERROR(txn.ActAs(t.id, t.lease_token));
    return txn.MarkStarted({t.id});
  }));
  ReapLost(lost);
  *status = run.status;
  if (t.id == 0) return Status::OK();
  // An earlier attempt's process tree (a `serve` that died) ends before
  // this one is handed out: two attempts never overlap (SPEC §6.3).
  const std::string install_dir = InstallDir();
  workspace_ = LocalWorkspace(install_dir, place_.store, run.run_id);
  if (place_.database()) {
    WIZQ_RETURN_IF_ERROR(
        AdoptLocalWorkspace(env_, workspace_, std::to_string(run.started_ms)));
  }
  WIZQ_RETURN_IF_ERROR(ReapOrphans(AttemptFiles::TaskDir(workspace_, t.id),
                                   kOrphanGraceSeconds, kOrphanMaxWaitSeconds,
                                   env_));
  PayloadInfo info;
  info.run_id = run.run_id;
  info.idempotency_key = IdempotencyKey(info.run_id, run.started_ms, t);
  info.lease = t.lease_token;
  info.lease_seconds = static_cast<double>(LeaseMs(t.type)) / 1000;
  info.install_dir = install_dir;
  *payload = PoolPayload(*workflow_, *PoolStepOf(t), t, info);
  return Status::OK();
}

// Waits for work with Store::WaitForChange: it wakes on every commit (a
// task submitted, completed, put back; the run finished) and, since the
// clock alone changes nothing in the store, when Look says a retry, a
// lease or a time limit falls due, or at the deadline.
AgentReply StoreAgentService::Take(const TakeRequest& request) {
  if (!(request.wait_seconds >= 0)) {
    return Reply(kExitInvalid, "", "--wait must be a number of seconds >= 0");
  }
  // +1: the clock is read in whole ms, so that the wait never ends early.
  const int64_t deadline =
      NowMs() + 1 +
      static_cast<int64_t>(std::min(request.wait_seconds, 1e9) * 1000);
  std::unique_ptr<Store> store;
  bool finished = false;
  Status s = OpenRun(&store, &finished);
  if (!s.ok()) return OpenError(s);
  ClaimFilter filter;
  s = PoolFilter(request, &filter);
  if (!s.ok()) return Reply(kExitInvalid, "", s.message());
  int64_t seq = 0;  // the last commit seen before the state was read
  s = store->WaitForChange(0, 0, &seq);
  while (s.ok()) {
    RunInfo run;
    s = store->GetRun(&run);
    if (!s.ok()) break;
    if (run.status != wizq::RunStatus::kRunning) {
      store->Close().IgnoreError();
      return Reply(kExitNothingToTake, FinishedJson(run.status));
    }
    bool worth = false;
    int64_t wake = INT64_MAX;
    s = Look(*store, filter, &worth, &wake);
    if (!s.ok()) break;
    if (worth) {
      std::string payload;
      timespec began;
      clock_gettime(CLOCK_MONOTONIC, &began);
      int64_t lease_from = 0;
      s = TryTake(*store, filter, &payload, &lease_from, &run.status);
      if (!s.ok()) break;
      if (!payload.empty()) {
        store->Close().IgnoreError();
        AgentReply taken = Reply(kExitCompleted, payload);
        taken.lease_from_mono_ms =
            std::max(lease_from,
                     int64_t{began.tv_sec} * 1000 + began.tv_nsec / 1'000'000);
        return taken;
      }
      if (run.status != wizq::RunStatus::kRunning) continue;  // it finished
      wake = NowMs() + kRecheckMs;  // unless a commit (ours) comes first
    }
    const int64_t now = NowMs();
    if (now >= deadline) {
      store->Close().IgnoreError();
      return Reply(kExitNothingToTake, "{\"status\":\"idle\"}");
    }
    const int64_t until = std::min(deadline, wake);
    s = store->WaitForChange(
        seq, static_cast<int>(std::clamp<int64_t>(until - now, 0, INT_MAX)),
        &seq);
  }
  return EnvError(s);
}

AgentReply StoreAgentService::RunStatus() {
  StoreOptions o;
  o.env = env_;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Store> store;
  Status s = place_.Open(o, &store);
  if (s.IsNotFound()) {
    return Reply(kExitEnvironment, "", "no run " + place_.Describe());
  }
  std::string json;
  if (!s.ok()) return OpenError(s);
  s = RunStatusJson(*store, NowMs(), &json);
  if (!s.ok()) return EnvError(s);
  return Reply(kExitCompleted, json);
}

std::unique_ptr<AgentService> AgentService::Open(const std::string& install_dir,
                                                 Env* env) {
  RunPlace place;
  place.dir = install_dir;
  return Open(place, env);
}

std::unique_ptr<AgentService> AgentService::Open(const RunPlace& place,
                                                 Env* env) {
  return std::make_unique<StoreAgentService>(place, env);
}

}  // namespace wizq
