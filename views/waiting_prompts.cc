// `wizq status`'s list of the tasks that wait for an answer
// (views/status.h).
#include <cstdio>
#include <memory>

#include "queue/store.h"
#include "tasks/exec/prompt.h"
#include "tasks/workflow/workflow.h"
#include "views/status.h"

namespace wizq {

void PrintWaitingPrompts(StoreReads& run, const RunPlace& place) {
  RunInfo info;
  std::unique_ptr<Workflow> wf;
  if (!run.GetRun(&info).ok() ||
      !Workflow::Parse(info.workflow, "the run's workflow", &wf).ok())
    return;
  TaskFilter waiting;  // pending Prompt tasks without an answer
  waiting.states = {TaskState::kPending};
  for (const Step& step : wf->steps()) {
    if (step.action.kind == Action::Kind::kPrompt) {
      waiting.steps.push_back(step.name);
    }
  }
  waiting.unanswered = true;
  std::vector<Task> tasks;
  if (waiting.steps.empty() || !run.ListTasks(waiting, &tasks).ok()) return;
  bool first = true;
  for (const Task& t : tasks) {
    if (!WaitsForAnswer(*wf, t)) continue;
    const PromptSpec* p = PromptOf(*wf, t);
    if (first) std::printf("\nwaiting for an answer:\n");
    first = false;
    const std::string where = place.CommandOptions(info.run_id);
    std::printf(
        "  #%lld %s (%s): %s\n    answer: wizq answer --dir %s%s %lld=VALUE\n",
        static_cast<long long>(t.id), t.type.c_str(), PromptModeName(p->mode),
        p->message.c_str(), place.dir.c_str(), where.c_str(),
        static_cast<long long>(t.id));
  }
}

}  // namespace wizq
