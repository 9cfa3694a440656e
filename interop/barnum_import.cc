#include "interop/barnum_import.h"

#include <algorithm>
#include <memory>
#include <set>

#include "interop/barnum_config.h"
#include "tasks/workflow/workflow.h"

namespace wizq {

using Json = nlohmann::json;

std::string WizqReasonOf(const std::string& r) {
  if (r == "Timeout") return std::string(kReasonTimeout);
  if (r == "InvalidResponse") return std::string(kReasonInvalidResponse);
  return std::string(kReasonExitCode);  // AgentLost: the command failed
}

std::string BarnumReasonOf(const std::string& r) {
  if (r == kReasonTimeout) return "Timeout";
  if (r == kReasonInvalidResponse) return "InvalidResponse";
  return "AgentLost";  // exit_code, worker_lost, lease_expired, ...
}

namespace {

// Barnum's alive fixed point over the log.
std::map<uint32_t, BarnumClass> Classify(const BarnumLog& log) {
  std::map<uint32_t, std::vector<uint32_t>> deps;  // task -> dependents
  for (const auto& [id, t] : log.tasks) {
    if (t.parent) deps[*t.parent].push_back(id);
    if (t.origin == BarnumTask::Origin::kFinally) {
      deps[t.finally_for].push_back(id);
    }
  }
  for (const auto& [id, c] : log.completions) {
    for (uint32_t s : c.spawned) deps[id].push_back(s);
  }
  std::set<uint32_t> alive;
  for (const auto& [id, t] : log.tasks) {
    if (log.completions.count(id) == 0) alive.insert(id);
  }
  // Dependents have higher ids (the reader checks it), so a pass from the
  // highest id down usually reaches the fixed point at once.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = log.completions.rbegin(); it != log.completions.rend();
         ++it) {
      const uint32_t id = it->first;
      const BarnumCompletion& c = it->second;
      if (!c.success || alive.count(id) != 0) continue;
      const std::vector<uint32_t>& d = deps[id];
      if (std::any_of(d.begin(), d.end(),
                      [&](uint32_t x) { return alive.count(x) != 0; })) {
        alive.insert(id);
        changed = true;
      }
    }
  }
  std::map<uint32_t, BarnumClass> classes;
  for (const auto& [id, t] : log.tasks) {
    const bool completed = log.completions.count(id) != 0;
    classes[id] = alive.count(id) == 0 ? BarnumClass::kDone
                  : completed          ? BarnumClass::kWaiting
                                       : BarnumClass::kPending;
  }
  return classes;
}

// The step a run of this log starts from: the first seed's, else the
// first step (a task naming no step of the Config is reported later).
std::string EntrypointOf(const BarnumLog& log) {
  std::vector<std::string> names;
  const Json steps = log.config.value("steps", Json::array());
  for (const Json& s : steps.is_array() ? steps : Json::array()) {
    if (s.is_object() && s.contains("name") && s["name"].is_string()) {
      names.push_back(s["name"].get<std::string>());
    }
  }
  for (const auto& [id, t] : log.tasks) {
    if (t.origin == BarnumTask::Origin::kInitial &&
        std::find(names.begin(), names.end(), t.step) != names.end()) {
      return t.step;
    }
  }
  return names.empty() ? "" : names.front();
}

class Builder {
 public:
  Builder(const BarnumLog& log, const Workflow& wf, BarnumImport* out)
      : log_(log), wf_(wf), out_(out) {}

  Status Build();

 private:
  int64_t WizqId(uint32_t barnum_id) const {
    return static_cast<int64_t>(unit_of_.at(barnum_id)) + 1;
  }
  Status Chain(const std::vector<uint32_t>& chain, ImportedTask* it) const;
  bool Premature(const std::vector<uint32_t>& chain) const;
  static constexpr size_t kDropped = static_cast<size_t>(-1);
  ImportedTask Hook(const BarnumFinallyRun& fr) const;
  std::vector<int64_t> Spawned(const std::vector<uint32_t>& ids) const;

  const BarnumLog& log_;
  const Workflow& wf_;
  BarnumImport* out_;
  std::map<uint32_t, size_t> unit_of_;
};

