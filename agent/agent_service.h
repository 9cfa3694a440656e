// AgentService: the agent protocol of SPEC §9 on one install directory —
// take a ready Pool task under a lease, renew the lease, complete, fail or
// give back the attempt — as plain calls. `wizq agent
// take|heartbeat|done|fail|release`
// (cli/), `wizq agent serve`, `wizq run --agent` and the MCP server
// (`wizq mcp`, mcp/) are all clients of it, so they answer the same way,
// with the same JSON and the same messages.
//
// Every call opens the run's store for the call only (Store::Open, queue/
// store.h; no daemon: a lease, not a worker's liveness, holds the claim
// between calls) and is safe to make from any number of processes at once.
//
// Thread-safety: an AgentService may be used from one thread at a time.
#ifndef WIZQ_AGENT_AGENT_SERVICE_H_
#define WIZQ_AGENT_AGENT_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "queue/run_place.h"
#include "util/exit_code.h"

namespace wizq {

class Env;

// What a call amounts to, exactly as the CLI reports it.
struct AgentReply {
  // SPEC §7 (util/exit_code.h): kExitCompleted done; kExitTaskFailed the
  // response was invalid (the attempt failed, retry policy applied);
  // kExitInvalid bad arguments; kExitEnvironment the lease is not valid (the
  // message says what became of the task: put back, timed out, failed,
  // completed, never taken), or the environment failed; kExitNothingToTake
  // nothing to take (`json` says idle or finished).
  int exit_code = kExitCompleted;
  // The JSON object the CLI prints on stdout (take's payload, {"status":
  // "idle"}, the run status, ...); empty when there is none.
  std::string json;
  // The message the CLI prints on stderr (without the "wizq agent done: "
  // prefix); empty on success.
  std::string message;
  // kExitEnvironment because the store (or a file) could not be read or
  // written (Status::IOError): it may pass, unlike a refusal.
  bool io_error = false;
  // Take, Heartbeat: CLOCK_MONOTONIC ms no later than the store's clock
  // when the lease was granted or renewed (StoreTxn::lease_from_mono_ms;
  // else when the transaction was asked for); 0 otherwise.
  int64_t lease_from_mono_ms = 0;
};

struct TakeRequest {
  std::vector<std::string> steps;  // empty: any Pool step
  double wait_seconds = 0;         // how long to wait for a ready task
  std::string agent;               // the agent's name, for status (optional)
};

class AgentService {
 public:
  virtual ~AgentService() = default;

  // The service on the run of `install_dir` (its store). `env` nullptr:
  // Env::Posix(). Never fails: a directory without a run answers each
  // call with the documented refusal.
  static std::unique_ptr<AgentService> Open(const std::string& install_dir,
                                            Env* env = nullptr);
  // The same on the run `place` names (--dir, --store, --schema, --run-id).
  static std::unique_ptr<AgentService> Open(const RunPlace& place,
                                            Env* env = nullptr);

  // Claims the lowest-id ready Pool task (of `steps`) under a new lease,
  // records that its attempt started (task_started), and returns its
  // payload (SPEC §9) in `json`; exit 5 with {"status":"idle"} or
  // {"status":"finished","run_status":...} when there is none. Waits up to
  // request.wait_seconds for one (Store::WaitForChange: woken by commits,
  // and when a retry or a lease falls due).
  virtual AgentReply Take(const TakeRequest& request) = 0;
  // Every call below acts on the attempt held by `lease` on `task_id`; past
  // the step's timeout (from the claim, on the store's clock) that attempt
  // has timed out (task_failed timeout) and the call is refused, exit 3.

  // Renews the lease; exit 3 when it lapsed or is unknown.
  virtual AgentReply Heartbeat(int64_t task_id, const std::string& lease) = 0;
  // Completes the attempt with `response` (a JSON array of next tasks, or
  // a JSON string holding one: agent/agent_response.h), validated exactly
  // as a Command's stdout.
  virtual AgentReply Done(int64_t task_id, const std::string& lease,
                          const std::string& response) = 0;
  // Fails the attempt with `reason`: kReasonAgentFailed (the agent gave
  // up), kReasonAgentDisconnected (its MCP client went away) or
  // kReasonTimeout (a COMMAND `serve` killed at the step's timeout). The
  // retry policy applies (retry_on_timeout for a timeout).
  virtual AgentReply Fail(int64_t task_id, const std::string& lease,
                          std::string_view reason,
                          const std::string& message) = 0;
  // Gives the task back uncharged: pending again at once, the attempt
  // refunded (task_reset, reason released).
  virtual AgentReply Release(int64_t task_id, const std::string& lease) = 0;
  // The run's status as JSON (the object `wizq status --json` prints).
  virtual AgentReply RunStatus() = 0;
  // The machine-local workspace (tasks/exec/attempt_files.h) of the run of
  // the last Take that returned a task: where its attempt's files go.
  virtual std::string workspace() const = 0;
};

}  // namespace wizq

#endif  // WIZQ_AGENT_AGENT_SERVICE_H_
