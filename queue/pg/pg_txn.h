// PgStoreTxn: the StoreTxn of the PostgreSQL store (queue/store.h), and
// the contract's reads over one session. Internal to queue/pg/.
//
// Each verb checks what the directory store's Txn checks (queue/
// txn_impl.cc) against the rows it reads FOR UPDATE, and stages the same
// events through PgWork, which applies them to the rows. A worker's claim
// is fenced twice: the verb finds the row still held in the attempt and
// with the token this worker claimed it with (PgStore::Held), and the
// row's write matches only that state, attempt and token.
#ifndef WIZQ_QUEUE_PG_PG_TXN_H_
#define WIZQ_QUEUE_PG_PG_TXN_H_

#include <map>
#include <set>
#include <string>

#include "queue/pg/pg_store.h"
#include "queue/pg/pg_work.h"
#include "queue/store.h"

namespace wizq {

// The contract's reads, shared by PgStore (committed state) and
// PgStoreTxn (inside its transaction). `quoted`: the schema.
Status PgReadRun(PgConn* conn, const std::string& quoted, int64_t run,
                 PgRun* out);
Status PgReadTask(PgConn* conn, const std::string& quoted, int64_t run,
                  int64_t id, Task* task);
Status PgListTasks(PgConn* conn, const std::string& quoted, int64_t run,
                   const TaskFilter& f, std::vector<Task>* out);
void PgCountsOf(const PgRun& run, RunCounts* counts);

class PgStoreTxn : public StoreTxn {
 public:
  PgStoreTxn(PgStore* store, PgWork* work, const Reclaimed* reclaimed,
             std::string quoted)
      : store_(store),
        w_(work),
        reclaimed_(reclaimed),
        quoted_(std::move(quoted)) {}

  int64_t now_ms() const override { return w_->now_ms(); }
  int64_t lease_from_mono_ms() const override {
    return store_->run_held_since_mono_ms();
  }
  const Reclaimed& reclaimed() const override { return *reclaimed_; }
  Status GetRun(RunInfo* run) override;
  Status GetTask(int64_t id, Task* task) override;
  Status ListTasks(const TaskFilter& f, std::vector<Task>* out) override;
  Status Counts(RunCounts* counts) override;

  Status Submit(const NewTask& task, int64_t* id, bool* deduplicated) override;
  Status Claim(const ClaimFilter& f, std::vector<Task>* claimed) override;
  Status Complete(int64_t id, const Completion& c,
                  std::vector<int64_t>* child_ids) override;
  Status Fail(int64_t id, const Failure& f, bool* will_retry) override;
  Status Release(int64_t id, std::string_view reason) override;
  Status ActAs(int64_t id, std::string_view token) override;
  Status RenewLease(int64_t id, std::string_view token, int64_t lease_ms,
                    int64_t* expires_ms) override;
  Status MarkStarted(const std::vector<int64_t>& ids) override;
  Status Answer(int64_t id, std::string_view answer_json,
                std::string_view source) override;
  Status Pause(std::string_view waiting_json) override;
  Status DueHooks(size_t max, std::vector<Task>* owners) override;
  Status FinishIfSettled(int64_t duration_ms, RunStatus* status) override;

  // Once committed: the claims this transaction made and ended, into the
  // worker's record of what it holds.
  void Merge(std::map<int64_t, PgStore::Held>* held) const;

 private:
  std::string_view Actor() const;
  Status RequireHeld(int64_t id, PgTask** task);
  Status CheckLease(int64_t id, std::string_view token, PgTask** task);
  Status NoteAdopted(int64_t id, int attempt, int64_t waited_ms);
  // Task `id` leaves this worker's hands (completed, failed, given back).
  void End(int64_t id);
  // One query of at most `limit` claimable tasks after `after`, claimed
  // in id order while their step has room; *more: it filled its limit.
  Status ClaimBatch(const ClaimFilter& f, int64_t limit,
                    std::map<std::string, int>* room, int64_t* after,
                    std::vector<Task>* claimed, bool* more);
  Status StageClaim(const ClaimFilter& f, PgTask* row);

  PgStore* store_;
  PgWork* w_;
  const Reclaimed* reclaimed_;
  std::string quoted_;
  std::set<int64_t> acting_;  // ids whose lease ActAs accepted
  // Claimed (and still held), and ended, by this transaction.
  std::map<int64_t, PgStore::Held> claimed_;
  std::set<int64_t> ended_;
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_PG_PG_TXN_H_
