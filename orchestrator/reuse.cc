#include "orchestrator/reuse.h"

#include <algorithm>

#include "queue/events.h"
#include "tasks/workflow/def_hash.h"
#include "tasks/workflow/response.h"
#include "tasks/workflow/workflow.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

constexpr size_t kEventBatch = 4096;  // events per ReadEvents of Load

}  // namespace

// --- PreviousRun -------------------------------------------------------------

Status PreviousRun::Load(Store* store, std::unique_ptr<PreviousRun>* out) {
  const std::string where = store->DisplayLocation();
  auto run = std::make_unique<PreviousRun>();
  EventDecoder decoder;
  std::vector<EventRecord> records;
  int64_t after = 0;
  do {
    WIZQ_RETURN_IF_ERROR(store->ReadEvents(after, kEventBatch, &records));
    for (const EventRecord& rec : records) {
      WIZQ_RETURN_IF_ERROR(run->Add(decoder, rec, where));
      after = rec.seq;
    }
  } while (!records.empty());
  // A hook submitted before its owner completed cannot be; one submitted
  // after is linked above.
  *out = std::move(run);
  return Status::OK();
}

Status PreviousRun::Add(EventDecoder& decoder, const EventRecord& rec,
                        const std::string& where) {
  EventHeader h;
  Event e;
  WIZQ_RETURN_IF_ERROR(decoder.Decode(rec.line, &h, &e));
  if (const auto* st = std::get_if<RunStarted>(&e)) {
    run_id_ = st->run_id;
  } else if (const auto* sub = std::get_if<TaskSubmitted>(&e)) {
    if (sub->id != static_cast<int64_t>(tasks_.size()) + 1) {
      return Status::Corruption(where + ": task ids out of order at seq " +
                                std::to_string(h.seq));
    }
    tasks_.push_back({std::string(sub->type), std::string(sub->inputs),
                      std::string(sub->dedup_key), sub->finally_for});
    if (sub->finally_for > 0) {
      auto it = done_.find(sub->finally_for);
      if (it != done_.end()) it->second.hook = sub->id;
    }
  } else if (const auto* c = std::get_if<TaskCompleted>(&e)) {
    if (c->id < 1 || c->id > static_cast<int64_t>(tasks_.size())) {
      return Status::Corruption(where + ": completion of unknown task " +
                                std::to_string(c->id));
    }
    const Submitted& t = tasks_[c->id - 1];
    Done d;
    d.id = c->id;
    d.type = t.type;
    d.def_hash = c->def_hash;
    d.children = c->spawned;
    d.children.insert(d.children.end(), c->deduplicated.begin(),
                      c->deduplicated.end());
    if (!d.def_hash.empty()) with_def_hash_++;
    // An empty key (an imported duplicate, queue/dir/import.cc) matches
    // nothing.
    if (t.finally_for == 0 && !t.dedup_key.empty()) {
      by_key_[t.dedup_key] = c->id;
    }
    done_[c->id] = std::move(d);
  }
  return Status::OK();
}

const PreviousRun::Done* PreviousRun::ByKey(const std::string& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : Find(it->second);
}

const PreviousRun::Done* PreviousRun::Find(int64_t id) const {
  auto it = done_.find(id);
  return it == done_.end() ? nullptr : &it->second;
}

bool PreviousRun::Element(int64_t id, std::string* json) const {
  if (id < 1 || id > static_cast<int64_t>(tasks_.size())) return false;
  const Submitted& t = tasks_[id - 1];
  json->clear();
  JsonWriter w(json);
  w.BeginObject();
  w.Field("kind", t.type);
  w.Key("value").RawValue(t.inputs);
  w.EndObject();
  return true;
}

// --- Reuser ------------------------------------------------------------------

Reuser::Reuser(const Workflow* wf, const DefHasher* hasher,
               const PreviousRun* previous, Options options)
    : wf_(wf), hasher_(hasher), prev_(previous), options_(std::move(options)) {}

const std::string& Reuser::StepHash(const std::string& step,
                                    std::vector<std::string>* notes) {
  auto it = hashes_.find(step);
  if (it != hashes_.end()) return it->second;
  std::string why;
  std::string h = hasher_->Hash(step, &why);
  if (h.empty() && noted_.insert(step).second) {
    notes->push_back("step " + step + " cannot be hashed (" + why +
                     "): its tasks run live");
  }
  return hashes_[step] = std::move(h);
}

// A reused step whose script lists or globs a directory: what the
// directory holds is not in def_hash, so say so, once per step.
void Reuser::NoteListing(const std::string& step,
                         std::vector<std::string>* notes) {
  if (!listing_noted_.insert(step).second) return;
  std::string word = hasher_->DirectoryListing(step);
  if (word.empty()) return;
  std::replace(word.begin(), word.end(), '\n', ' ');
  // A plain relative glob is a reuse_files entry as it stands.
  const bool plain = word.find_first_of("*?[") != std::string::npos &&
                     word.find_first_of("$'\"\\ ") == std::string::npos &&
                     word[0] != '/' && word.find("..") == std::string::npos;
  notes->push_back("step " + step + " was reused, but its script lists a " +
                   "directory (`" + word +
                   "`) and reuse does not see the files in it: if they "
                   "matter, name them in the step's options (\"reuse_files\": "
                   "[\"" +
                   (plain ? word : std::string("DIR")) +
                   "\"]) or run it with --from " + step);
}

