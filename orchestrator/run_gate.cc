// RunLoop, the human gate (SPEC §10): recording answers (typed on a
// terminal, taken from a default, given by --answer) with the results they
// produce, and pausing the run when nothing but unanswered gates is left.
#include "orchestrator/run.h"
#include "orchestrator/run_loop.h"
#include "tasks/exec/prompt.h"
#include "util/crash_point.h"
#include "util/json_writer.h"

namespace wizq {

// A new answer is recorded in the batch of the result it produced, before
// the completion that submits the next step's task, so the answer is
// durable before the next step sees it. A task that was answered meanwhile
// (its recorded answer wins) or gave no answer goes back to pending.
Status RunLoop::CommitGate(StoreTxn& txn, const Outcome& o, bool* handled,
                           std::vector<std::string>* notes) {
  *handled = false;
  if (!o.release && o.answer_source.empty()) return Status::OK();
  if (!o.release) {
    Status s = txn.Answer(o.id, o.answer_json, o.answer_source);
    if (s.ok()) {
      if (notes && o.answer_source == "default") {
        notes->push_back("task " + std::to_string(o.id) +
                         " took its default answer " + o.answer_json);
      }
      return Status::OK();
    }
    if (!s.IsConflict()) return s;
    if (notes) notes->push_back(s.message() + "; the recorded answer is used");
  }
  *handled = true;
  Status s = txn.Release(o.id, "unanswered");
  return s.IsConflict() ? Status::OK() : s;
}

// --answer flags: an answer by id is recorded as soon as its task waits; an
// answer by step name binds to the first task of that step that waits.
Status RunLoop::BindFlagAnswers(StoreTxn& txn, BoundAnswers* bound,
                                std::vector<std::string>* notes) {
  for (size_t i = 0; i < config_.answers.size(); i++) {
    const FlagAnswer& a = config_.answers[i];
    if (a.id == 0 && a.step.empty()) continue;  // recorded already
    int64_t id = a.id;
    if (id == 0) {
      TaskFilter of_step;
      of_step.states = {TaskState::kPending};
      of_step.steps = {a.step};
      std::vector<Task> pending;
      WIZQ_RETURN_IF_ERROR(txn.ListTasks(of_step, &pending));
      for (const Task& t : pending) {
        if (WaitsForAnswer(*workflow_, t)) {
          id = t.id;
          break;
        }
      }
      if (id == 0) continue;  // no task of the step has reached the gate
    }
    Task t;
    Status found = txn.GetTask(id, &t);
    if (!found.ok() && !found.IsNotFound()) return found;
    if (found.ok() && WaitsForAnswer(*workflow_, t)) {
      WIZQ_RETURN_IF_ERROR(txn.Answer(id, a.answer_json, "flag"));
      notes->push_back("task " + std::to_string(id) + " " + t.type +
                       " answered " + a.answer_json + " (--answer)");
      bound->count++;
    } else {
      notes->push_back("--answer " + a.arg + " is not used: task " +
                       std::to_string(id) + " no longer waits for an answer");
    }
    bound->used.push_back(i);
  }
  return Status::OK();
}

// Once the transaction that bound them committed (a store may run it
// again: nothing is forgotten before).
void RunLoop::ForgetFlagAnswers(const BoundAnswers& bound) {
  for (size_t i : bound.used) {
    config_.answers[i].id = 0;
    config_.answers[i].step.clear();
  }
}

// A task that waits for an answer no one here can give.
bool RunLoop::WaitsHere(const Task& t) const {
  if (!WaitsForAnswer(*workflow_, t)) return false;
  const Step* step = nullptr;
  const Action* action = ActionFor(t, &step);
  return action != nullptr && !executor_->CanRunTask(t, *action);
}

// The waiting tasks, when they are all that is left: nothing runs, and
// every pending task waits for an answer. Empty otherwise.
Status RunLoop::Waiting(StoreReads& r, std::vector<Task>* waiting) const {
  waiting->clear();
  RunCounts counts;
  WIZQ_RETURN_IF_ERROR(r.Counts(&counts));
  if (counts.of(TaskState::kInProgress) > 0 || !ready_.empty() ||
      !outcomes_.empty()) {
    return Status::OK();
  }
  TaskFilter pending;
  pending.states = {TaskState::kPending};
  pending.limit = kPage;
  std::vector<Task> tasks;
  do {
    WIZQ_RETURN_IF_ERROR(r.ListTasks(pending, &tasks));
    for (const Task& t : tasks) {
      bool hook_waits = false;
      WIZQ_RETURN_IF_ERROR(HookWaits(r, t, &hook_waits));
      if (hook_waits) continue;  // runs after the gates beneath its owner
      if (!WaitsHere(t)) {
        waiting->clear();
        return Status::OK();
      }
      waiting->push_back(t);
    }
    if (!tasks.empty()) pending.after_id = tasks.back().id;
  } while (static_cast<int64_t>(tasks.size()) == kPage);
  return Status::OK();
}

// Called when nothing of ours runs and no commit is in flight. Pauses the
// run (run_paused, durable) when only unanswered gates are left, unless an
// answer arrived meanwhile (the transaction sees it).
Status RunLoop::MaybePause(bool* paused) {
  *paused = false;
  std::vector<Task> waiting;
  WIZQ_RETURN_IF_ERROR(Waiting(*store_, &waiting));
  if (waiting.empty()) return Status::OK();
  CrashPoint("gate.before_pause");
  std::vector<std::string> notes;
  BoundAnswers bound;
  RunStatus status = RunStatus::kRunning;
  Status s = store_->Transact([&](StoreTxn& txn) {
    notes.clear();
    bound = BoundAnswers();
    WIZQ_RETURN_IF_ERROR(BindFlagAnswers(txn, &bound, &notes));
    RunInfo run;
    WIZQ_RETURN_IF_ERROR(txn.GetRun(&run));
    status = run.status;
    std::vector<Task> ids;
    WIZQ_RETURN_IF_ERROR(Waiting(txn, &ids));
    if (ids.empty() || run.status != RunStatus::kRunning) return Status::OK();
    std::string json;
    JsonWriter w(&json);
    w.BeginArray();
    for (const Task& t : ids) {
      const PromptSpec* p = PromptOf(*workflow_, t);
      w.BeginObject().Key("id").Int(t.id).Field("step", t.type);
      w.Field("mode", PromptModeName(p->mode)).Field("message", p->message);
      w.EndObject();
    }
    w.EndArray();
    WIZQ_RETURN_IF_ERROR(txn.Pause(json));
    status = RunStatus::kPaused;
    return Status::OK();
  });
  for (const std::string& n : notes) observer_->OnNote(n);
  WIZQ_RETURN_IF_ERROR(s);
  ForgetFlagAnswers(bound);
  *paused = status == RunStatus::kPaused;
  if (*paused) {
    run_status_ = RunStatus::kPaused;
    CrashPoint("gate.after_pause");
  }
  return Status::OK();
}

// The run is paused: report the waiting tasks, leave, exit 4.
Status RunLoop::FinishPaused(int* exit_code) {
  std::vector<WaitingPrompt> waiting;
  TaskFilter unanswered;
  unanswered.states = {TaskState::kPending};
  unanswered.unanswered = true;
  std::vector<Task> pending;
  WIZQ_RETURN_IF_ERROR(store_->ListTasks(unanswered, &pending));
  for (const Task& t : pending) {
    const PromptSpec* p = PromptOf(*workflow_, t);
    if (p == nullptr) continue;
    waiting.push_back(
        {t.id, t.type, PromptModeName(p->mode), p->message, p->choices});
  }
  for (const FlagAnswer& a : config_.answers) {
    if (!a.step.empty()) {
      observer_->OnNote("--answer " + a.arg + " is not used: no task of step " +
                        a.step + " reached the gate");
    }
  }
  observer_->OnPaused(waiting, CurrentProgress());
  WIZQ_RETURN_IF_ERROR(store_->Close());
  *exit_code = kExitPaused;
  return Status::OK();
}

}  // namespace wizq
