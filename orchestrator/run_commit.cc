// RunLoop, part 2 of 3: the commit pipeline. The main thread launches a
// commit (results, the tasks they spawn, due finally hooks and the next
// claims, sized by the adaptive look-ahead) on a helper thread and harvests
// its result; StopAndRelease commits what is left and gives tasks back.
#include <algorithm>
#include <chrono>

#include "orchestrator/run_loop.h"
#include "tasks/workflow/response.h"
#include "tasks/workflow/run_rules.h"
#include "util/crash_point.h"

namespace wizq {
namespace {

constexpr int kMaxLookaheadPerJob = 4;

bool FutureReady(const std::future<CommitResult>& f) {
  return f.valid() &&
         f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

// Takes the result of the commit in flight, if it is done (or waits).
Status RunLoop::Harvest(bool block) {
  if (!inflight_.valid() || (!block && !FutureReady(inflight_))) {
    return Status::OK();
  }
  CommitResult r = inflight_.get();
  commits_.Drain();
  if (r.status.ok() && !r.claimed.empty()) CrashPoint("run.after_claim_commit");
  if (r.status.ok() && !r.finished.empty())
    CrashPoint("run.after_result_commit");
  if (r.status.ok() && r.answers.count > 0)
    CrashPoint("gate.after_answer_commit");
  const double took = static_cast<double>(MonotonicMs() - commit_started_ms_);
  commit_ms_ = commit_ms_ == 0 ? took : 0.8 * commit_ms_ + 0.2 * took;
  if (!r.status.ok()) {
    executor_->TerminateAll(2.0);
    return r.status;
  }
  for (const std::string& note : r.notes) observer_->OnNote(note);
  run_status_ = r.run_status;
  progress_ = r.progress;
  for (size_t i = 0; i < r.finished.size(); i++) {
    const Task& t = r.finished[i];
    const bool done = t.state == TaskState::kDone;
    const int submitted = submitted_[t.id];
    submitted_.erase(t.id);
    if (done && submitted > static_cast<int>(t.children.size())) {
      observer_->OnDeduplicated(
          t, submitted - static_cast<int>(t.children.size()));
    }
    observer_->OnAttemptEnded(t, r.ends[i]);
    observer_->OnTaskFinished(t, done ? "" : t.error_reason, t.error_message,
                              t.state == TaskState::kPending,
                              done ? static_cast<int>(t.children.size()) : 0,
                              CurrentProgress());
  }
  for (const Task& t : r.reused) {
    observer_->OnTaskFinished(t, "", "", false, r.reused_spawned[t.id],
                              CurrentProgress());
  }
  for (Task& t : r.claimed) ready_.push_back(std::move(t));
  DropLostClaims(/*harvested=*/true);
  // Still running, or its result not committed yet: asked again.
  for (const auto& [id, attempt] : r.unstarted) {
    const bool pending =
        running_.count(id) != 0 ||
        std::any_of(outcomes_.begin(), outcomes_.end(),
                    [id = id](const Outcome& o) { return o.id == id; });
    if (pending) NoteBegan(id, attempt);
  }
  ReapLostOrphans(r.lost);
  // Back off after a commit that found nothing to claim, also while tasks
  // of ours run: new work comes from our own results (committed at once,
  // whatever the backoff), other workers' commits or retry timers.
  const int asked_and_missed = r.claimed.empty() ? 1 : 0;
  if (asked_and_missed) {
    poll_backoff_ms_ =
        std::clamp(poll_backoff_ms_ * 2, kIdlePollMinMs, kIdlePollMaxMs);
    next_poll_ms_ = MonotonicMs() + poll_backoff_ms_;
  } else {
    poll_backoff_ms_ = 0;
    next_poll_ms_ = 0;
  }
  return Status::OK();
}

void RunLoop::MaybeLaunchCommit() {
  if (inflight_.valid()) return;
  const int held = static_cast<int>(running_.size() + ready_.size());
  ClaimWant want;
  want.fast = FastSteps();
  want.slots = std::max(0, jobs_ - held);
  if (!want.fast.empty()) {
    want.ahead =
        std::max(0, jobs_ + QueueAhead() + lookahead_ - std::max(held, jobs_));
  }
  if (run_status_ != RunStatus::kRunning) want.slots = want.ahead = 0;
  const bool poll_due = MonotonicMs() >= next_poll_ms_;
  // On a store that several machines share, "this attempt started" is what
  // makes another host charge it (SPEC §14): told soon, not only with the
  // next result, which a long task may be far from.
  const bool mark_due = !began_.empty() && !config_.location.empty() &&
                        MonotonicMs() - began_since_ms_ >= kMarkStartedMs;
  if (outcomes_.empty() && !mark_due &&
      (want.slots + want.ahead <= 0 || !poll_due)) {
    return;
  }
  // max_concurrency is enforced when a task starts (StartReady), so that
  // tasks claimed ahead do not keep a step's running ones from starting;
  // a step may have as many claimed ahead as it may run (ClaimFilterFor).
  std::map<std::string, int> per_step;
  for (const auto& [id, t] : running_) per_step[t.type]++;
  for (const Task& t : ready_) per_step[t.type]++;
  // Claim ahead as many tasks as the slots will finish during one commit,
  // so that a slot that frees up while the next fdatasync runs has work
  // waiting; long tasks get no look-ahead at all.
  // Commit latency has a long tail (p99 several times the mean), so short
  // tasks get at least one task per slot claimed ahead, and twice what the
  // mean predicts.
  if (task_ms_ > 0) {
    const double per_commit = jobs_ * commit_ms_ / task_ms_;
    lookahead_ = per_commit < 0.5
                     ? 0
                     : std::clamp(static_cast<int>(2 * per_commit + 0.5), jobs_,
                                  kMaxLookaheadPerJob * jobs_);
  }
  commit_started_ms_ = MonotonicMs();
  if (!outcomes_.empty()) CrashPoint("run.before_result_commit");
  std::vector<Outcome> batch;
  batch.swap(outcomes_);
  want.started.swap(began_);
  for (const auto& [id, t] : running_) want.in_hand.insert(id);
  for (const Task& t : ready_) want.in_hand.insert(t.id);
  inflight_ = commits_.Launch(
      [this, b = std::move(batch), w = std::move(want), per_step]() mutable {
        return Commit(std::move(b), w, std::move(per_step));
      });
}

CommitResult RunLoop::Commit(std::vector<Outcome> outcomes,
                             const ClaimWant& want,
                             std::map<std::string, int> per_step) {
  CommitResult r;
  r.status = store_->Transact([&](StoreTxn& txn) {
    r = CommitResult();
    WIZQ_RETURN_IF_ERROR(CommitInTxn(txn, outcomes, want, per_step, &r));
    // What the main thread reports, as this batch leaves it.
    for (int64_t id : r.reused_ids) {
      r.reused.emplace_back();
      WIZQ_RETURN_IF_ERROR(txn.GetTask(id, &r.reused.back()));
    }
    for (const Outcome& o : outcomes) {
      if (o.release) continue;
      r.finished.emplace_back();
      WIZQ_RETURN_IF_ERROR(txn.GetTask(o.id, &r.finished.back()));
      r.ends.push_back(o.end);
    }
    RunInfo run;
    WIZQ_RETURN_IF_ERROR(txn.GetRun(&run));
    r.run_status = run.status;
    return ReadProgress(txn, &r.progress);
  });
  if (r.status.ok()) ForgetFlagAnswers(r.answers);
  return r;
}

Status RunLoop::CommitInTxn(StoreTxn& txn, const std::vector<Outcome>& outcomes,
                            const ClaimWant& want,
                            const std::map<std::string, int>& per_step,
                            CommitResult* r) {
  // The transaction has already put back what dead workers held; their
  // lost attempts' process trees are ended by the main thread (Harvest).
  const Reclaimed& reclaimed = txn.reclaimed();
  r->lost = reclaimed.lost;
  const size_t timed_out = reclaimed.timed_out.size();
  auto dead = [&](const std::vector<int64_t>& ids) {  // not timed out
    size_t n = 0;
    for (int64_t id : ids) {
      n += std::count(reclaimed.timed_out.begin(), reclaimed.timed_out.end(),
                      id) == 0;
    }
    return n;
  };
  const size_t reset = dead(reclaimed.reset), lost = dead(reclaimed.lost);
  if (timed_out > 0) {
    r->notes.push_back(std::to_string(timed_out) +
                       " Pool task(s) timed out: their agents ran past the "
                       "step's timeout (reason timeout)");
  }
  if (reset + lost > 0) {
    r->notes.push_back("put back " + std::to_string(reset) +
                       " task(s) of a dead worker; " + std::to_string(lost) +
                       " failed (worker_lost, no attempts left)");
  }
  WIZQ_RETURN_IF_ERROR(MarkStarted(txn, want.started, &r->unstarted));
  for (const Outcome& o : outcomes) {
    WIZQ_RETURN_IF_ERROR(CommitOutcome(txn, o, &r->notes));
    // Given back or failed: the executor may decline it from now on.
    if (!o.success) declined_.insert(o.id);
  }
  WIZQ_RETURN_IF_ERROR(SubmitDueHooks(txn, *workflow_));
  WIZQ_RETURN_IF_ERROR(ReuseInTxn(txn, r));
  WIZQ_RETURN_IF_ERROR(BindFlagAnswers(txn, &r->answers, &r->notes));
  WIZQ_RETURN_IF_ERROR(SettleRun(txn, *workflow_, ElapsedMs(),
                                 [] { CrashPoint("run.before_finish"); }));
  RunInfo run;
  WIZQ_RETURN_IF_ERROR(txn.GetRun(&run));
  if (run.status != RunStatus::kRunning) return Status::OK();
  return ClaimInTxn(txn, want, per_step, r);
}

// The executor's word (Executor::AttemptStarted) decides: a Prompt's
// question is never a started attempt, a Function's is once its body was
// called; so a reclaim charges what it charged before the fact existed.
Status RunLoop::MarkStarted(StoreTxn& txn,
                            const std::vector<std::pair<int64_t, int>>& began,
                            std::vector<std::pair<int64_t, int>>* unstarted) {
  std::vector<int64_t> ids;
  for (const auto& [id, attempt] : began) {
    if (executor_->AttemptStarted(id, attempt)) {
      ids.push_back(id);
    } else {
      unstarted->emplace_back(id, attempt);
    }
  }
  return ids.empty() ? Status::OK() : txn.MarkStarted(ids);
}

// Records one attempt's outcome: the gate's answer, or the adoption, then
// the completion (with the children) or the failure (retried after
// RetryDelayMs). A conflict (the task is no longer this worker's: its
// lease was lost, or it was put back) drops the result, with a note in
// `notes` if not null; any other error is returned.
Status RunLoop::CommitOutcome(StoreTxn& txn, const Outcome& o,
                              std::vector<std::string>* notes) {
  bool handled = false;
  WIZQ_RETURN_IF_ERROR(CommitGate(txn, o, &handled, notes));
  if (handled) return Status::OK();
  Status s;
  if (o.success) {
    Completion c;
    c.children = o.children;
    c.def_hash = o.def_hash;
    c.adopted_attempt = o.adopted_attempt;
    c.waited_ms = o.waited_ms;
    s = txn.Complete(o.id, c, nullptr);
  } else {
    Task t;
    Status found = txn.GetTask(o.id, &t);
    if (!found.ok() && !found.IsNotFound()) return found;
    Failure f;
    f.reason = o.reason;
    f.message = o.message;
    f.retryable = o.retryable;
    f.retry_delay_ms = RetryDelayMs(found.ok() ? t.attempts : 1);
    f.adopted_attempt = o.adopted_attempt;
    f.waited_ms = o.waited_ms;
    s = txn.Fail(o.id, f, nullptr);
  }
  if (!s.IsConflict()) return s;
  if (notes != nullptr)
    notes->push_back(s.message() + "; its result is dropped");
  return Status::OK();
}

// Ends every task this process runs and gives them, and the tasks claimed
// ahead, back to pending without counting their attempts. Results that
// arrived but are not committed yet are committed first. The caller
// closes the store.
Status RunLoop::StopAndRelease(const std::string& reason) {
  // SIGTERM, and SIGKILL after this grace (at once on a second Ctrl+C:
  // cli/run_signals.cc).
  executor_->TerminateAll(5.0);
  Status s = Harvest(/*block=*/true);
  for (const Task& t : ready_) running_[t.id] = t;
  for (const Outcome& o : outcomes_) running_.erase(o.id);
  std::vector<int64_t> lost;  // dead workers' tasks this commit failed
  if (s.ok()) {
    s = store_->Transact([&](StoreTxn& txn) {
      lost = txn.reclaimed().lost;
      std::vector<std::pair<int64_t, int>> unstarted;
      WIZQ_RETURN_IF_ERROR(MarkStarted(txn, began_, &unstarted));
      for (const Outcome& o : outcomes_) {
        WIZQ_RETURN_IF_ERROR(CommitOutcome(txn, o, nullptr));
      }
      for (const auto& [id, t] : running_) {
        Status rs = txn.Release(id, reason);
        if (!rs.ok() && !rs.IsConflict()) return rs;
      }
      return ReadProgress(txn, &progress_);
    });
  }
  if (s.ok()) ReapLostOrphans(lost);
  running_.clear();
  queued_.clear();
  ready_.clear();
  outcomes_.clear();
  began_.clear();
  return s;
}

}  // namespace wizq
