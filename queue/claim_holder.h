// ClaimHolder: who holds a claimed (in_progress) task, and how the store
// knows the holder is gone.
//
// Two kinds:
//  - kWorker: a live worker process, named by its worker id. It proves it
//    is alive by holding its worker lock for its whole life (the
//    queue-directory store: `workers/<id>`, queue/dir/workers.h). It is lost
//    when that lock can be taken or its process is gone.
//  - kLease: a token with an expiry (an agent in another process tree,
//    SPEC §9). It is lost once now_ms > expires_ms (wall-clock ms, so every
//    process agrees). Taken by Txn::ClaimLeased, renewed by RenewLease.
//
// Shared by every store (queue/dir/reclaim.cc, queue/pg/).
//
// A lost holder's tasks are put back (pending, or failed with worker_lost
// when no attempt is left) by the next transaction of any process, before
// its callback runs (Queue::Transact, Txn::reclaimed()). So is a leased
// attempt past its step's timeout (AttemptTimedOut), failed with reason
// timeout whether or not its holder still heartbeats.
#ifndef WIZQ_QUEUE_CLAIM_HOLDER_H_
#define WIZQ_QUEUE_CLAIM_HOLDER_H_

#include <cstdint>
#include <string>

#include "queue/task.h"

namespace wizq {

struct ClaimHolder {
  enum class Kind { kWorker, kLease };

  Kind kind = Kind::kWorker;
  std::string worker;      // kWorker: the worker id
  std::string token;       // kLease: the lease token
  int64_t expires_ms = 0;  // kLease: lost once now_ms > expires_ms

  static ClaimHolder Worker(std::string id) {
    ClaimHolder h;
    h.worker = std::move(id);
    return h;
  }
  static ClaimHolder Lease(std::string token, int64_t expires_ms) {
    ClaimHolder h;
    h.kind = Kind::kLease;
    h.token = std::move(token);
    h.expires_ms = expires_ms;
    return h;
  }
  // A lease's liveness needs only the clock; a worker's needs the store.
  bool LeaseLapsed(int64_t now_ms) const {
    return kind == Kind::kLease && now_ms > expires_ms;
  }
};

// Whether `t`'s leased attempt has run past its time limit (Task::
// deadline_ms) by `now_ms`, before its lease lapsed: it is then failed
// with reason timeout, not put back as a lost holder's.
inline bool AttemptTimedOut(const Task& t, int64_t now_ms) {
  return t.deadline_ms > 0 && now_ms > t.deadline_ms &&
         t.deadline_ms <= t.lease_expires_ms;
}

// Who holds `t` (meaningful while it is in_progress): its lease if it has
// one, else the worker named by `claimed_by`.
inline ClaimHolder HolderOf(const Task& t) {
  if (!t.lease_token.empty()) {
    return ClaimHolder::Lease(t.lease_token, t.lease_expires_ms);
  }
  return ClaimHolder::Worker(t.claimed_by);
}

}  // namespace wizq

#endif  // WIZQ_QUEUE_CLAIM_HOLDER_H_