std::vector<int64_t> Builder::Spawned(const std::vector<uint32_t>& ids) const {
  std::vector<int64_t> out;
  for (uint32_t s : ids) {
    // A child the log names but never submitted (a torn write) is gone.
    if (log_.tasks.count(s) == 0 || unit_of_.at(s) == kDropped) continue;
    const int64_t w = WizqId(s);
    if (std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
  }
  return out;
}

Status Builder::Chain(const std::vector<uint32_t>& chain,
                      ImportedTask* it) const {
  const BarnumTask& head = log_.tasks.at(chain.front());
  const Step* step = wf_.FindStep(head.step);
  NewTask& t = it->task;
  t.type = head.step;
  t.inputs = head.value.dump();
  t.parent_id = head.parent ? WizqId(*head.parent) : 0;
  t.origin = head.origin == BarnumTask::Origin::kInitial   ? Origin::kInitial
             : head.origin == BarnumTask::Origin::kFinally ? Origin::kFinally
                                                           : Origin::kSpawned;
  t.finally_for = t.origin == Origin::kFinally ? WizqId(head.finally_for) : 0;
  t.has_finally =
      step->finally_hook.has_value() && t.origin != Origin::kFinally;
  t.max_attempts = step->options.max_attempts();
  for (uint32_t id : chain) {
    auto c = log_.completions.find(id);
    if (c == log_.completions.end() || c->second.success) continue;
    std::string msg = c->second.message;
    if (msg.empty()) msg = "Barnum: " + c->second.reason;
    it->failures.push_back({WizqReasonOf(c->second.reason), msg});
  }
  auto tail = log_.completions.find(chain.back());
  int need = static_cast<int>(it->failures.size()) + 1;
  if (tail != log_.completions.end()) it->order = tail->second.line;
  if (tail == log_.completions.end()) {
    it->state = TaskState::kPending;
  } else if (tail->second.success) {
    it->state = TaskState::kDone;
    it->spawned = Spawned(tail->second.spawned);
  } else if (tail->second.retry) {
    // The retry was logged as owed but never submitted (a torn write):
    // wizq retries in place.
    it->state = TaskState::kPending;
  } else {
    it->state = TaskState::kFailed;
    need--;
  }
  // Barnum already charged these attempts; a task it owes a run gets one.
  t.max_attempts = std::max(t.max_attempts, need);
  return Status::OK();
}

ImportedTask Builder::Hook(const BarnumFinallyRun& fr) const {
  const BarnumTask& owner = log_.tasks.at(fr.finally_for);
  const BarnumCompletion& done = log_.completions.at(fr.finally_for);
  ImportedTask it;
  it.task.type = owner.step;
  it.task.inputs =
      (done.finally_value.is_null() ? owner.value : done.finally_value).dump();
  it.task.parent_id = owner.parent ? WizqId(*owner.parent) : 0;
  it.task.origin = Origin::kFinally;
  it.task.finally_for = WizqId(fr.finally_for);
  it.task.max_attempts = wf_.FindStep(owner.step)->options.max_attempts();
  it.state = TaskState::kDone;
  it.spawned = Spawned(fr.children);
  it.order = fr.line;
  return it;
}

// A v1 hook that has not run and was submitted before its owner's
// subtree was done (the reference's own format example does this): not
// kept. Its owner is marked as having a hook (Chain), and wizq fires it
// once the subtree is done, as Barnum meant to.
bool Builder::Premature(const std::vector<uint32_t>& chain) const {
  const BarnumTask& head = log_.tasks.at(chain.front());
  if (head.origin != BarnumTask::Origin::kFinally ||
      log_.completions.count(chain.back()) != 0) {
    return false;
  }
  const BarnumTask& owner = log_.tasks.at(head.finally_for);
  if (!wf_.FindStep(owner.step)->finally_hook) return false;
  auto done = log_.completions.find(head.finally_for);
  if (done == log_.completions.end() || !done->second.success) return true;
  for (const auto& [id, t] : log_.tasks) {
    if (t.parent == head.finally_for &&
        out_->classes.at(id) != BarnumClass::kDone) {
      return true;
    }
  }
  return false;
}

Status Builder::Build() {
  std::vector<std::vector<uint32_t>> units;
  for (const auto& [id, t] : log_.tasks) {
    if (wf_.FindStep(t.step) == nullptr) {
      return BarnumLineError(
          log_.path, t.line,
          "step: \"" + t.step + "\" is not a step of the Config");
    }
    if (t.origin == BarnumTask::Origin::kRetry) {
      const size_t u = unit_of_.at(t.replaces);
      units[u].push_back(id);
      unit_of_[id] = u;
    } else {
      unit_of_[id] = units.size();
      units.push_back({id});
    }
  }
  // Renumber without the hooks that are not kept.
  size_t kept = 0;
  std::vector<size_t> index(units.size());
  for (size_t u = 0; u < units.size(); u++) {
    index[u] = Premature(units[u]) ? kDropped : kept++;
  }
  for (auto& [id, u] : unit_of_) u = index[u];
  for (const std::vector<uint32_t>& chain : units) {
    if (unit_of_.at(chain.front()) == kDropped) continue;
    ImportedTask it;
    WIZQ_RETURN_IF_ERROR(Chain(chain, &it));
    out_->run.tasks.push_back(std::move(it));
    out_->ids.push_back(chain);
  }
  for (const auto& [owner, fr] : log_.finally_runs) {
    out_->run.tasks.push_back(Hook(fr));
    out_->ids.emplace_back();
  }
  return Status::OK();
}

}  // namespace

Status ImportBarnumLog(const BarnumLog& log, const std::string& source,
                       BarnumImport* out) {
  *out = BarnumImport();
  Status s = BarnumConfigToWorkflow(log.config, EntrypointOf(log),
                                    &out->workflow_json);
  if (!s.ok()) return BarnumLineError(log.path, 1, s.message());
  std::unique_ptr<Workflow> wf;
  s = Workflow::Parse(out->workflow_json, log.path + ":1 (the Config)", &wf);
  if (!s.ok()) return s;
  out->workflow_json = wf->frozen_json();
  out->classes = Classify(log);
  for (const auto& [id, c] : out->classes) {
    if (c == BarnumClass::kPending) out->run.tasks_pending++;
    if (c == BarnumClass::kWaiting) out->run.tasks_waiting++;
    if (c == BarnumClass::kDone) out->run.tasks_done++;
  }
  out->run.source = source;
  Builder b(log, *wf, out);
  WIZQ_RETURN_IF_ERROR(b.Build());
  s = ValidateImport(out->run);
  if (!s.ok()) return s.Annotate(log.path);
  return Status::OK();
}

}  // namespace wizq
