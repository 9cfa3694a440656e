// StoreAgentService (agent/store_agent_service.h): what the holder of a
// lease does — heartbeat, done, fail, release — each checked against the
// lease in the transaction that acts (a heartbeat, on a store that has it,
// without one: Store::RenewHeldLease).
#include <memory>
#include <string>

#include "agent/agent_response.h"
#include "agent/store_agent_service.h"
#include "tasks/workflow/response.h"
#include "tasks/workflow/run_rules.h"
#include "util/exit_code.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

std::string RenewedJson(int64_t task_id, int64_t expires_ms, int64_t ms) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("task_id").Int(task_id);
  w.Key("lease_expires_ms").Int(expires_ms);
  w.Key("lease_seconds").Double(ms / 1000.0).EndObject();
  return out;
}

}  // namespace

// Runs `fn` for the holder of `lease` on `task_id`, in one transaction with
// the lease check. A lost lease records nothing but the reclaim any
// transaction does, and answers exit 3.
AgentReply StoreAgentService::WithLease(
    int64_t task_id, const std::string& lease, const char* what,
    const std::function<Status(StoreTxn&, const Task&, AgentReply*)>& fn) {
  std::unique_ptr<Store> store;
  bool finished = false;
  Status s = OpenRun(&store, &finished);
  if (!s.ok()) return OpenError(s);
  return WithLeaseOn(store.get(), finished, task_id, lease, what, fn);
}

AgentReply StoreAgentService::WithLeaseOn(
    Store* store, bool finished, int64_t task_id, const std::string& lease,
    const char* what,
    const std::function<Status(StoreTxn&, const Task&, AgentReply*)>& fn) {
  Status s;
  AgentReply reply;
  std::vector<int64_t> lost;
  if (finished) {
    Task task;
    RunInfo run;
    s = store->GetRun(&run);
    Status found = s.ok() ? store->GetTask(task_id, &task) : s;
    if (found.IsNotFound()) {
      reply = Reply(kExitInvalid, "",
                    "no task " + std::to_string(task_id) + " in this run");
    } else if (!found.ok()) {
      return EnvError(found);
    } else {
      reply = Reply(kExitEnvironment, "",
                    WhyNotHeld(task) + " (the run has finished, " +
                        RunStatusName(run.status) + ")");
    }
  } else {
    s = store->Transact([&](StoreTxn& txn) {
      lost = txn.reclaimed().lost;
      reply = AgentReply();
      Status u = txn.ActAs(task_id, lease);
      if (u.IsConflict() || u.IsInvalidArgument()) {
        reply = Reply(u.IsConflict() ? kExitEnvironment : kExitInvalid, "",
                      u.message());
        return Settle(txn);  // the reclaim is kept; nothing else is done
      }
      WIZQ_RETURN_IF_ERROR(u);
      Task t;
      WIZQ_RETURN_IF_ERROR(txn.GetTask(task_id, &t));
      WIZQ_RETURN_IF_ERROR(fn(txn, t, &reply));
      return Settle(txn);
    });
    if (!s.ok()) {
      return EnvError(
          s.Annotate(std::string(what) + " task " + std::to_string(task_id)));
    }
  }
  ReapLost(lost);
  store->Close().IgnoreError();
  return reply;
}

