// RunHistory: what happened to a run, read back from its events
// (Store::ReadEvents, decoded by queue/events.h) — every attempt (who ran
// it, from when to when, how it ended), every worker (when it joined, left
// or was lost) and the run's milestones (started, resumed, paused,
// finished). It is what `wizq log --table` and `wizq report` show; it
// changes nothing and reads only committed events.
//
// A worker is "lost" (crashed) when the log says so: a task it held is put
// back or failed with reason worker_lost, or a run_resumed follows its
// worker_joined without a worker_left in between (a run is only resumed
// when no other worker lives). `lost_seq` is the first such event.
#ifndef WIZQ_QUEUE_HISTORY_H_
#define WIZQ_QUEUE_HISTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace wizq {

class Store;

// One attempt of one task: from its task_claimed to the event that ended
// the claim.
struct AttemptRecord {
  int64_t task_id = 0;
  std::string step;   // the task's type
  std::string value;  // the task's inputs, JSON text
  int64_t attempt = 0;
  std::string worker;  // the claiming worker, or "lease" for an agent's lease
  std::string agent;   // the agent's name, for a lease
  int64_t claim_seq = 0;
  int64_t start_ms = 0;
  int64_t end_seq = 0;  // 0 while the claim is still held
  int64_t end_ms = 0;
  // How it ended: "completed", "failed" (task_failed), "reset" (put back:
  // task_reset), "running" (still held at the end of the log).
  std::string outcome = "running";
  std::string reason;   // of a failure or reset: exit_code, worker_lost, ...
  std::string message;  // its message
  bool will_retry = false;  // a failure that goes back to pending
  bool refunded = false;    // a reset that does not count the attempt
  // A reset of an attempt that never began (claimed ahead or queued when
  // its worker died): nothing ran, nothing was lost.
  bool never_started = false;
  bool adopted = false;  // this claim adopted a lost worker's attempt
  int64_t adopted_waited_ms = 0;
  bool reused = false;  // completed from the previous run, never ran
};

struct WorkerRecord {
  std::string id;
  int64_t pid = 0;
  int64_t joined_seq = 0;
  int64_t joined_ms = 0;
  int64_t left_ms = 0;  // worker_left; 0 if it never left
  bool lost = false;    // crashed (see the top of this file)
  int64_t lost_seq = 0;
  int64_t lost_ms = 0;       // when the loss was recorded
  int64_t last_seen_ms = 0;  // its last event: about when it died
};

// A run-level event: run_started, run_resumed, run_paused, run_finished,
// run_imported, queue_archived, task_retried.
struct RunMilestone {
  int64_t seq = 0;
  int64_t ts = 0;
  std::string event;
  std::string detail;  // a short human summary of its fields
};

struct RunHistory {
  std::string run_id;
  int64_t started_ms = 0;
  int64_t last_ms = 0;                  // the last event's time
  std::vector<AttemptRecord> attempts;  // in claim order
  std::vector<WorkerRecord> workers;    // in join order
  std::vector<RunMilestone> milestones;

  // The worker of that id, or nullptr.
  const WorkerRecord* FindWorker(const std::string& id) const;
};

// Reads every event of the run `store` holds (from seq 1) into *history.
// Corruption if an event does not decode.
Status LoadRunHistory(Store& store, RunHistory* history);

}  // namespace wizq

#endif  // WIZQ_QUEUE_HISTORY_H_
