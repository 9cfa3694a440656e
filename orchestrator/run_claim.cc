// RunLoop: what a commit claims, as data the store evaluates (ClaimFilter,
// queue/store.h): the steps this process's executor runs, the room each
// step has, the tasks the executor declines by id, and for the tasks
// claimed ahead of the slots an id bound.
#include <algorithm>
#include <climits>

#include "orchestrator/run_loop.h"

namespace wizq {
namespace {

// How many tasks of a step a worker may hold per slot of the step's
// max_concurrency: to start (running), one; to claim (running and claimed
// ahead), two: a task claimed ahead for each slot, to start when it frees.
constexpr int kStartPerSlot = 1;
constexpr int kClaimPerSlot = 2;

// The room rule: how many more tasks of `step` a worker holding
// per_step[step] may take, per_slot * max_concurrency - held (at least 0);
// -1 when the step is unlimited (StepOptions::kUnlimited).
int64_t RoomLeft(const std::map<std::string, int>& per_step, const Step& step,
                 int per_slot) {
  if (step.options.max_concurrency == StepOptions::kUnlimited) return -1;
  auto it = per_step.find(step.name);
  const int64_t held = it == per_step.end() ? 0 : it->second;
  const int64_t limit =
      static_cast<int64_t>(per_slot) * step.options.max_concurrency;
  return std::max<int64_t>(0, limit - held);
}

}  // namespace

bool RunLoop::StepHasRoom(const Task& t,
                          const std::map<std::string, int>& per_step) const {
  const Step* step = workflow_->FindStep(t.type);
  if (step == nullptr) return true;  // fails with a reason when started
  return RoomLeft(per_step, *step, kStartPerSlot) != 0;
}

bool RunLoop::Claimable(const Task& t) const {
  const Step* step = nullptr;
  const Action* action = ActionFor(t, &step);
  if (action == nullptr) return true;  // claimed, then failed with a reason
  return executor_->CanRunTask(t, *action);  // e.g. not agents' work
}

// Executor::CanRunTask, asked per step of a task that stands for any: its
// own tasks (then, if not, answered ones: a gate nobody here can ask) and
// its hooks. A task the executor declines by id is one whose attempt ended
// here (declined_, noted by CommitInTxn): it stays out while declined.
Status RunLoop::ClaimFilterFor(StoreTxn& txn,
                               const std::map<std::string, int>& per_step,
                               ClaimFilter* f) {
  for (const Step& step : workflow_->steps()) {
    Task own;
    own.type = step.name;
    if (Claimable(own)) {
      f->steps.insert(step.name);
    } else {
      own.answer = "null";
      if (Claimable(own)) {
        f->steps.insert(step.name);
        f->answered_only.insert(step.name);
      }
    }
    Task hook;
    hook.type = step.name;
    hook.origin = Origin::kFinally;
    if (Claimable(hook)) f->hook_steps.insert(step.name);
    const int64_t room = RoomLeft(per_step, step, kClaimPerSlot);
    if (room >= 0) {
      f->room[step.name] = static_cast<int>(std::min<int64_t>(room, INT_MAX));
    }
  }
  for (auto it = declined_.begin(); it != declined_.end();) {
    Task t;
    Status s = txn.GetTask(*it, &t);
    if (!s.ok() && !s.IsNotFound()) return s;
    if (s.ok() && t.state == TaskState::kPending && !Claimable(t)) {
      f->skip_ids.insert(*it++);
    } else {
      it = declined_.erase(it);
    }
  }
  return Status::OK();
}

// Each step's first pending task stands for it (a step without room, or a
// fast one, does not count): the lowest id of those that are claimable.
// One query per step at most, each for the first pending task of the
// steps not looked at yet.
Status RunLoop::AheadBound(StoreTxn& txn, const ClaimWant& want,
                           const ClaimFilter& f, int64_t* below) {
  *below = 0;
  TaskFilter first;
  first.states = {TaskState::kPending};
  first.limit = 1;
  for (const Step& step : workflow_->steps()) {
    auto room = f.room.find(step.name);
    if (want.fast.count(step.name) != 0 ||
        (room != f.room.end() && room->second == 0)) {
      continue;
    }
    first.steps.push_back(step.name);
  }
  std::vector<Task> got;
  while (!first.steps.empty()) {
    WIZQ_RETURN_IF_ERROR(txn.ListTasks(first, &got));
    if (got.empty()) return Status::OK();
    const Task& t = got[0];
    if (Claimable(t)) {
      *below = t.id;
      return Status::OK();
    }
    first.steps.erase(
        std::find(first.steps.begin(), first.steps.end(), t.type));
    first.after_id = t.id;
  }
  return Status::OK();
}

Status RunLoop::ClaimInTxn(StoreTxn& txn, const ClaimWant& want,
                           const std::map<std::string, int>& per_step,
                           CommitResult* r) {
  ClaimFilter f;
  WIZQ_RETURN_IF_ERROR(ClaimFilterFor(txn, per_step, &f));
  f.skip_ids.insert(want.in_hand.begin(), want.in_hand.end());
  auto claim = [&](const ClaimFilter& filter) {
    const size_t before = r->claimed.size();
    WIZQ_RETURN_IF_ERROR(txn.Claim(filter, &r->claimed));
    for (size_t i = before; i < r->claimed.size(); i++) {
      auto room = f.room.find(r->claimed[i].type);
      if (room != f.room.end()) room->second--;
    }
    return Status::OK();
  };
  f.max = want.slots;
  if (f.max > 0) WIZQ_RETURN_IF_ERROR(claim(f));
  if (want.ahead == 0) return Status::OK();
  // Beyond the slots: tasks of fast steps only, and none that would
  // overtake a claimable task of another step (it waits for a slot).
  ClaimFilter ahead = f;
  WIZQ_RETURN_IF_ERROR(AheadBound(txn, want, f, &ahead.below_id));
  for (auto* steps : {&ahead.steps, &ahead.hook_steps}) {
    for (auto it = steps->begin(); it != steps->end();) {
      it = want.fast.count(*it) != 0 ? std::next(it) : steps->erase(it);
    }
  }
  ahead.max = want.ahead;
  return claim(ahead);
}

}  // namespace wizq
