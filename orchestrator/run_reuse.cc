// RunLoop, part 4: incremental re-runs (orchestrator/reuse.h). At open,
// the previous run this one replaced is read; each commit completes from
// it what matches, before claiming; a live task's completion records its
// step's def_hash (tasks/workflow/def_hash.h).
#include <cctype>

#include "orchestrator/reuse.h"
#include "orchestrator/run_loop.h"
#include "tasks/workflow/def_hash.h"
#include "tasks/workflow/run_rules.h"
#include "util/crash_point.h"

namespace wizq {
namespace {

bool IsId(const std::string& s) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s) {
    if (!isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

void RunLoop::OpenReuse(const RunInfo& run) {
  hasher_ = std::make_unique<DefHasher>(*workflow_, config_.env);
  const std::string& prev_dir = run.previous_run;
  // What the run chose when it started (recorded with it), and what this
  // command adds.
  Reuser::Options opts;
  opts.enabled = !config_.no_reuse && !run.no_reuse;
  std::vector<std::string> from = run.from;
  from.insert(from.end(), config_.from.begin(), config_.from.end());
  for (const std::string& f : from) {
    if (IsId(f)) {
      opts.from_ids.insert(std::stoll(f));
    } else {
      opts.from_steps.insert(f);
    }
  }
  if (prev_dir.empty()) {
    if (!config_.from.empty()) {
      observer_->OnNote("--from: there is no previous run to reuse from");
    }
  } else if (opts.enabled) {
    RunRef ref;
    ref.key = prev_dir;
    ref.archived = true;
    std::unique_ptr<Store> archived;
    Status s = store_->OpenRun(ref, &archived);
    if (s.ok()) s = PreviousRun::Load(archived.get(), &previous_);
    if (!s.ok()) {
      observer_->OnNote(
          "nothing is reused: the previous run's log cannot "
          "be read (" +
          s.message() + ")");
      previous_.reset();
    } else if (previous_->with_def_hash() == 0) {
      observer_->OnNote("nothing is reused: the previous run (" + prev_dir +
                        ") " +
                        (previous_->completed() == 0
                             ? "completed no task"
                             : "was recorded before def_hash existed"));
      previous_.reset();
    } else {
      for (int64_t id : opts.from_ids) {
        if (previous_->Find(id) == nullptr) {
          observer_->OnNote("--from " + std::to_string(id) +
                            ": the previous run has no completed task " +
                            std::to_string(id));
        }
      }
    }
  }
  reuser_ = std::make_unique<Reuser>(workflow_.get(), hasher_.get(),
                                     previous_.get(), std::move(opts));
}

// Reuses what matches, then submits the hooks that became due, until
// nothing more is reused: a whole unchanged run completes in one batch.
Status RunLoop::ReuseInTxn(StoreTxn& txn, CommitResult* r) {
  r->reused_ids.clear();
  r->reused_spawned.clear();
  if (!reuser_) return Status::OK();
  RunInfo run;
  WIZQ_RETURN_IF_ERROR(txn.GetRun(&run));
  if (run.status != RunStatus::kRunning) return Status::OK();
  while (true) {
    const size_t before = r->reused_ids.size();
    WIZQ_RETURN_IF_ERROR(reuser_->ReuseReady(txn, &r->reused_ids, &r->notes));
    if (r->reused_ids.size() == before) break;
    for (size_t i = before; i < r->reused_ids.size(); i++) {
      Task t;
      WIZQ_RETURN_IF_ERROR(txn.GetTask(r->reused_ids[i], &t));
      r->reused_spawned[t.id] = static_cast<int>(t.children.size());
    }
    WIZQ_RETURN_IF_ERROR(SubmitDueHooks(txn, *workflow_));
  }
  if (!r->reused_ids.empty()) CrashPoint("reuse.before_commit");
  return Status::OK();
}

// The def_hash a live completion records: the step's at the attempt's
// start, if the step's files still hash the same now (a file changed
// while the task ran leaves the completion without one: never reused).
std::string RunLoop::FinishedDefHash(const Task& task) {
  auto it = start_hash_.find(task.id);
  if (it == start_hash_.end() || !hasher_) return "";
  std::string at_start = std::move(it->second);
  start_hash_.erase(it);
  return at_start == hasher_->Hash(task.type, nullptr) ? at_start : "";
}

}  // namespace wizq
