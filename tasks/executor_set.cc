#include "tasks/executor_set.h"

#include <algorithm>
#include <chrono>

namespace wizq {

Executor* ExecutorSet::MemberFor(const Action& action) const {
  for (Executor* m : members_) {
    if (m->CanRun(action)) return m;
  }
  return nullptr;
}

bool ExecutorSet::CanRun(const Action& action) const {
  return MemberFor(action) != nullptr;
}

bool ExecutorSet::CanRunTask(const Task& task, const Action& action) const {
  Executor* m = MemberFor(action);
  return m != nullptr && m->CanRunTask(task, action);
}

Status ExecutorSet::Start(const Attempt& attempt) {
  Executor* m = attempt.action ? MemberFor(*attempt.action) : nullptr;
  if (m == nullptr) {
    return Status::InvalidArgument("no executor can run task " +
                                   std::to_string(attempt.task_id) + " (" +
                                   attempt.step + ")");
  }
  WIZQ_RETURN_IF_ERROR(m->Start(attempt));
  owner_[attempt.task_id] = m;
  return Status::OK();
}

Status ExecutorSet::Collect(Executor* member, int timeout_ms, Done* done) {
  const size_t before = done->size();
  WIZQ_RETURN_IF_ERROR(member->Wait(timeout_ms, done));
  for (size_t i = before; i < done->size(); i++) owner_.erase((*done)[i].first);
  return Status::OK();
}

Status ExecutorSet::Wait(int timeout_ms, Done* done) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const size_t before = done->size();
  for (;;) {
    std::vector<Executor*> busy;
    for (Executor* m : members_) {
      if (m->running() > 0) busy.push_back(m);
    }
    if (busy.empty()) return Status::OK();
    if (busy.size() == 1 && before == done->size()) {
      int left = timeout_ms;
      if (timeout_ms > 0) {
        left = static_cast<int>(std::max<int64_t>(
            0, std::chrono::duration_cast<std::chrono::milliseconds>(
                   deadline - Clock::now())
                   .count()));
      }
      return Collect(busy[0], left, done);
    }
    for (Executor* m : busy) WIZQ_RETURN_IF_ERROR(Collect(m, 0, done));
    if (done->size() > before || timeout_ms == 0) return Status::OK();
    int slice = kSliceMs;
    if (timeout_ms > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - Clock::now())
                            .count();
      if (left <= 0) return Status::OK();
      slice = static_cast<int>(std::min<int64_t>(slice, left));
    }
    WIZQ_RETURN_IF_ERROR(Collect(busy[0], slice, done));
    if (done->size() > before) return Status::OK();
  }
}

size_t ExecutorSet::running() const {
  size_t n = 0;
  for (const Executor* m : members_) n += m->running();
  return n;
}

bool ExecutorSet::FindByProcess(int pid, int64_t* task_id) const {
  for (const Executor* m : members_) {
    if (m->FindByProcess(pid, task_id)) return true;
  }
  return false;
}

void ExecutorSet::TerminateAll(double grace_seconds) {
  for (Executor* m : members_) m->TerminateAll(grace_seconds);
  owner_.clear();
}

bool ExecutorSet::AttemptStarted(int64_t task_id, int attempt) const {
  for (const Executor* m : members_) {
    if (m->AttemptStarted(task_id, attempt)) return true;
  }
  return false;
}

Status ExecutorSet::ReapOrphans(int64_t task_id) {
  Status first;
  for (Executor* m : members_) {
    Status s = m->ReapOrphans(task_id);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

}  // namespace wizq
