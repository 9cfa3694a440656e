#include "cli/docgen/completion_values.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>

#include <memory>

#include "queue/queue.h"
#include "tasks/prompt.h"
#include "tasks/workflow.h"

namespace wizq::docgen {
namespace {

const char* ActionKindName(Action::Kind kind) {
  switch (kind) {
    case Action::Kind::kCommand:
      return "Command step";
    case Action::Kind::kPool:
      return "Pool step";
    case Action::Kind::kPrompt:
      return "Prompt step";
    case Action::Kind::kFunction:
      return "Function step";
  }
  return "step";
}

// The run in `dir`, opened read-only (no worker, no writes), or null.
std::unique_ptr<Queue> OpenRun(const std::string& dir) {
  char buf[PATH_MAX];
  if (realpath(dir.c_str(), buf) == nullptr) return nullptr;
  QueueOptions o;
  o.install_dir = buf;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Queue> q;
  if (!Queue::Open(o, &q, nullptr).ok() || !q->state().started()) {
    return nullptr;
  }
  return q;
}

// The workflow frozen into the run of `q`, or null.
std::unique_ptr<Workflow> RunWorkflow(const Queue& q) {
  std::unique_ptr<Workflow> wf;
  if (!Workflow::Parse(q.state().run().workflow, "the run's workflow", &wf)
           .ok()) {
    return nullptr;
  }
  return wf;
}

}  // namespace

std::vector<Candidate> StepNames(const CompletionContext& ctx) {
  std::unique_ptr<Workflow> wf;
  if (!ctx.workflow.empty()) {
    if (!Workflow::Load(ctx.workflow, &wf).ok()) return {};
  } else {
    std::unique_ptr<Queue> q = OpenRun(ctx.dir);
    if (q == nullptr || (wf = RunWorkflow(*q)) == nullptr) return {};
  }
  std::vector<Candidate> out;
  for (const Step& s : wf->steps()) {
    out.push_back({s.name, ActionKindName(s.action.kind)});
  }
  return out;
}

std::vector<Candidate> WaitingTasks(const CompletionContext& ctx) {
  std::unique_ptr<Queue> q = OpenRun(ctx.dir);
  if (q == nullptr) return {};
  std::unique_ptr<Workflow> wf = RunWorkflow(*q);
  if (wf == nullptr) return {};
  std::vector<Candidate> out;
  for (int64_t id : q->state().pending()) {
    const Task& t = *q->state().Find(id);
    if (!WaitsForAnswer(*wf, t)) continue;
    out.push_back(
        {std::to_string(id) + "=", t.type + ": " + PromptOf(*wf, t)->message});
  }
  return out;
}

void ArmDeadline(int ms) {
  signal(SIGALRM, SIG_DFL);
  struct itimerval t = {};
  t.it_value.tv_sec = ms / 1000;
  t.it_value.tv_usec = (ms % 1000) * 1000;
  setitimer(ITIMER_REAL, &t, nullptr);
}

void DisarmDeadline() {
  struct itimerval t = {};
  setitimer(ITIMER_REAL, &t, nullptr);
}

}  // namespace wizq::docgen
