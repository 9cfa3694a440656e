// Helpers of the queue store's crash tests (queue_crash_test.cc,
// queue_crash_archive_test.cc): views of a state, to compare what was
// recovered with what was promised, and the crash's context and aftermath.
#ifndef WIZQ_TESTS_QUEUE_CRASH_UTIL_H_
#define WIZQ_TESTS_QUEUE_CRASH_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fs/fault_env.h"
#include "queue/dir/queue.h"
#include "queue/dir/state.h"
#include "tests/queue_test_util.h"

namespace wizq::queue_crash_test {

using test::ReplayFromDisk;

// --- views of a state --------------------------------------------------------

// What the test compares of a task: everything durable that does not depend
// on the worker's id or the clock.
struct TaskView {
  int64_t id = 0;
  std::string type, inputs;
  TaskState state = TaskState::kPending;
  int attempts = 0, max_attempts = 0;
  int64_t parent = 0;
  Origin origin = Origin::kInitial;
  std::vector<int64_t> children;
  std::string error;
  bool has_finally = false;
  int64_t finally_for = 0, finally_task = 0;
};

struct View {
  RunStatus status = RunStatus::kRunning;
  std::vector<TaskView> tasks;
};

inline View ViewOf(const QueueState& s) {
  View v;
  v.status = s.run().status;
  for (const Task& t : s.tasks()) {
    TaskView tv;
    tv.id = t.id;
    tv.type = t.type;
    tv.inputs = t.inputs;
    tv.state = t.state;
    tv.attempts = t.attempts;
    tv.max_attempts = t.max_attempts;
    tv.parent = t.parent_id;
    tv.origin = t.origin;
    tv.children = t.children;
    tv.error = t.error_reason;
    tv.has_finally = t.has_finally;
    tv.finally_for = t.finally_for;
    tv.finally_task = t.finally_task;
    v.tasks.push_back(tv);
  }
  return v;
}

// With `exact` false, only the shape of the run: which tasks exist, how
// they hang together, and their states (attempts and errors depend on how
// many crashes a task lived through).
inline std::string ToString(const View& v, bool exact = true) {
  std::string out = std::string("status ") + RunStatusName(v.status) + "\n";
  for (const TaskView& t : v.tasks) {
    out += std::to_string(t.id) + " " + t.type + " " + t.inputs + " " +
           TaskStateName(t.state) + " p=" + std::to_string(t.parent) + " " +
           OriginName(t.origin) + " fin=" + std::to_string(t.has_finally) +
           "/" + std::to_string(t.finally_for) + "/" +
           std::to_string(t.finally_task) + " children=";
    for (int64_t c : t.children) out += std::to_string(c) + ",";
    if (exact) {
      out += " a=" + std::to_string(t.attempts) + "/" +
             std::to_string(t.max_attempts) + " err=" + t.error;
    }
    out += "\n";
  }
  return out;
}

// What a reopen makes of a state whose worker died: its claims are put
// back (or failed when no attempts remain), with reason worker_lost.
inline View AfterWorkerDeath(View v) {
  for (TaskView& t : v.tasks) {
    if (t.state != TaskState::kInProgress) continue;
    t.state =
        t.attempts < t.max_attempts ? TaskState::kPending : TaskState::kFailed;
    t.error = std::string(kReasonWorkerLost);
  }
  return v;
}

// The state recorded in `wizard`, rebuilt from its files without the Queue
// (from the snapshot on, or from the whole log), as ToString(ViewOf()).
inline std::string ViewFromDisk(const std::string& wizard, bool use_snapshot) {
  QueueState state;
  const std::string error = ReplayFromDisk(wizard, use_snapshot, &state);
  return error.empty() ? ToString(ViewOf(state)) : error;
}

// --- crashes -----------------------------------------------------------------

// "crash at op 7: " or "power loss at op 7: ", to prefix failures with.
inline std::string CrashContext(bool power_loss, int64_t k) {
  return std::string(power_loss ? "power loss" : "crash") + " at op " +
         std::to_string(k) + ": ";
}

// Leaves in `env`'s files what survives the crash it simulated, and resets
// it: the page cache survives a process crash; a power loss also drops
// whatever was not synced.
inline Status AfterCrash(FaultInjectionEnv* env, bool power_loss) {
  if (power_loss) return env->DropUnsyncedData();  // also resets the env
  env->ResetState();
  return Status::OK();
}

}  // namespace wizq::queue_crash_test

#endif  // WIZQ_TESTS_QUEUE_CRASH_UTIL_H_
