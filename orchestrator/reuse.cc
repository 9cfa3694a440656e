#include "orchestrator/reuse.h"

#include <algorithm>

#include "audit/log.h"
#include "fs/env.h"
#include "queue/events.h"
#include "tasks/def_hash.h"
#include "tasks/response.h"
#include "tasks/workflow.h"
#include "util/json_writer.h"

namespace wizq {

// --- PreviousRun -------------------------------------------------------------

Status PreviousRun::Load(Env* env, const std::string& archive_dir,
                         std::unique_ptr<PreviousRun>* out) {
  if (env == nullptr) env = Env::Posix();
  const std::string path = archive_dir + "/audit.jsonl";
  std::string data;
  WIZQ_RETURN_IF_ERROR(env->ReadFile(path, &data));
  LogParseResult parsed;
  WIZQ_RETURN_IF_ERROR(ParseLog(path, data, 0, 1, &parsed));
  auto run = std::make_unique<PreviousRun>();
  EventDecoder decoder;
  for (const LogRecord& rec : parsed.records) {
    EventHeader h;
    Event e;
    WIZQ_RETURN_IF_ERROR(decoder.Decode(rec.line, &h, &e));
    if (const auto* st = std::get_if<RunStarted>(&e)) {
      run->run_id_ = st->run_id;
    } else if (const auto* sub = std::get_if<TaskSubmitted>(&e)) {
      if (sub->id != static_cast<int64_t>(run->tasks_.size()) + 1) {
        return Status::Corruption(path + ": task ids out of order at seq " +
                                  std::to_string(h.seq));
      }
      run->tasks_.push_back({std::string(sub->type), std::string(sub->inputs),
                             std::string(sub->dedup_key), sub->finally_for});
      if (sub->finally_for > 0) {
        auto it = run->done_.find(sub->finally_for);
        if (it != run->done_.end()) it->second.hook = sub->id;
      }
    } else if (const auto* c = std::get_if<TaskCompleted>(&e)) {
      if (c->id < 1 || c->id > static_cast<int64_t>(run->tasks_.size())) {
        return Status::Corruption(path + ": completion of unknown task " +
                                  std::to_string(c->id));
      }
      Done d;
      d.id = c->id;
      d.type = run->tasks_[c->id - 1].type;
      d.def_hash = c->def_hash;
      d.children = c->spawned;
      d.children.insert(d.children.end(), c->deduplicated.begin(),
                        c->deduplicated.end());
      if (!d.def_hash.empty()) run->with_def_hash_++;
      // An empty key (an imported duplicate, queue/import.cc) matches
      // nothing.
      if (run->tasks_[c->id - 1].finally_for == 0 &&
          !run->tasks_[c->id - 1].dedup_key.empty()) {
        run->by_key_[run->tasks_[c->id - 1].dedup_key] = c->id;
      }
      run->done_[c->id] = std::move(d);
    }
  }
  // A hook submitted before its owner completed cannot be; one submitted
  // after is linked above.
  *out = std::move(run);
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
const PreviousRun::Done* Reuser::Match(const QueueState& s,
                                       const Task& t) const {
  if (t.origin != Origin::kFinally) {
    return t.dedup_key.empty() ? nullptr : prev_->ByKey(t.dedup_key);
  }
  const Task* owner = s.Find(t.finally_for);
  if (owner == nullptr) return nullptr;
  const PreviousRun::Done* o = owner->reused_from != 0
                                   ? prev_->Find(owner->reused_from)
                                   : prev_->ByKey(owner->dedup_key);
  return o == nullptr || o->hook == 0 ? nullptr : prev_->Find(o->hook);
}

bool Reuser::Forced(const QueueState& s, const Task& t,
                    const PreviousRun::Done* m) {
  auto it = forced_.find(t.id);
  if (it != forced_.end()) return it->second;
  bool f = options_.from_steps.count(t.type) > 0 ||
           (m != nullptr && options_.from_ids.count(m->id) > 0);
  for (int64_t up : {t.parent_id, t.finally_for}) {
    const Task* u = up != 0 ? s.Find(up) : nullptr;
    if (!f && u != nullptr) f = Forced(s, *u, Match(s, *u));
  }
  forced_[t.id] = f;
  return f;
}

// Whether `owner` and every task attached beneath it, and their hooks,
// were reused.
bool Reuser::SubtreeReused(const QueueState& s, const Task& owner) const {
  if (owner.reused_from == 0) return false;
  for (int64_t c : owner.children) {
    const Task* child = s.Find(c);
    if (child == nullptr || !SubtreeReused(s, *child)) return false;
    const Task* hook =
        child->finally_task != 0 ? s.Find(child->finally_task) : nullptr;
    if (hook != nullptr && hook->reused_from == 0) return false;
  }
  return true;
}

Status Reuser::ReuseReady(Txn& txn, std::vector<int64_t>* reused,
                          std::vector<std::string>* notes) {
  if (!options_.enabled || prev_ == nullptr) return Status::OK();
  std::vector<int64_t> todo;
  for (auto it = txn.state().pending().upper_bound(examined_);
       it != txn.state().pending().end(); ++it) {
    todo.push_back(*it);
  }
  for (int64_t id : todo) {
    examined_ = std::max(examined_, id);
    const QueueState& s = txn.state();
    const Task* t = s.Find(id);
    // A task that was tried before (put back: its worker died, it was
    // interrupted, an attempt was refunded to be adopted) runs live or is
    // adopted: its earlier attempt may still be running.
    if (t == nullptr || t->state != TaskState::kPending || t->attempts != 0 ||
        !t->error_reason.empty()) {
      continue;
    }
    const PreviousRun::Done* m = Match(s, *t);
    if (Forced(s, *t, m) || m == nullptr || m->def_hash.empty()) continue;
    if (t->origin == Origin::kFinally &&
        !SubtreeReused(s, *s.Find(t->finally_for))) {
      continue;
    }
    const std::string& def_hash = StepHash(t->type, notes);
    if (def_hash.empty() || def_hash != m->def_hash) continue;
    std::string response = "[", element;
    for (int64_t child : m->children) {
      if (!prev_->Element(child, &element)) continue;
      if (response.size() > 1) response += ",";
      response += element;
    }
    response += "]";
    std::vector<NewTask> children;
    Status v = ChildrenOf(*wf_, *t, response, &children);
    if (!v.ok()) {
      notes->push_back("task " + std::to_string(id) + " " + t->type +
                       " runs live: its recorded result no longer validates (" +
                       v.message() + ")");
      continue;
    }
    Txn::CompletionInfo info;
    info.def_hash = def_hash;
    info.reused_run_id = prev_->run_id();
    info.reused_id = m->id;
    const std::string step = t->type;
    WIZQ_RETURN_IF_ERROR(txn.CompleteWith(id, children, info, nullptr));
    reused->push_back(id);
    NoteListing(step, notes);
  }
  hashes_.clear();
  return Status::OK();
}

}  // namespace wizq
