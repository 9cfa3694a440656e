// DirStore: opening, transactions and the contract's verbs over DirQueue.
#include "queue/dir/dir_store.h"

#include <time.h>

#include <algorithm>
#include <chrono>

#include "audit/log.h"
#include "fs/env.h"
#include "queue/claim_holder.h"
#include "queue/dir/dir_open.h"
#include "queue/dir/state.h"
#include "queue/dir/workers.h"

namespace wizq {
namespace {

// The contract's transaction over one DirQueue Txn.
class DirStoreTxn : public StoreTxn {
 public:
  explicit DirStoreTxn(Txn* txn) : t_(txn) {}

  int64_t now_ms() const override { return t_->now_ms(); }
  const Reclaimed& reclaimed() const override { return t_->reclaimed(); }
  Status GetRun(RunInfo* run) override {
    *run = t_->state().run();
    return Status::OK();
  }
  Status GetTask(int64_t id, Task* task) override {
    return GetTaskFrom(t_->state(), id, task);
  }
  Status ListTasks(const TaskFilter& f, std::vector<Task>* out) override {
    ListTasksFrom(t_->state(), f, out);
    return Status::OK();
  }
  Status Counts(RunCounts* counts) override {
    CountsFrom(t_->state(), counts);
    return Status::OK();
  }
  Status Submit(const NewTask& task, int64_t* id, bool* dup) override {
    return t_->Submit(task, id, dup);
  }
  Status Claim(const ClaimFilter& f, std::vector<Task>* claimed) override;
  Status Complete(int64_t id, const Completion& c,
                  std::vector<int64_t>* child_ids) override {
    if (c.adopted_attempt > 0) {
      WIZQ_RETURN_IF_ERROR(t_->NoteAdopted(id, c.adopted_attempt, c.waited_ms));
    }
    Txn::CompletionInfo info;
    info.def_hash = c.def_hash;
    info.reused_run_id = c.reused.run_id;
    info.reused_id = c.reused_id;
    return t_->CompleteWith(id, c.children, info, child_ids);
  }
  Status Fail(int64_t id, const Failure& f, bool* will_retry) override {
    if (f.adopted_attempt > 0) {
      WIZQ_RETURN_IF_ERROR(t_->NoteAdopted(id, f.adopted_attempt, f.waited_ms));
    }
    return t_->Fail(id, f.reason, f.message, f.retryable, f.retry_delay_ms,
                    will_retry);
  }
  Status Release(int64_t id, std::string_view reason) override {
    return t_->Release(id, reason);
  }
  Status ActAs(int64_t id, std::string_view token) override {
    return t_->UseLease(id, token);
  }
  Status RenewLease(int64_t id, std::string_view token, int64_t lease_ms,
                    int64_t* expires_ms) override {
    return t_->RenewLease(id, token, lease_ms, expires_ms);
  }
  Status MarkStarted(const std::vector<int64_t>& ids) override {
    return t_->MarkStarted(ids);
  }
  Status Answer(int64_t id, std::string_view answer_json,
                std::string_view source) override {
    return t_->Answer(id, answer_json, source);
  }
  Status Pause(std::string_view waiting_json) override {
    return t_->Pause(waiting_json);
  }
  Status DueHooks(size_t max, std::vector<Task>* owners) override {
    const QueueState& s = t_->state();
    for (int64_t id : s.hooks_due()) {
      if (owners->size() >= max) break;
      owners->push_back(*s.Find(id));
    }
    return Status::OK();
  }
  Status FinishIfSettled(int64_t duration_ms, RunStatus* status) override {
    const QueueState& s = t_->state();
    if (s.run().status == RunStatus::kRunning && s.AllSettled()) {
      WIZQ_RETURN_IF_ERROR(t_->FinishRun(s.count(TaskState::kFailed) > 0
                                             ? RunStatus::kFailed
                                             : RunStatus::kCompleted,
                                         duration_ms));
    }
    *status = t_->state().run().status;
    return Status::OK();
  }

 private:
  using StepOpen = std::function<bool(std::string_view)>;
  using Accept = std::function<bool(const Task&)>;
  Status ClaimOneLeased(const ClaimFilter& f, const StepOpen& step_open,
                        const Accept& accept, int64_t* id, std::string* token);