// The lease is renewed by Store::RenewHeldLease where the store has it
// (PostgreSQL: without waiting for the run's row); where it is refused, or
// the store has none, by a transaction, which says why and puts back what
// lapsed.
AgentReply StoreAgentService::Heartbeat(int64_t task_id,
                                        const std::string& lease) {
  std::unique_ptr<Store> store;
  bool finished = false;
  Status s = OpenRun(&store, &finished);
  if (!s.ok()) return OpenError(s);
  Task t;
  if (!finished && store->GetTask(task_id, &t).ok()) {
    int64_t expires = 0, from = 0;
    const int64_t ms = LeaseMs(t.type);
    s = store->RenewHeldLease(task_id, lease, ms, &expires, &from);
    if (s.ok()) {
      store->Close().IgnoreError();
      AgentReply reply =
          Reply(kExitCompleted, RenewedJson(task_id, expires, ms));
      reply.lease_from_mono_ms = from;
      return reply;
    }
    if (!s.IsConflict() && !s.IsInvalidArgument() && !s.IsNotSupported()) {
      return EnvError(
          s.Annotate("renewing the lease of task " + std::to_string(task_id)));
    }
  }
  return WithLeaseOn(
      store.get(), finished, task_id, lease, "renewing the lease of",
      [&](StoreTxn& txn, const Task& t, AgentReply* reply) {
        int64_t expires = 0;
        const int64_t ms = LeaseMs(t.type);
        WIZQ_RETURN_IF_ERROR(txn.RenewLease(task_id, lease, ms, &expires));
        *reply = Reply(kExitCompleted, RenewedJson(task_id, expires, ms));
        reply->lease_from_mono_ms = txn.lease_from_mono_ms();
        return Status::OK();
      });
}

AgentReply StoreAgentService::Done(int64_t task_id, const std::string& lease,
                                   const std::string& response) {
  return WithLease(
      task_id, lease, "completing",
      [&](StoreTxn& txn, const Task& t, AgentReply* reply) {
        Completion c;
        std::string text;
        Status v = AgentResponseText(response, &text);
        if (v.ok()) v = ChildrenOf(*workflow_, t, text, &c.children);
        std::string out;
        JsonWriter w(&out);
        w.BeginObject().Key("task_id").Int(task_id);
        if (!v.ok()) {
          const Step* step = workflow_->FindStep(t.type);
          Failure f;
          f.reason = std::string(kReasonInvalidResponse);
          f.message = v.message();
          f.retryable =
              step == nullptr || step->options.retry_on_invalid_response;
          f.retry_delay_ms = RetryDelayMs(t.attempts);
          bool again = false;
          WIZQ_RETURN_IF_ERROR(txn.Fail(task_id, f, &again));
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
        WIZQ_RETURN_IF_ERROR(txn.Complete(task_id, c, &ids));
        w.Field("status", "done").Key("children").BeginArray();
        for (int64_t id : ids) w.Int(id);
        w.EndArray().EndObject();
        *reply = Reply(kExitCompleted, out);
        return Status::OK();
      });
}

AgentReply StoreAgentService::Fail(int64_t task_id, const std::string& lease,
                                   std::string_view reason,
                                   const std::string& message) {
  return WithLease(
      task_id, lease, "failing",
      [&](StoreTxn& txn, const Task& t, AgentReply* reply) {
        const Step* step = workflow_->FindStep(t.type);
        Failure f;
        f.reason = std::string(reason);
        f.message = message.empty() ? "the agent gave up" : message;
        f.retryable = reason != kReasonTimeout || step == nullptr ||
                      step->options.retry_on_timeout;
        f.retry_delay_ms = RetryDelayMs(t.attempts);
        bool again = false;
        WIZQ_RETURN_IF_ERROR(txn.Fail(task_id, f, &again));
        std::string out;
        JsonWriter w(&out);
        w.BeginObject().Key("task_id").Int(task_id);
        w.Field("status", "failed").Field("will_retry", again).EndObject();
        *reply = Reply(kExitCompleted, out);
        return Status::OK();
      });
}

AgentReply StoreAgentService::Release(int64_t task_id,
                                      const std::string& lease) {
  return WithLease(
      task_id, lease, "giving back",
      [&](StoreTxn& txn, const Task&, AgentReply* reply) {
        WIZQ_RETURN_IF_ERROR(txn.Release(task_id, kReasonReleased));
        std::string out;
        JsonWriter w(&out);
        w.BeginObject().Key("task_id").Int(task_id);
        w.Field("status", "released").EndObject();
        *reply = Reply(kExitCompleted, out);
        return Status::OK();
      });
}

}  // namespace wizq
