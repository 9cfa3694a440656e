#include "tasks/exec/executor_set.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <thread>

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

bool ExecutorSet::Queues(const Action& action) const {
  Executor* m = MemberFor(action);
  return m != nullptr && m->Queues(action);
}

void ExecutorSet::SetQueueSlots(int slots) {
  for (Executor* m : members_) m->SetQueueSlots(slots);
}

void ExecutorSet::SetLocalDeadline(int64_t mono_ms) {
  for (Executor* m : members_) m->SetLocalDeadline(mono_ms);
}

void ExecutorSet::CancelQueued() {
  for (Executor* m : members_) m->CancelQueued();
}

void ExecutorSet::TakeBegun(std::vector<int64_t>* task_ids) {
  task_ids->insert(task_ids->end(), begun_.begin(), begun_.end());
  begun_.clear();
  for (Executor* m : members_) m->TakeBegun(task_ids);
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
  auto left_ms = [&]() -> int {
    if (timeout_ms < 0) return -1;
    return static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 Clock::now())
               .count()));
  };
  const size_t before = done->size();
  for (;;) {
    std::vector<Executor*> busy;
    for (Executor* m : members_) {
      if (m->running() > 0) busy.push_back(m);
    }
    if (busy.empty()) return Status::OK();
    // One busy member that wakes on the descriptor itself (or no descriptor
    // to watch): its own Wait is the whole wait.
    if (busy.size() == 1 && before == done->size() &&
        (wake_fd_ < 0 || wakes_[busy[0]])) {
      return Collect(busy[0], left_ms(), done);
    }
    for (Executor* m : busy) {
      WIZQ_RETURN_IF_ERROR(Collect(m, 0, done));
      m->TakeBegun(&begun_);
    }
    if (done->size() > before || !begun_.empty() || timeout_ms == 0) {
      return Status::OK();
    }
    const int left = left_ms();
    if (left == 0) return Status::OK();
    const int slice = left < 0 ? kSliceMs : std::min(left, kSliceMs);
    if (wake_fd_ >= 0) {
      if (SleepOrWake(slice)) return Status::OK();
    } else {
      WIZQ_RETURN_IF_ERROR(Collect(busy[0], slice, done));
      if (done->size() > before) return Status::OK();
    }
  }
}

bool ExecutorSet::SleepOrWake(int ms) const {
  struct pollfd p = {wake_fd_, POLLIN, 0};
  int n = poll(&p, 1, ms);
  if (n < 0) {  // EINTR: a signal; the caller looks again
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return false;
  }
  return n > 0 && (p.revents & POLLIN) != 0;
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
  begun_.clear();
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

namespace wizq {

bool ExecutorSet::AttemptAdoptable(int64_t task_id, int attempt) const {
  for (const Executor* m : members_) {
    if (m->AttemptAdoptable(task_id, attempt)) return true;
  }
  return false;
}

std::string ExecutorSet::AdoptionNote(int64_t task_id) const {
  auto it = owner_.find(task_id);
  return it == owner_.end() ? "" : it->second->AdoptionNote(task_id);
}

bool ExecutorSet::SetWakeFd(int fd) {
  wake_fd_ = fd;
  wakes_.clear();
  for (Executor* m : members_) wakes_[m] = m->SetWakeFd(fd);
  return true;
}

}  // namespace wizq
