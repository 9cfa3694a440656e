// Reuse: incremental re-runs (SPEC §11). When a run starts fresh on a
// directory that held a previous run (archived at that start, or by
// --fresh; RunInfo::previous_run, opened with Store::OpenRun), a task whose
// step, def_hash (tasks/workflow/def_hash.h) and canonical inputs equal a task
// that completed in that previous run is not run: it completes at once with the
// previous task's recorded result, as task_completed with
// "reused":{"run_id","id"}.
//
// The recorded result. A task's response is durable in the previous run's
// events (Store::ReadEvents) as the children it spawned: task_completed lists
// them
// (`spawned`, then `deduplicated`), and task_submitted holds each one's
// step and canonical value. That is the validated response, minus what
// validation drops (element order between spawned and deduplicated
// children); no extra bytes are logged for it. Reuse rebuilds the response
// `[{"kind","value"},...]` from it and runs it through ChildrenOf against
// today's workflow: the children are re-derived, re-validated (a response
// that no longer validates makes the task run live) and deduplicated as
// usual. So the mismatch cascades only as far as the data flows: a child a
// live task spawns with the same value as before is reused again.
//
// The rules, per pending task never attempted in this run:
//   - a task forced live by --from (its step, or its match's previous id,
//     or an ancestor forced) runs live, and so does all it spawns;
//   - a task matches the previous run's completed task with the same dedup
//     key (step + canonical inputs) and a recorded def_hash equal to its
//     step's def_hash now; no def_hash (unhashable, or a wizq before
//     def_hash) never matches;
//   - a finally hook matches its owner's match's hook, and only when its
//     owner and every task beneath it (and their hooks) were reused.
// Anything else runs live. Reuse never runs a task, so it costs no claim.
//
// Not thread-safe: used on the commit thread only.
#ifndef WIZQ_ORCHESTRATOR_REUSE_H_
#define WIZQ_ORCHESTRATOR_REUSE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "queue/store.h"
#include "util/status.h"

namespace wizq {

class DefHasher;
class EventDecoder;
class Workflow;

// What a previous run completed, read from its events.
class PreviousRun {
 public:
  struct Done {
    int64_t id = 0;
    std::string type;
    std::string def_hash;  // "" if not recorded
    std::vector<int64_t> children;
    int64_t hook = 0;  // the id of its finally hook task, 0 if none
  };

  // Reads the events of `run` (a read-only store: Store::OpenRun).
  // NotFound/Corruption when they cannot be read (reuse then draws on
  // nothing, with a note).
  static Status Load(Store* run, std::unique_ptr<PreviousRun>* out);

  const std::string& run_id() const { return run_id_; }
  // The completed task with this dedup key, nullptr if none.
  const Done* ByKey(const std::string& dedup_key) const;
  const Done* Find(int64_t id) const;
  // {"kind","value"} of a task of the run, as a response element.
  bool Element(int64_t id, std::string* json) const;
  int64_t completed() const { return static_cast<int64_t>(done_.size()); }
  int64_t with_def_hash() const { return with_def_hash_; }

 private:
  // Takes one event of the run in (`where` names the run in messages).
  Status Add(EventDecoder& decoder, const EventRecord& rec,
             const std::string& where);

  struct Submitted {
    std::string type, inputs, dedup_key;
    int64_t finally_for = 0;
  };
  std::string run_id_;
  std::vector<Submitted> tasks_;  // tasks_[id - 1]
  std::map<int64_t, Done> done_;
  std::unordered_map<std::string, int64_t> by_key_;
  int64_t with_def_hash_ = 0;
};

class Reuser {
 public:
  struct Options {
    bool enabled = true;               // false: --no-reuse
    std::set<std::string> from_steps;  // --from STEP
    std::set<int64_t> from_ids;        // --from ID (previous run's ids)
  };

  // All pointers must outlive the Reuser; `previous` may be null (then
  // nothing is reused).
  Reuser(const Workflow* wf, const DefHasher* hasher,
         const PreviousRun* previous, Options options);

  // Completes from the previous run every pending task that was never
  // attempted, was not looked at before, and matches; appends their ids to
  // *reused and what is worth telling the user to *notes (a step that
  // cannot be hashed; once per step, a reused step whose script lists a
  // directory: DefHasher::DirectoryListing). Call until it reuses nothing
  // (children and hooks become due).
  Status ReuseReady(StoreTxn& txn, std::vector<int64_t>* reused,
                    std::vector<std::string>* notes);

 private:
  // Each reads the tasks it needs through `r` (GetTask); an error other
  // than NotFound is returned.
  Status Forced(StoreReads& r, const Task& t, const PreviousRun::Done* m,
                bool* forced);
  Status Match(StoreReads& r, const Task& t,
               const PreviousRun::Done** match) const;
  Status SubtreeReused(StoreReads& r, const Task& owner, bool* reused) const;
  const std::string& StepHash(const std::string& step,
                              std::vector<std::string>* notes);
  void NoteListing(const std::string& step, std::vector<std::string>* notes);

  const Workflow* wf_;
  const DefHasher* hasher_;
  const PreviousRun* prev_;
  Options options_;
  int64_t examined_ = 0;                       // highest task id decided
  std::unordered_map<int64_t, bool> forced_;   // by task id
  std::map<std::string, std::string> hashes_;  // this pass's, by step
  std::set<std::string> noted_;          // steps already reported unhashable
  std::set<std::string> listing_noted_;  // steps looked at by NoteListing
};

}  // namespace wizq

#endif  // WIZQ_ORCHESTRATOR_REUSE_H_
