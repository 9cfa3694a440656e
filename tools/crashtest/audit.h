// `wizq crashtest`, part: what a run's audit log (.wizard/audit.jsonl,
// docs/FORMAT.md) says about kill points and task executions.
//
// Kill points. Each event of the undisturbed run's log that moves the run
// on is a durable step, and crashtest kills a run right after the commit
// that holds it, or right before it for a task's result. A kill point is
// named by its event and task, not by the commit's index (how results are
// batched depends on timing when tasks run in parallel):
//   - "after run_started", "after task_claimed #4 Install" (claimed, not
//     started), "after task_completed #4 Install", "after task_failed ...",
//     "after run_finished": the commit holding the event is durable,
//     nothing has acted on it yet (log.after_sync);
//   - "before task_completed #4 Install" (or task_failed): the task's body
//     has finished and done all its side effects, its result is not
//     durable (log.before_write). This is where a power cut makes a task
//     run twice.
// `wizq` arms the crash point of util/crash_point.h from WIZQ_CRASH_AT
// (`log.after_sync:n`), counting only the batches that hold the event's
// text as wizq writes it (WIZQ_CRASH_IF: `"event":"task_completed","id":4,`):
// the n-th such batch, for a task's n-th claim or result. A task's id is
// the same in every run unless tasks that spawn children finish in another
// order.
//
// Executions. A task's body ran once per distinct attempt number of its
// `task_claimed` events: a claim put back because its attempt never started
// (`task_reset` with `refund`) gives the number back, so the next claim
// reuses it; a claim whose earlier attempt was adopted instead of run
// (`task_adopted` naming an older attempt) is not an execution either.
// Tasks are matched between runs by step and dedup key (their ids depend
// on the order of completions when tasks run in parallel).
#ifndef WIZQ_TOOLS_CRASHTEST_AUDIT_H_
#define WIZQ_TOOLS_CRASHTEST_AUDIT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/status.h"

namespace wizq::crashtest {

// One event of the log, as crashtest reads it (decoded by the event codec,
// queue/events.h): its name, and the fields the kill points and the
// executions are found by.
struct LoggedEvent {
  std::string event;
  int64_t id = 0;               // the task's; 0 for a run's or a worker's event
  std::string type, dedup_key;  // task_submitted
  int64_t attempt = 0;          // task_claimed, task_adopted
  std::string reason;           // task_failed
  bool will_retry = false;      // task_failed
  std::string status;           // run_finished
};

// The events of one commit (one durable batch), in order.
using Commit = std::vector<LoggedEvent>;

// Reads `<install_dir>/.wizard/audit.jsonl` (crashtest is a tool of the
// directory store, docs/ARCHITECTURE.md): its committed batches (free
// space and a torn tail are left out; a corrupt line is an error).
Status ReadCommits(const std::string& install_dir, std::vector<Commit>* out);

struct KillPoint {
  std::string crash_at;  // the WIZQ_CRASH_AT value: "log.after_sync:1"
  std::string crash_if;  // the WIZQ_CRASH_IF value: the event's text
  std::string name;      // "after task_completed #2 Download"
  // The commit holding it, as the undisturbed run made it: "done
  // Download#2; claim Unpack#3".
  std::string what;
};

// Every kill point of a run, in the order the run passes them.
std::vector<KillPoint> KillPointsOf(const std::vector<Commit>& commits);

// `n` of `all`, spread evenly and always the same ones (all if n <= 0 or
// n >= all.size()).
std::vector<KillPoint> Sample(const std::vector<KillPoint>& all, int n);

struct TaskRuns {
  std::string name;    // "Download#3"
  std::string step;    // "Download"
  int executions = 0;  // how many times its body started
};

// Per task ("<step> <dedup key>"), how many times its body ran.
std::map<std::string, TaskRuns> ExecutionsOf(const std::vector<Commit>& log);

// The tasks whose attempt a resumed run adopted (task_adopted), as
// "Download#3", in log order.
std::vector<std::string> AdoptedOf(const std::vector<Commit>& log);

// How the run ended: `run_finished`'s status ("" if it has none) and the
// tasks that failed for good, as "Download#3 (worker_lost)".
struct RunEnd {
  std::string status;
  std::vector<std::string> failed;
};
RunEnd EndOf(const std::vector<Commit>& log);

}  // namespace wizq::crashtest

#endif  // WIZQ_TOOLS_CRASHTEST_AUDIT_H_
