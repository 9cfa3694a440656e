#include "queue/history.h"

#include <map>
#include <variant>

#include "queue/events.h"
#include "queue/store.h"

namespace wizq {
namespace {

const size_t kPageEvents = 1 << 16;

// Folds events into a RunHistory, one at a time, in log order.
class HistoryBuilder {
 public:
  explicit HistoryBuilder(RunHistory* h) : h_(h) {}

  void Add(const EventHeader& hdr, const Event& e) {
    seq_ = hdr.seq;
    ts_ = hdr.ts;
    if (h_->started_ms == 0) h_->started_ms = ts_;
    h_->last_ms = ts_;
    std::visit([this](const auto& ev) { On(ev); }, e);
  }

 private:
  void Seen(std::string_view worker) {
    auto it = worker_index_.find(std::string(worker));
    if (it != worker_index_.end()) h_->workers[it->second].last_seen_ms = ts_;
  }
  void Lost(std::string_view worker) {
    auto it = worker_index_.find(std::string(worker));
    if (it == worker_index_.end()) return;
    WorkerRecord& w = h_->workers[it->second];
    if (w.lost || w.left_ms != 0) return;
    w.lost = true;
    w.lost_seq = seq_;
    w.lost_ms = ts_;
  }
  void Milestone(std::string event, std::string detail) {
    h_->milestones.push_back({seq_, ts_, std::move(event), std::move(detail)});
  }
  // The open attempt of a task, or nullptr.
  AttemptRecord* Open(int64_t id) {
    auto it = open_.find(id);
    return it == open_.end() ? nullptr : &h_->attempts[it->second];
  }
  void End(int64_t id, const char* outcome, std::string_view reason,
           std::string_view message) {
    AttemptRecord* a = Open(id);
    if (a == nullptr) return;
    a->end_seq = seq_;
    a->end_ms = ts_;
    a->outcome = outcome;
    a->reason = reason;
    a->message = message;
    open_.erase(id);
  }

