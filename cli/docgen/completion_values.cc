#include "cli/docgen/completion_values.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>

#include <memory>

#include "fs/path.h"
#include "queue/store.h"
#include "tasks/exec/prompt.h"
#include "tasks/workflow/workflow.h"

namespace wizq::docgen {
namespace {

// The run in `dir`, opened read-only (no worker, no writes), or null.
std::unique_ptr<Store> OpenRun(const std::string& dir) {
  StoreOptions o;
  if (!RealPath(dir, &o.install_dir).ok()) return nullptr;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Store> store;
  RunInfo run;
  if (!Store::Open(o, &store, nullptr).ok() || !store->GetRun(&run).ok() ||
      run.run_id.empty()) {
    return nullptr;
  }
  return store;
}

// The workflow frozen into the run of `store`, or null.
std::unique_ptr<Workflow> RunWorkflow(Store& store) {
  RunInfo run;
  std::unique_ptr<Workflow> wf;
  if (!store.GetRun(&run).ok() ||
      !Workflow::Parse(run.workflow, "the run's workflow", &wf).ok()) {
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
    std::unique_ptr<Store> store = OpenRun(ctx.dir);
    if (store == nullptr || (wf = RunWorkflow(*store)) == nullptr) return {};
  }
  std::vector<Candidate> out;
  for (const Step& s : wf->steps()) {
    out.push_back(
        {s.name, std::string(ActionKindName(s.action.kind)) + " step"});
  }
  return out;
}

std::vector<Candidate> WaitingTasks(const CompletionContext& ctx) {
  std::unique_ptr<Store> store = OpenRun(ctx.dir);
  if (store == nullptr) return {};
  std::unique_ptr<Workflow> wf = RunWorkflow(*store);
  TaskFilter pending;
  pending.states = {TaskState::kPending};
  std::vector<Task> tasks;
  if (wf == nullptr || !store->ListTasks(pending, &tasks).ok()) return {};
  std::vector<Candidate> out;
  for (const Task& t : tasks) {
    if (!WaitsForAnswer(*wf, t)) continue;
    out.push_back({std::to_string(t.id) + "=",
                   t.type + ": " + PromptOf(*wf, t)->message});
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
