#include "tasks/workflow/prompt_answers.h"

#include <cctype>
#include <functional>
#include <vector>

#include "queue/store.h"
#include "tasks/exec/prompt.h"
#include "tasks/workflow/json_messages.h"
#include "tasks/workflow/workflow.h"

namespace wizq {
namespace {

bool IsId(const std::string& s) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

Status Bad(const std::string& arg, const std::string& why) {
  return Status::InvalidArgument("--answer " + arg + ": " + why);
}

std::string WhyNotWaiting(const Task& t) {
  if (!t.answer.empty()) {
    return "task " + std::to_string(t.id) + " was already answered " +
           t.answer + " (" + t.answer_source +
           "); a recorded answer is never replaced (to ask again, run the "
           "step anew: wizq run ... --fresh --from " +
           t.type + ")";
  }
  if (t.state == TaskState::kInProgress) {
    return "task " + std::to_string(t.id) +
           " is being asked on a terminal right now (worker " + t.claimed_by +
           "); answer it there";
  }
  return "task " + std::to_string(t.id) + " does not wait for an answer (" +
         TaskStateName(t.state) + ")";
}

// `t` does not wait: OK (a->recorded) only if `value` is the answer it
// already has.
Status SameAnswer(const PromptSpec& prompt, const Task& t,
                  const std::string& value, FlagAnswer* a) {
  std::string answer;
  if (!t.answer.empty() && AnswerFromFlag(prompt, value, &answer).ok() &&
      answer == t.answer) {
    a->answer_json = answer;
    a->id = 0;
    a->recorded = true;
    return Status::OK();
  }
  return Bad(a->arg, WhyNotWaiting(t));
}

// The run's tasks as ResolveOne needs them (a run that has not started
// has none).
struct RunTasks {
  // The task `id`, or NotFound.
  std::function<Status(int64_t id, Task* t)> find;
  // Every task of step `step`, in id order.
  std::function<Status(const std::string& step, std::vector<Task>* ts)> of_step;
};

// Resolves one TASK=VALUE into *a.
Status ResolveOne(const Workflow& wf, const RunTasks& run,
                  const std::string& arg, bool allow_unbound, FlagAnswer* a) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Bad(arg, "expected TASK=VALUE (a task id or a step name)");
  }
  const std::string target = arg.substr(0, eq);
  const std::string value = arg.substr(eq + 1);
  a->arg = arg;
  const PromptSpec* prompt = nullptr;
  if (IsId(target)) {
    const int64_t id = std::stoll(target);
    Task t;
    Status found = run.find(id, &t);
    if (found.IsNotFound()) return Bad(arg, "the run has no task " + target);
    WIZQ_RETURN_IF_ERROR(found);
    prompt = PromptOf(wf, t);
    if (prompt == nullptr) {
      return Bad(arg,
                 "task " + target + " (" + t.type + ") is not a Prompt task");
    }
    a->id = id;
    if (!WaitsForAnswer(wf, t)) return SameAnswer(*prompt, t, value, a);
  } else {
    const Step* step = wf.FindStep(target);
    if (step == nullptr || step->action.kind != Action::Kind::kPrompt) {
      return Bad(arg, "no Prompt step or task id " + Quote(target));
    }
    prompt = step->action.prompt.get();
    std::vector<Task> of_step;
    WIZQ_RETURN_IF_ERROR(run.of_step(target, &of_step));
    std::vector<const Task*> waiting;
    const Task* answered = nullptr;
    for (const Task& t : of_step) {
      if (PromptOf(wf, t) == nullptr) continue;
      if (WaitsForAnswer(wf, t)) waiting.push_back(&t);
      if (!t.answer.empty() && answered == nullptr) answered = &t;
    }
    if (waiting.size() > 1) {
      std::string ids;
      for (const Task* t : waiting) {
        ids += (ids.empty() ? "" : ", ") + std::to_string(t->id);
      }
      return Bad(arg, "step " + target + " has " +
                          std::to_string(waiting.size()) + " tasks waiting (" +
                          ids + "); answer each by id");
    }
    if (waiting.size() == 1) {
      a->id = waiting[0]->id;
    } else if (answered != nullptr) {
      return SameAnswer(*prompt, *answered, value, a);
    } else if (!allow_unbound) {
      return Bad(arg, "no task of step " + target + " waits for an answer");
    } else {
      a->step = target;
    }
  }
  if (a->recorded) return Status::OK();
  Status s = AnswerFromFlag(*prompt, value, &a->answer_json);
  return s.ok() ? s : Bad(arg, s.message());
}

Status ResolveAll(const Workflow& workflow, const RunTasks& run,
                  const std::vector<std::string>& args, bool allow_unbound,
                  std::vector<FlagAnswer>* out) {
  std::vector<FlagAnswer> result;
  for (const std::string& arg : args) {
    FlagAnswer a;
    WIZQ_RETURN_IF_ERROR(ResolveOne(workflow, run, arg, allow_unbound, &a));
    bool duplicate = false;
    if (a.recorded) continue;  // nothing to do
    for (const FlagAnswer& b : result) {
      if (a.id != b.id || a.step != b.step) continue;
      if (a.answer_json != b.answer_json) {
        return Status::InvalidArgument("--answer " + b.arg + " and --answer " +
                                       a.arg +
                                       " give one task two different answers");
      }
      duplicate = true;
    }
    if (!duplicate) result.push_back(std::move(a));
  }
  *out = std::move(result);
  return Status::OK();
}

}  // namespace

Status ResolveAnswers(const Workflow& workflow, StoreReads* run,
                      const std::vector<std::string>& args, bool allow_unbound,
                      std::vector<FlagAnswer>* out) {
  RunTasks tasks;
  tasks.find = [run](int64_t id, Task* t) {
    return run ? run->GetTask(id, t) : Status::NotFound("no run");
  };
  tasks.of_step = [run](const std::string& step, std::vector<Task>* ts) {
    if (run == nullptr) return Status::OK();
    TaskFilter f;
    f.steps = {step};
    return run->ListTasks(f, ts);
  };
  return ResolveAll(workflow, tasks, args, allow_unbound, out);
}

}  // namespace wizq