  // A kind the history does not show (unknown, lease renewals, starts,
  // dedups, and any new kind until it gets an overload below).
  template <typename E>
  void On(const E&) {}
  void On(const RunStarted& e) {
    h_->run_id = e.run_id;
    Milestone("run_started", "pid " + std::to_string(e.pid));
  }
  void On(const RunResumed& e) {
    // Only resumed when no other worker lives: every worker still in is
    // dead.
    for (WorkerRecord& w : h_->workers) {
      if (w.left_ms == 0 && !w.lost) {
        w.lost = true;
        w.lost_seq = seq_;
        w.lost_ms = ts_;
      }
    }
    Milestone("run_resumed", std::to_string(e.tasks_reset) + " reset, " +
                                 std::to_string(e.tasks_lost) + " lost, " +
                                 std::to_string(e.tasks_adopted) + " adopted");
  }
  void On(const QueueArchived& e) {
    Milestone("queue_archived", std::string(e.reason));
  }
  void On(const WorkerJoined& e) {
    WorkerRecord w;
    w.id = e.worker;
    w.pid = e.pid;
    w.joined_seq = seq_;
    w.joined_ms = w.last_seen_ms = ts_;
    worker_index_[w.id] = h_->workers.size();
    h_->workers.push_back(w);
  }
  void On(const WorkerLeft& e) {
    auto it = worker_index_.find(std::string(e.worker));
    if (it == worker_index_.end()) return;
    h_->workers[it->second].left_ms = h_->workers[it->second].last_seen_ms =
        ts_;
  }
  void On(const TaskSubmitted& e) {
    tasks_[e.id] = {std::string(e.type), std::string(e.inputs)};
  }
  void On(const TaskClaimed& e) {
    End(e.id, "reset", "reclaimed", "");  // defensive: a claim ends the last
    AttemptRecord a;
    a.task_id = e.id;
    a.step = e.type;
    a.value = tasks_[e.id].second;
    a.attempt = e.attempt;
    a.worker = e.lease.empty() ? std::string(e.worker) : "lease";
    a.agent = e.agent;
    a.claim_seq = seq_;
    a.start_ms = ts_;
    open_[e.id] = h_->attempts.size();
    h_->attempts.push_back(std::move(a));
    Seen(e.worker);
  }
  void On(const TaskCompleted& e) {
    Seen(e.worker);
    if (e.reused_id != 0 && Open(e.id) == nullptr) {
      AttemptRecord a;
      a.task_id = e.id;
      a.step = tasks_[e.id].first;
      a.value = tasks_[e.id].second;
      a.claim_seq = a.end_seq = seq_;
      a.start_ms = a.end_ms = ts_;
      a.outcome = "completed";
      a.reason = "reused";
      a.reused = true;
      h_->attempts.push_back(std::move(a));
      return;
    }
    End(e.id, "completed", "", "");
  }
  void On(const TaskFailed& e) {
    if (e.reason == "worker_lost") {
      Lost(e.worker);
    } else {
      Seen(e.worker);
    }
    AttemptRecord* a = Open(e.id);
    if (a != nullptr) a->will_retry = e.will_retry;
    End(e.id, "failed", e.reason, e.message);
  }
  void On(const TaskReset& e) {
    if (e.reason == "worker_lost") {
      Lost(e.worker);
    } else {
      Seen(e.worker);
    }
    AttemptRecord* a = Open(e.id);
    if (a != nullptr) {
      a->refunded = e.refund;
      a->never_started = e.never_started;
    }
    End(e.id, "reset", e.reason, e.message);
  }
  void On(const RunFinished& e) {
    Milestone("run_finished", std::string(e.status) + ", " +
                                  std::to_string(e.tasks_done) + " done, " +
                                  std::to_string(e.tasks_failed) + " failed");
  }
  void On(const TaskRetried& e) {
    Milestone("task_retried", "task " + std::to_string(e.id) + " (" +
                                  std::string(e.error) + ")");
  }
  void On(const RunImported& e) {
    Milestone("run_imported", std::string(e.source));
  }
  void On(const TaskAnswered& e) {
    Milestone("task_answered", "task " + std::to_string(e.id) + " (" +
                                   std::string(e.source) + ")");
  }
  void On(const RunPaused&) { Milestone("run_paused", "waiting for a person"); }
  void On(const TaskAdopted& e) {
    Seen(e.worker);
    AttemptRecord* a = Open(e.id);
    if (a == nullptr) return;
    a->adopted = true;
    a->adopted_waited_ms = e.waited_ms;
  }

  RunHistory* h_;
  int64_t seq_ = 0;
  int64_t ts_ = 0;
  std::map<int64_t, std::pair<std::string, std::string>> tasks_;  // type, in
  std::map<int64_t, size_t> open_;  // task -> its open attempt's index
  std::map<std::string, size_t> worker_index_;
};

}  // namespace

const WorkerRecord* RunHistory::FindWorker(const std::string& id) const {
  for (const WorkerRecord& w : workers) {
    if (w.id == id) return &w;
  }
  return nullptr;
}

Status LoadRunHistory(Store& store, RunHistory* history) {
  *history = RunHistory();
  HistoryBuilder builder(history);
  EventDecoder decoder;
  std::vector<EventRecord> page;
  int64_t seq = 0;
  do {
    // A page bounds what is held at once; each line is folded and dropped.
    WIZQ_RETURN_IF_ERROR(store.ReadEvents(seq, kPageEvents, &page));
    for (const EventRecord& rec : page) {
      EventHeader header;
      Event event;
      Status s = decoder.Decode(rec.line, &header, &event);
      if (!s.ok()) {
        return s.Annotate("event seq " + std::to_string(rec.seq) + " of " +
                          store.DisplayLocation());
      }
      builder.Add(header, event);
      seq = rec.seq;
    }
  } while (page.size() == kPageEvents);
  return Status::OK();
}

}  // namespace wizq
