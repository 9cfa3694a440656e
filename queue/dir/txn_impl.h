// The Txn of the queue-directory store. Internal.
#ifndef WIZQ_QUEUE_TXN_IMPL_H_
#define WIZQ_QUEUE_TXN_IMPL_H_

#include <set>
#include <string>

#include "queue/dir/dir_private.h"
#include "queue/dir/queue.h"

namespace wizq {

class DirQueue;
struct Task;

class TxnImpl : public Txn {
 public:
  // `reclaimed`: what the transaction's reclaim did; outlives the Txn.
  TxnImpl(DirQueue* queue, const Reclaimed* reclaimed)
      : q_(queue), reclaimed_(reclaimed) {}

  const QueueState& state() const override;
  int64_t now_ms() const override;
  const Reclaimed& reclaimed() const override { return *reclaimed_; }
  Status Submit(const NewTask& task, int64_t* id, bool* deduplicated) override;
  Status ClaimNextOfSteps(
      const std::function<bool(std::string_view type)>& step_open,
      const std::function<bool(const Task&)>& accept, int64_t* id) override;
  Status Complete(int64_t id, const std::vector<NewTask>& children,
                  std::vector<int64_t>* child_ids) override;
  Status Fail(int64_t id, std::string_view reason, std::string_view message,
              bool retryable, int64_t retry_delay_ms,
              bool* will_retry) override;
  Status Release(int64_t id, std::string_view reason) override;
  Status FinishRun(RunStatus status, int64_t duration_ms) override;
  Status CompleteWith(int64_t id, const std::vector<NewTask>& children,
                      const CompletionInfo& info,
                      std::vector<int64_t>* child_ids) override;
  Status Answer(int64_t id, std::string_view answer_json,
                std::string_view source) override;
  Status Pause(std::string_view waiting_json) override;
  Status ClaimLeased(const std::function<bool(const Task&)>& accept,
                     const LeaseTerms& terms, int64_t* id,
                     std::string* token) override;
  Status RenewLease(int64_t id, std::string_view token, int64_t lease_ms,
                    int64_t* expires_ms) override;
  Status UseLease(int64_t id, std::string_view token) override;
  Status NoteAdopted(int64_t id, int attempt, int64_t waited_ms) override;
  Status MarkStarted(const std::vector<int64_t>& ids) override;

 private:
  Status RequireHeld(int64_t id, const Task** task) const;
  std::string_view Actor() const;
  bool Ready(const Task& t, int64_t now) const;
  // The lowest-id pending task ready at `now` that `accept` takes (0: none).
  int64_t NextReady(const std::function<bool(const Task&)>& accept,
                    int64_t now) const;
  // The same among the pending tasks of the types `step_open` takes, found
  // through QueueState::pending_by_type.
  int64_t NextReadyOfSteps(
      const std::function<bool(std::string_view type)>& step_open,
      const std::function<bool(const Task&)>& accept, int64_t now) const;
  // The task_claimed of this worker's next attempt of task `id`.
  TaskClaimed ClaimOf(int64_t id) const;
  Status CheckLease(int64_t id, std::string_view token,
                    const Task** task) const;
  DirQueue* q_;
  const Reclaimed* reclaimed_;
  std::set<int64_t> leased_;  // ids whose lease UseLease accepted
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_TXN_IMPL_H_
