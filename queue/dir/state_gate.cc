// QueueState: applying the human gate's events (SPEC §10).
#include "queue/dir/state.h"
#include "queue/events.h"
#include "util/canonical_json.h"

namespace wizq {

// An answer is recorded once, for a task that has not finished: a recorded
// answer is never replaced (a "no" never becomes a "yes", Nika #1067).
Status QueueState::Apply(const TaskAnswered& e, int64_t ts) {
  Task* t = MutableFind(e.id);
  if (t == nullptr) {
    return Status::Corruption("answer of unknown task " + std::to_string(e.id));
  }
  if (t->terminal()) {
    return Status::Corruption("answer of task " + std::to_string(e.id) +
                              " in state " + TaskStateName(t->state));
  }
  if (!t->answer.empty()) {
    return Status::Corruption("a second answer for task " +
                              std::to_string(e.id));
  }
  if (e.answer.empty() || !IsValidJson(e.answer)) {
    return Status::Corruption("the answer is not valid JSON");
  }
  if (e.source.empty()) return Status::Corruption("an answer needs a source");
  t->answer = e.answer;
  t->answer_source = e.source;
  t->updated_ms = ts;
  return Status::OK();
}

Status QueueState::Apply(const RunPaused&, int64_t) {
  if (run_.status != RunStatus::kRunning && run_.status != RunStatus::kPaused) {
    return Status::Corruption(std::string("run_paused of a run that is ") +
                              RunStatusName(run_.status));
  }
  run_.status = RunStatus::kPaused;
  return Status::OK();
}

}  // namespace wizq