  Txn* const t_;
};

bool Has(const std::set<std::string>& set, std::string_view s) {
  return set.find(std::string(s)) != set.end();
}

// A lease's terms hold the step's lease and timeout, so the task is found
// first (a probe that accepts nothing, in claim order), then claimed by
// its id.
Status DirStoreTxn::ClaimOneLeased(const ClaimFilter& f,
                                   const StepOpen& step_open,
                                   const Accept& accept, int64_t* id,
                                   std::string* token) {
  Txn::LeaseTerms terms;
  terms.lease_ms = f.lease_ms;
  terms.agent = f.agent;
  int64_t want = 0;
  std::string type;
  WIZQ_RETURN_IF_ERROR(t_->ClaimLeased(
      [&](const Task& t) {
        if (want == 0 && step_open(t.type) && accept(t)) {
          want = t.id;
          type = t.type;
        }
        return false;
      },
      terms, id, token));
  if (want == 0) return Status::OK();
  auto lease = f.step_lease_ms.find(type);
  if (lease != f.step_lease_ms.end()) terms.lease_ms = lease->second;
  auto timeout = f.timeouts.find(type);
  if (timeout != f.timeouts.end()) {
    terms.timeout_ms = timeout->second.ms;
    terms.retry_on_timeout = timeout->second.retry;
  }
  return t_->ClaimLeased([want](const Task& t) { return t.id == want; }, terms,
                         id, token);
}

Status DirStoreTxn::Claim(const ClaimFilter& f, std::vector<Task>* claimed) {
  std::map<std::string, int> room = f.room;
  auto step_open = [&](std::string_view type) {
    if (!Has(f.steps, type) && !Has(f.hook_steps, type)) return false;
    auto it = room.find(std::string(type));
    return it == room.end() || it->second > 0;
  };
  auto accept = [&](const Task& t) {
    if (f.below_id != 0 && t.id >= f.below_id) return false;
    if (f.skip_ids.count(t.id) != 0) return false;
    if (t.origin == Origin::kFinally) return Has(f.hook_steps, t.type);
    if (!Has(f.steps, t.type)) return false;
    return !Has(f.answered_only, t.type) || !t.answer.empty();
  };
  for (int i = 0; i < f.max; i++) {
    int64_t id = 0;
    std::string token;
    if (f.lease) {
      WIZQ_RETURN_IF_ERROR(ClaimOneLeased(f, step_open, accept, &id, &token));
    } else {
      WIZQ_RETURN_IF_ERROR(t_->ClaimNextOfSteps(step_open, accept, &id));
    }
    if (id == 0) break;
    const Task* t = t_->state().Find(id);
    auto it = room.find(t->type);
    if (it != room.end()) it->second--;
    claimed->push_back(*t);
  }
  return Status::OK();
}

void SleepMs(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

}  // namespace

DirStore::DirStore(const StoreOptions& options, Env* env,
                   std::unique_ptr<Queue> queue)
    : options_(options), env_(env), queue_(std::move(queue)) {}

Status DirStore::Open(const StoreOptions& o, std::unique_ptr<Store>* out,
                      OpenReport* report) {
  QueueOptions q;
  q.env = o.env;
  q.install_dir = o.install_dir;
  q.run_id = o.run_id;
  q.workflow_json = o.workflow_json;
  q.entry_input = o.entry_input;
  q.initial_tasks = o.initial_tasks;
  q.import = o.import;
  q.mode = o.mode;
  q.wizq_version = o.wizq_version;
  q.attempt_started = o.local.started;
  q.attempt_adoptable = o.local.adoptable;
  q.end_orphan = o.local.end_orphan;
  q.retry_failed = o.retry_failed;
  q.retry_budget = o.retry_budget;
  q.no_reuse = o.no_reuse;
  q.from = o.from;
  q.leases_only = o.leases_only;
  q.reclaim_worker_claims = o.reclaim_worker_claims;
  q.host = o.host;
  Env* env = o.env ? o.env : Env::Posix();
  // A reader notes the log before reading the state: an archive after
  // that shows as another log in WhileCurrent. A writer, after its open
  // (which may have archived and started afresh).
  const std::string wizard = WizardDir(o.install_dir);
  Identity before;
  if (o.mode == OpenMode::kReadOnly) {
    WIZQ_RETURN_IF_ERROR(IdentityOf(env, wizard, &before));
  }
  std::unique_ptr<Queue> queue;
  WIZQ_RETURN_IF_ERROR(Queue::Open(q, &queue, report));
  if (o.mode != OpenMode::kReadOnly) {
    WIZQ_RETURN_IF_ERROR(IdentityOf(env, wizard, &before));
  }
  std::unique_ptr<DirStore> store(new DirStore(o, env, std::move(queue)));
  store->opened_ = before;
  *out = std::move(store);
  return Status::OK();
}

Status DirStore::Close() { return queue_->Close(); }

// Reads see what every process committed: the log's tail is read first
// (a read-only store answers from the state it opened).
Status DirStore::CatchUp() {
  return options_.mode == OpenMode::kReadOnly ? Status::OK()
                                              : queue_->Refresh();
}

Status DirStore::Transact(const std::function<Status(StoreTxn&)>& fn) {
  return queue_->Transact([&](Txn& txn) {
    DirStoreTxn t(&txn);
    return fn(t);
  });
}

Status DirStore::GetRun(RunInfo* run) {
  WIZQ_RETURN_IF_ERROR(CatchUp());
  *run = queue_->state().run();
  return Status::OK();
}

Status DirStore::GetTask(int64_t id, Task* task) {
  WIZQ_RETURN_IF_ERROR(CatchUp());
  return GetTaskFrom(queue_->state(), id, task);
}

Status DirStore::ListTasks(const TaskFilter& f, std::vector<Task>* out) {
  WIZQ_RETURN_IF_ERROR(CatchUp());
  ListTasksFrom(queue_->state(), f, out);
  return Status::OK();
}

Status DirStore::Counts(RunCounts* counts) {
  WIZQ_RETURN_IF_ERROR(CatchUp());
  CountsFrom(queue_->state(), counts);
  return Status::OK();
}

Status DirStore::ReadEvents(int64_t after_seq, size_t max,
                            std::vector<EventRecord>* events) {
  const bool from_cursor = after_seq >= cursor_seq_ && cursor_seq_ > 0;
  int64_t end_seq = 0;
  uint64_t end_offset = 0;
  WIZQ_RETURN_IF_ERROR(ReadDirEvents(env_, queue_->wizard_dir(), after_seq, max,
                                     from_cursor ? cursor_offset_ : 0, events,
                                     &end_seq, &end_offset));
  if (end_seq > cursor_seq_) {
    cursor_seq_ = end_seq;
    cursor_offset_ = end_offset;
  }
  return Status::OK();
}

// The log is polled: a commit is one pwrite, which readers see at once;
// the poll interval grows from 2 ms to 50 ms while nothing changes.
Status DirStore::WaitForChange(int64_t after_seq, int timeout_ms,
                               int64_t* seq) {
  // The monotonic clock, in microseconds: never back before the timeout.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(timeout_ms);
  int sleep_ms = 2;
  while (true) {
    WIZQ_RETURN_IF_ERROR(queue_->Refresh());
    *seq = queue_->state().last_seq();
    if (*seq > after_seq) return Status::OK();
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      *seq = after_seq;
      return Status::OK();
    }
    const int64_t left_us =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - now)
            .count();
    SleepMs(
        static_cast<int>(std::min<int64_t>(sleep_ms, (left_us + 999) / 1000)));
    sleep_ms = std::min(sleep_ms * 2, 50);
  }
}