// The previous run's task a task of this run corresponds to, by step and
// canonical inputs (a hook: its owner's match's hook); def_hash unchecked.
Status Reuser::Match(StoreReads& r, const Task& t,
                     const PreviousRun::Done** match) const {
  *match = nullptr;
  if (t.origin != Origin::kFinally) {
    if (!t.dedup_key.empty()) *match = prev_->ByKey(t.dedup_key);
    return Status::OK();
  }
  Task owner;
  Status s = r.GetTask(t.finally_for, &owner);
  if (s.IsNotFound()) return Status::OK();
  WIZQ_RETURN_IF_ERROR(s);
  const PreviousRun::Done* o = owner.reused_from != 0
                                   ? prev_->Find(owner.reused_from)
                                   : prev_->ByKey(owner.dedup_key);
  if (o != nullptr && o->hook != 0) *match = prev_->Find(o->hook);
  return Status::OK();
}

Status Reuser::Forced(StoreReads& r, const Task& t, const PreviousRun::Done* m,
                      bool* forced) {
  auto it = forced_.find(t.id);
  if (it != forced_.end()) {
    *forced = it->second;
    return Status::OK();
  }
  bool f = options_.from_steps.count(t.type) > 0 ||
           (m != nullptr && options_.from_ids.count(m->id) > 0);
  for (int64_t up : {t.parent_id, t.finally_for}) {
    if (f || up == 0) continue;
    Task u;
    Status s = r.GetTask(up, &u);
    if (s.IsNotFound()) continue;
    WIZQ_RETURN_IF_ERROR(s);
    const PreviousRun::Done* um = nullptr;
    WIZQ_RETURN_IF_ERROR(Match(r, u, &um));
    WIZQ_RETURN_IF_ERROR(Forced(r, u, um, &f));
  }
  forced_[t.id] = f;
  *forced = f;
  return Status::OK();
}

// Whether `owner` and every task attached beneath it, and their hooks,
// were reused.
Status Reuser::SubtreeReused(StoreReads& r, const Task& owner,
                             bool* reused) const {
  *reused = owner.reused_from != 0;
  for (size_t i = 0; *reused && i < owner.children.size(); i++) {
    Task child;
    Status s = r.GetTask(owner.children[i], &child);
    if (s.IsNotFound()) {
      *reused = false;
      break;
    }
    WIZQ_RETURN_IF_ERROR(s);
    WIZQ_RETURN_IF_ERROR(SubtreeReused(r, child, reused));
    if (*reused && child.finally_task != 0) {
      Task hook;
      s = r.GetTask(child.finally_task, &hook);
      if (!s.ok() && !s.IsNotFound()) return s;
      if (s.ok() && hook.reused_from == 0) *reused = false;
    }
  }
  return Status::OK();
}

Status Reuser::ReuseReady(StoreTxn& txn, std::vector<int64_t>* reused,
                          std::vector<std::string>* notes) {
  if (!options_.enabled || prev_ == nullptr) return Status::OK();
  TaskFilter pending;
  pending.states = {TaskState::kPending};
  pending.after_id = examined_;
  std::vector<Task> todo;
  WIZQ_RETURN_IF_ERROR(txn.ListTasks(pending, &todo));
  for (const Task& listed : todo) {
    const int64_t id = listed.id;
    examined_ = std::max(examined_, id);
    Task t;  // as the completions before it in this loop left it
    WIZQ_RETURN_IF_ERROR(txn.GetTask(id, &t));
    // A task that was tried before (put back: its worker died, it was
    // interrupted, an attempt was refunded to be adopted) runs live or is
    // adopted: its earlier attempt may still be running.
    if (t.state != TaskState::kPending || t.attempts != 0 ||
        !t.error_reason.empty()) {
      continue;
    }
    const PreviousRun::Done* m = nullptr;
    WIZQ_RETURN_IF_ERROR(Match(txn, t, &m));
    bool forced = false;
    WIZQ_RETURN_IF_ERROR(Forced(txn, t, m, &forced));
    if (forced || m == nullptr || m->def_hash.empty()) continue;
    if (t.origin == Origin::kFinally) {
      Task owner;
      WIZQ_RETURN_IF_ERROR(txn.GetTask(t.finally_for, &owner));
      bool subtree = false;
      WIZQ_RETURN_IF_ERROR(SubtreeReused(txn, owner, &subtree));
      if (!subtree) continue;
    }
    const std::string& def_hash = StepHash(t.type, notes);
    if (def_hash.empty() || def_hash != m->def_hash) continue;
    std::string response = "[", element;
    for (int64_t child : m->children) {
      if (!prev_->Element(child, &element)) continue;
      if (response.size() > 1) response += ",";
      response += element;
    }
    response += "]";
    Completion c;
    Status v = ChildrenOf(*wf_, t, response, &c.children);
    if (!v.ok()) {
      notes->push_back("task " + std::to_string(id) + " " + t.type +
                       " runs live: its recorded result no longer validates (" +
                       v.message() + ")");
      continue;
    }
    c.def_hash = def_hash;
    c.reused.run_id = prev_->run_id();
    c.reused_id = m->id;
    WIZQ_RETURN_IF_ERROR(txn.Complete(id, c, nullptr));
    reused->push_back(id);
    NoteListing(t.type, notes);
  }
  hashes_.clear();
  return Status::OK();
}

}  // namespace wizq
