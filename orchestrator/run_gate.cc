// RunLoop, the human gate (SPEC §10): recording answers (typed on a
// terminal, taken from a default, given by --answer) with the results they
// produce, and pausing the run when nothing but unanswered gates is left.
#include "orchestrator/run.h"
#include "orchestrator/run_loop.h"
#include "tasks/prompt.h"
#include "util/crash_point.h"
#include "util/json_writer.h"

namespace wizq {

// A new answer is recorded in the batch of the result it produced, before
// the completion that submits the next step's task, so the answer is
// durable before the next step sees it. A task that was answered meanwhile
// (its recorded answer wins) or gave no answer goes back to pending.
Status RunLoop::CommitGate(Txn& txn, const Outcome& o, bool* handled,
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
Status RunLoop::BindFlagAnswers(Txn& txn, int* bound,
                                std::vector<std::string>* notes) {
  for (FlagAnswer& a : config_.answers) {
    if (a.id == 0 && a.step.empty()) continue;  // recorded already
    int64_t id = a.id;
    if (id == 0) {
      for (int64_t p : txn.state().pending()) {
        const Task* t = txn.state().Find(p);
        if (t->type == a.step && WaitsForAnswer(*workflow_, *t)) {
          id = p;
          break;
        }
      }
      if (id == 0) continue;  // no task of the step has reached the gate
    }
    const Task* t = txn.state().Find(id);
    if (t != nullptr && WaitsForAnswer(*workflow_, *t)) {
      WIZQ_RETURN_IF_ERROR(txn.Answer(id, a.answer_json, "flag"));
      notes->push_back("task " + std::to_string(id) + " " + t->type +
                       " answered " + a.answer_json + " (--answer)");
      (*bound)++;
    } else {
      notes->push_back("--answer " + a.arg + " is not used: task " +
                       std::to_string(id) + " no longer waits for an answer");
    }
    a.id = 0;
    a.step.clear();
  }
  return Status::OK();
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
std::vector<int64_t> RunLoop::Waiting(const QueueState& s) const {
  std::vector<int64_t> ids;
  if (!s.in_progress().empty() || !ready_.empty() || !outcomes_.empty()) {
    return ids;
  }
  for (int64_t id : s.pending()) {
    const Task& t = *s.Find(id);
    if (s.HookWaits(t)) continue;  // runs after the gates beneath its owner
    if (!WaitsHere(t)) return {};
    ids.push_back(id);
  }
  return ids;
}

// Called when nothing of ours runs and no commit is in flight. Pauses the
// run (run_paused, durable) when only unanswered gates are left, unless an
// answer arrived meanwhile (the transaction catches up first).
Status RunLoop::MaybePause(bool* paused) {
  *paused = false;
  if (Waiting(queue_->state()).empty()) return Status::OK();
  CrashPoint("gate.before_pause");
  std::vector<std::string> notes;
  int bound = 0;
  Status s = queue_->Transact([&](Txn& txn) {
    WIZQ_RETURN_IF_ERROR(BindFlagAnswers(txn, &bound, &notes));
    const std::vector<int64_t> ids = Waiting(txn.state());
    if (ids.empty() || txn.state().run().status != RunStatus::kRunning) {
      return Status::OK();
    }
    std::string waiting;
    JsonWriter w(&waiting);
    w.BeginArray();
    for (int64_t id : ids) {
      const Task* t = txn.state().Find(id);
      const PromptSpec* p = PromptOf(*workflow_, *t);
      w.BeginObject().Key("id").Int(id).Field("step", t->type);
      w.Field("mode", PromptModeName(p->mode)).Field("message", p->message);
      w.EndObject();
    }
    w.EndArray();
    return txn.Pause(waiting);
  });
  for (const std::string& n : notes) observer_->OnNote(n);
  WIZQ_RETURN_IF_ERROR(s);
  *paused = queue_->state().run().status == RunStatus::kPaused;
  if (*paused) {
    run_status_ = RunStatus::kPaused;
    CrashPoint("gate.after_pause");
  }
  return Status::OK();
}

// The run is paused: report the waiting tasks, leave, exit 4.
Status RunLoop::FinishPaused(int* exit_code) {
  std::vector<WaitingPrompt> waiting;
  const QueueState& s = queue_->state();
  for (int64_t id : s.pending()) {
    const Task* t = s.Find(id);
    const PromptSpec* p = PromptOf(*workflow_, *t);
    if (p == nullptr || !t->answer.empty()) continue;
    waiting.push_back(
        {id, t->type, PromptModeName(p->mode), p->message, p->choices});
  }
  for (const FlagAnswer& a : config_.answers) {
    if (!a.step.empty()) {
      observer_->OnNote("--answer " + a.arg + " is not used: no task of step " +
                        a.step + " reached the gate");
    }
  }
  observer_->OnPaused(waiting, CurrentProgress());
  WIZQ_RETURN_IF_ERROR(queue_->Close());
  *exit_code = kExitPaused;
  return Status::OK();
}

}  // namespace wizq
