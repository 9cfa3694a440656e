// Task: one unit of work in a run, as the queue store keeps it.
//
// A task belongs to a step (its `type`) and carries its inputs as the exact
// JSON text it was submitted with. Its `state` moves
//   pending -> in_progress (claim, attempts += 1)
//   in_progress -> done | failed | pending (retry, or reset of a dead worker)
// and never leaves done or failed. Ids are positive, rise monotonically and
// are never reused in a run.
#ifndef WIZQ_QUEUE_TASK_H_
#define WIZQ_QUEUE_TASK_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wizq {

enum class TaskState { kPending, kInProgress, kDone, kFailed };
// How a task came to exist. Retries happen in place (the same task, one more
// attempt), so kRetry is reserved for a task re-queued by hand.
enum class Origin { kInitial, kSpawned, kRetry, kFinally };

const char* TaskStateName(TaskState s);
bool ParseTaskState(std::string_view name, TaskState* s);
const char* OriginName(Origin o);
bool ParseOrigin(std::string_view name, Origin* o);

// Failure reasons of SPEC §3.
inline constexpr std::string_view kReasonExitCode = "exit_code";
inline constexpr std::string_view kReasonTimeout = "timeout";
inline constexpr std::string_view kReasonInvalidResponse = "invalid_response";
inline constexpr std::string_view kReasonWorkerLost = "worker_lost";
// Pool steps (SPEC §9): an agent's lease lapsed (task_reset), an agent
// called `fail` (task_failed).
inline constexpr std::string_view kReasonLeaseExpired = "lease_expired";
inline constexpr std::string_view kReasonAgentFailed = "agent_failed";
// An agent gave its task back uncharged (`wizq agent release`, task_reset),
// or its MCP client went away holding it (`wizq mcp`, task_failed).
inline constexpr std::string_view kReasonReleased = "released";
inline constexpr std::string_view kReasonAgentDisconnected =
    "agent_disconnected";

// The `worker` of the attempts an import records (queue/import.h): they
// ran in the tool whose run wizq continues, in no wizq worker. A task that
// finished so keeps it as its last claimer (QueueState::imported).
inline constexpr std::string_view kImportWorker = "import";

struct Task {
  int64_t id = 0;
  std::string type;    // the step
  std::string inputs;  // exact JSON text
  TaskState state = TaskState::kPending;
  int attempts = 0;  // claims so far
  // The current attempt started (task_started): its holder handed it to a
  // process or a handler. Reset by each claim.
  bool started = false;
  int max_attempts = 1;
  int64_t parent_id = 0;  // 0: a root task
  Origin origin = Origin::kInitial;
  std::string dedup_key;
  std::string claimed_by;  // worker id while in_progress (and last claimer)
  // The host of the last claim (HostId::Key, queue/host.h); empty for a
  // claim recorded before hosts were (it counts as this host's).
  std::string claim_host;
  std::vector<int64_t> children;  // tasks attached to this one, in order
  std::string error_reason;       // last failure reason, "" if none
  std::string error_message;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t retry_at_ms = 0;  // a retried task is not claimed before this
  // A claim held by a lease (an agent, SPEC §9) rather than by a worker:
  // the token and when it lapses (wall-clock ms). Empty / 0 while the task
  // is not in_progress or is held by a worker. `agent`: the name the agent
  // gave when it took the task (kept after the claim ends, for status).
  std::string lease_token;
  int64_t lease_expires_ms = 0;
  std::string agent;
  // A leased attempt's time limit (its step's `timeout`, SPEC §9), set
  // while the task is in_progress under a lease with one: the attempt
  // times out once now_ms > deadline_ms (the claim's time + timeout_ms),
  // heartbeats or not, and is retried only if retry_on_timeout (the step's
  // option, recorded at claim) and attempts remain. 0: no limit.
  int64_t timeout_ms = 0;
  int64_t deadline_ms = 0;
  bool retry_on_timeout = true;
  // Finally hooks (SPEC §2). `has_finally`: the step has a hook, so the
  // task is not settled until its hook task exists. `finally_task`: the id
  // of that hook task once submitted. `finally_for`: for a hook task, the
  // task whose hook it is.
  bool has_finally = false;
  int64_t finally_task = 0;
  int64_t finally_for = 0;
  // A hook task's generation: 1 for the first hook of its owner, N + 1 for
  // the hook that re-runs generation N (see hook_stale).
  int generation = 1;
  // The owner's hook (finally_task) ran, or was running, when a task in its
  // subtree that had failed completed, or a task was attached beneath it
  // (after --retry-failed): a hook of the next generation is due once the
  // subtree settles again. Cleared when that hook is submitted.
  bool hook_stale = false;
  // The id, in the previous run (RunInfo::previous_run), of the task whose
  // recorded result completed this one without running; 0 if it ran (or
  // has not finished). See orchestrator/reuse.h.
  int64_t reused_from = 0;
  // A Prompt task's recorded answer (JSON text; empty: none yet) and where
  // it came from (terminal, flag, default). Set once (task_answered).
  std::string answer;
  std::string answer_source;
  // Derived, not stored: children whose subtree has not settled yet, and
  // whether this task's settling was already counted at its parent.
  int64_t open_children = 0;
  bool settled_counted = false;

  bool terminal() const {
    return state == TaskState::kDone || state == TaskState::kFailed;
  }
  // A task is settled when it and everything attached below it has
  // finished, and its finally hook (if it succeeded and has one) exists
  // and is not stale.
  bool settled() const {
    return terminal() && open_children == 0 &&
           (state == TaskState::kFailed || !has_finally ||
            (finally_task != 0 && !hook_stale));
  }
};

// The dedup key of the finally hook of generation `generation` of task
// `owner`: "finally:<owner>" for the first (as before generations existed),
// "finally:<owner>:<generation>" for a later one (docs/FORMAT.md).
std::string FinallyDedupKey(int64_t owner, int generation);

// What a caller asks the store to submit.
struct NewTask {
  std::string type;
  std::string inputs;  // valid JSON text
  int64_t parent_id = 0;
  Origin origin = Origin::kSpawned;
  int max_attempts = 1;
  bool has_finally = false;
  int64_t finally_for = 0;  // for Origin::kFinally
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_TASK_H_