Status DirStore::Workers(std::vector<WorkerInfo>* workers) {
  return ProbeDirWorkers(env_, queue_->wizard_dir(), workers);
}

Status ProbeDirWorkers(Env* env, const std::string& wizard_dir,
                       std::vector<WorkerInfo>* workers) {
  workers->clear();
  std::vector<WorkerEntry> entries;
  WIZQ_RETURN_IF_ERROR(ProbeWorkers(env, wizard_dir + "/workers", &entries));
  for (const WorkerEntry& e : entries) {
    WorkerInfo w;
    w.id = e.id;
    w.run_id = e.run_id;
    w.pid = e.pid;
    w.started_ms = e.started_ms;
    w.alive = e.alive;
    workers->push_back(std::move(w));
  }
  return Status::OK();
}

Status DirStore::ListRuns(std::vector<RunRef>* runs) {
  const RunInfo& current = queue_->state().run();
  return ListDirRuns(env_, queue_->wizard_dir(),
                     queue_->state().started() ? &current : nullptr, runs);
}

Status DirStore::OpenRun(const RunRef& run, std::unique_ptr<Store>* out) {
  return OpenDirRun(env_, queue_->wizard_dir(), run, out);
}

bool DirStore::Identity::operator==(const Identity& o) const {
  for (int i = 0; i < 2; i++) {
    if (exists[i] != o.exists[i] || device[i] != o.device[i] ||
        inode[i] != o.inode[i]) {
      return false;
    }
  }
  return true;
}

Status DirStore::IdentityOf(Env* env, const std::string& wizard_dir,
                            Identity* id) {
  const std::string paths[2] = {wizard_dir + "/audit.jsonl",
                                wizard_dir + "/tasks"};
  for (int i = 0; i < 2; i++) {
    FileInfo info;
    Status s = env->GetFileInfo(paths[i], &info);
    if (!s.ok() && !s.IsNotFound()) return s;
    id->exists[i] = s.ok();
    id->device[i] = s.ok() ? info.device : 0;
    id->inode[i] = s.ok() ? info.inode : 0;
  }
  return Status::OK();
}

// The directory lock keeps an archive out; an archive renames the log and
// `tasks/` away (DirQueue::ArchiveRun), which the comparison sees.
Status DirStore::WhileCurrent(const std::function<Status()>& fn) {
  std::unique_ptr<FileLock> lock;
  WIZQ_RETURN_IF_ERROR(
      env_->LockFile(queue_->wizard_dir() + "/lock", /*wait=*/true, &lock));
  Identity now;
  WIZQ_RETURN_IF_ERROR(IdentityOf(env_, queue_->wizard_dir(), &now));
  if (!(now == opened_)) {
    return Status::Conflict("the run in " + options_.install_dir +
                            " was archived or replaced since it was opened");
  }
  return fn();
}

std::string DirAuditLog(const std::vector<EventRecord>& events) {
  std::string out;
  for (const EventRecord& e : events) {
    std::string line = e.line;
    if (FrameCommittedLine(&line)) out += line;
  }
  return out;
}

Status OpenDirStore(const StoreOptions& options, std::unique_ptr<Store>* out,
                    OpenReport* report) {
  return DirStore::Open(options, out, report);
}

}  // namespace wizq
