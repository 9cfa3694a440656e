#include "interop/barnum_log.h"

#include <limits>
#include <utility>

namespace wizq {

using Json = nlohmann::json;

const char* BarnumFormatName(BarnumFormat f) {
  switch (f) {
    case BarnumFormat::kReference:
      return "barnum";
    case BarnumFormat::kV1:
      return "barnum-v1";
    case BarnumFormat::kV2:
      return "barnum-v2";
  }
  return "barnum";
}

Status BarnumLineError(const std::string& path, int line,
                       const std::string& what) {
  return Status::InvalidArgument(path + ":" + std::to_string(line) + ": " +
                                 what);
}

namespace {

// Reads one line (an entry) into the log. Every check names the line and
// the field (a JSON path inside the entry).
class EntryReader {
 public:
  EntryReader(BarnumLog* log, std::optional<bool>* v2, bool* saw_reference,
              int line)
      : log_(log), v2_(v2), saw_reference_(saw_reference), line_(line) {}

  Status Read(const Json& j);

 private:
  Status Err(const std::string& field, const std::string& what) const {
    return BarnumLineError(log_->path, line_, field + ": " + what);
  }
  // Records which shape this line has; a log keeps one.
  Status Shape(bool v2, const std::string& field);
  Status Id(const Json& obj, const std::string& key, const std::string& field,
            uint32_t* out) const;
  Status OptId(const Json& obj, const std::string& key,
               const std::string& field, std::optional<uint32_t>* out) const;
  Status Origin(const Json& j, const std::string& field, BarnumTask* t);
  Status Submitted(const Json& j, const std::string& field, bool embedded,
                   uint32_t* id);
  Status Completed(const Json& j);
  Status Success(const Json& v, uint32_t id, BarnumCompletion* c);
  Status Failed(const Json& v, uint32_t id, BarnumCompletion* c);
  Status FinallyRun(const Json& j);
  Status Children(const Json& list, const std::string& field,
                  std::optional<uint32_t> parent, std::vector<uint32_t>* ids);

  BarnumLog* log_;
  std::optional<bool>* v2_;
  bool* saw_reference_;
  int line_;
};

Status EntryReader::Shape(bool v2, const std::string& field) {
  if (!v2_->has_value()) {
    *v2_ = v2;
  } else if (**v2_ != v2) {
    return Err(field, std::string("a Barnum ") + (v2 ? "v2" : "v1") +
                          " entry in a " + (v2 ? "v1" : "v2") + " log");
  }
  return Status::OK();
}

Status EntryReader::Id(const Json& obj, const std::string& key,
                       const std::string& field, uint32_t* out) const {
  auto it = obj.find(key);
  if (it == obj.end()) return Err(field, "missing");
  if (!it->is_number_unsigned() ||
      it->get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
    return Err(field, "must be a task id (an integer from 0 to 2^32-1), got " +
                          it->dump());
  }
  *out = it->get<uint32_t>();
  return Status::OK();
}

Status EntryReader::OptId(const Json& obj, const std::string& key,
                          const std::string& field,
                          std::optional<uint32_t>* out) const {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    out->reset();
    return Status::OK();
  }
  uint32_t id = 0;
  WIZQ_RETURN_IF_ERROR(Id(obj, key, field, &id));
  *out = id;
  return Status::OK();
}

Status EntryReader::Origin(const Json& o, const std::string& field,
                           BarnumTask* t) {
  using O = BarnumTask::Origin;
  std::string kind;
  const Json* body = &o;
  if (o.is_string()) {  // the reference's "Initial" / "Spawned"
    kind = o.get<std::string>();
    *saw_reference_ = true;
  } else if (o.is_object() && o.contains("kind") && o["kind"].is_string()) {
    kind = o["kind"].get<std::string>();
  } else if (o.is_object() && o.size() == 1 && o.begin()->is_object()) {
    kind = o.begin().key();  // the reference's {"Retry":{"replaces":2}}
    body = &*o.begin();
    *saw_reference_ = true;
  } else {
    return Err(field, "must be a task origin, got " + o.dump());
  }
  const bool v2 = v2_->has_value() && **v2_;
  if (kind == "Initial" && !v2) {
    t->origin = O::kInitial;
  } else if (kind == "Seed" && v2) {
    t->origin = O::kInitial;
  } else if (kind == "Spawned") {
    t->origin = O::kSpawned;
    if (v2)
      WIZQ_RETURN_IF_ERROR(
          OptId(*body, "parent_id", field + ".parent_id", &t->parent));
  } else if (kind == "Retry") {
    t->origin = O::kRetry;
    WIZQ_RETURN_IF_ERROR(
        Id(*body, "replaces", field + ".replaces", &t->replaces));
  } else if (kind == "Finally" && !v2) {
    t->origin = O::kFinally;
    WIZQ_RETURN_IF_ERROR(
        Id(*body, "finally_for", field + ".finally_for", &t->finally_for));
  } else {
    return Err(field + ".kind", "unknown origin \"" + kind +
                                    "\" for a Barnum " + (v2 ? "v2" : "v1") +
                                    " log");
  }
  return Status::OK();
}

// A TaskSubmitted, top-level or embedded (v2 children and retries).
Status EntryReader::Submitted(const Json& j, const std::string& field,
                              bool embedded, uint32_t* id) {
  const std::string pre = field.empty() ? "" : field + ".";
  if (!j.is_object()) return Err(field, "must be a task object");
  if (!embedded)
    WIZQ_RETURN_IF_ERROR(Shape(!j.contains("parent_id"), pre + "parent_id"));
  const bool v2 = **v2_;
  BarnumTask t;
  t.line = line_;
  WIZQ_RETURN_IF_ERROR(Id(j, "task_id", pre + "task_id", &t.id));
  auto step = j.find("step");
  if (step == j.end() || !step->is_string() ||
      step->get<std::string>().empty()) {
    return Err(pre + "step", "must be a step name");
  }
  t.step = step->get<std::string>();
  if (!j.contains("value")) return Err(pre + "value", "missing");
  t.value = j["value"];
  if (!j.contains("origin")) return Err(pre + "origin", "missing");
  WIZQ_RETURN_IF_ERROR(Origin(j["origin"], pre + "origin", &t));
  if (!v2)
    WIZQ_RETURN_IF_ERROR(OptId(j, "parent_id", pre + "parent_id", &t.parent));
  auto dup = log_->tasks.find(t.id);
  if (dup != log_->tasks.end()) {
    return Err(pre + "task_id", "task " + std::to_string(t.id) +
                                    " was already submitted on line " +
                                    std::to_string(dup->second.line));
  }
  if (t.origin == BarnumTask::Origin::kRetry) {
    auto old = log_->tasks.find(t.replaces);
    auto failed = log_->completions.find(t.replaces);
    if (old == log_->tasks.end() || failed == log_->completions.end() ||
        failed->second.success) {
      return Err(pre + "origin.replaces",
                 "task " + std::to_string(t.replaces) +
                     " has not failed: nothing to retry");
    }
    if (v2) t.parent = old->second.parent;
    if (!v2 && failed->second.retry != t.id) {
      return Err(pre + "task_id",
                 "the failure of task " + std::to_string(t.replaces) +
                     " names no retry " + std::to_string(t.id));
    }
  }
  if (t.parent && log_->tasks.count(*t.parent) == 0) {
    return Err(pre + (v2 ? "origin.parent_id" : "parent_id"),
               "unknown task " + std::to_string(*t.parent));
  }
  if (t.origin == BarnumTask::Origin::kFinally &&
      log_->tasks.count(t.finally_for) == 0) {
    return Err(pre + "origin.finally_for",
               "unknown task " + std::to_string(t.finally_for));
  }
  // Barnum's ids rise: what a task refers to was made before it.
  const std::pair<std::optional<uint32_t>, std::string> refs[] = {
      {t.parent, v2 ? "origin.parent_id" : "parent_id"},
      {t.origin == BarnumTask::Origin::kRetry ? t.replaces
                                              : std::optional<uint32_t>(),
       "origin.replaces"},
      {t.origin == BarnumTask::Origin::kFinally ? t.finally_for
                                                : std::optional<uint32_t>(),
       "origin.finally_for"}};
  for (const auto& [ref, name] : refs) {
    if (ref && *ref >= t.id) {
      return Err(pre + name, "task " + std::to_string(t.id) +
                                 " refers to task " + std::to_string(*ref) +
                                 ", which is not an earlier one (Barnum's "
                                 "ids rise)");
    }
  }
  *id = t.id;
  log_->tasks.emplace(t.id, std::move(t));
  return Status::OK();
}

Status EntryReader::Children(const Json& list, const std::string& field,
                             std::optional<uint32_t> parent,
                             std::vector<uint32_t>* ids) {
  if (!list.is_array()) return Err(field, "must be an array of tasks");
  for (size_t i = 0; i < list.size(); i++) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    uint32_t id = 0;
    WIZQ_RETURN_IF_ERROR(Submitted(list[i], f, true, &id));
    const BarnumTask& t = log_->tasks[id];
    if (t.origin != BarnumTask::Origin::kSpawned || t.parent != parent) {
      log_->tasks.erase(id);
      return Err(f + ".origin", parent ? "must be Spawned with parent_id " +
                                             std::to_string(*parent)
                                       : "must be Spawned with no parent_id");
    }
    ids->push_back(id);
  }
  return Status::OK();
}

Status EntryReader::Success(const Json& v, uint32_t id, BarnumCompletion* c) {
  c->success = true;
  if (!v.is_object()) return Err("outcome.value", "must be an object");
  c->finally_value = v.value("finally_value", Json());
  if (v.contains("children")) {
    WIZQ_RETURN_IF_ERROR(Shape(true, "outcome.value.children"));
    return Children(v["children"], "outcome.value.children", id, &c->spawned);
  }
  WIZQ_RETURN_IF_ERROR(Shape(false, "outcome.value.spawned_task_ids"));
  auto s = v.find("spawned_task_ids");
  if (s == v.end() || !s->is_array()) {
    return Err("outcome.value.spawned_task_ids", "must be an array of ids");
  }
  for (size_t i = 0; i < s->size(); i++) {
    uint32_t child = 0;
    WIZQ_RETURN_IF_ERROR(Id(
        Json{{"id", (*s)[i]}}, "id",
        "outcome.value.spawned_task_ids[" + std::to_string(i) + "]", &child));
    c->spawned.push_back(child);
  }
  return Status::OK();
}

Status EntryReader::Failed(const Json& v, uint32_t id, BarnumCompletion* c) {
  if (!v.is_object()) return Err("outcome.value", "must be an object");
  auto r = v.find("reason");
  if (r == v.end() || !r->is_object() || !r->contains("kind") ||
      !(*r)["kind"].is_string()) {
    return Err("outcome.value.reason", "must be {\"kind\": ...}");
  }
  c->reason = (*r)["kind"].get<std::string>();
  if (c->reason != "Timeout" && c->reason != "AgentLost" &&
      c->reason != "InvalidResponse") {
    return Err("outcome.value.reason.kind",
               "unknown failure reason \"" + c->reason +
                   "\" (Timeout, AgentLost, InvalidResponse)");
  }
  if (r->contains("message") && (*r)["message"].is_string()) {
    c->message = (*r)["message"].get<std::string>();
  }
  if (v.contains("retry")) {
    WIZQ_RETURN_IF_ERROR(Shape(true, "outcome.value.retry"));
    if (v["retry"].is_null()) return Status::OK();
    // The completion is recorded first: the retry replaces a failed task.
    log_->completions[id] = *c;
    uint32_t retry = 0;
    Status s = Submitted(v["retry"], "outcome.value.retry", true, &retry);
    log_->completions.erase(id);
    WIZQ_RETURN_IF_ERROR(s);
    if (log_->tasks[retry].replaces != id) {
      log_->tasks.erase(retry);
      return Err("outcome.value.retry.origin.replaces",
                 "must be the failed task " + std::to_string(id));
    }
    c->retry = retry;
    return Status::OK();
  }
  WIZQ_RETURN_IF_ERROR(Shape(false, "outcome.value.retry_task_id"));
  return OptId(v, "retry_task_id", "outcome.value.retry_task_id", &c->retry);
}

Status EntryReader::Completed(const Json& j) {
  BarnumCompletion c;
  c.line = line_;
  WIZQ_RETURN_IF_ERROR(Id(j, "task_id", "task_id", &c.id));
  if (log_->tasks.count(c.id) == 0) {
    return Err("task_id", "completion of unknown task " + std::to_string(c.id));
  }
  auto prev = log_->completions.find(c.id);
  if (prev != log_->completions.end()) {
    return Err("task_id", "task " + std::to_string(c.id) +
                              " was already completed on line " +
                              std::to_string(prev->second.line));
  }
  auto o = j.find("outcome");
  if (o == j.end() || !o->is_object() || !o->contains("kind") ||
      !(*o)["kind"].is_string()) {
    return Err("outcome", "must be {\"kind\": \"Success\"|\"Failed\", ...}");
  }
  const std::string kind = (*o)["kind"].get<std::string>();
  const Json value = o->value("value", Json());
  if (kind == "Success") {
    WIZQ_RETURN_IF_ERROR(Success(value, c.id, &c));
  } else if (kind == "Failed") {
    WIZQ_RETURN_IF_ERROR(Failed(value, c.id, &c));
  } else {
    return Err("outcome.kind", "unknown outcome \"" + kind + "\"");
  }
  log_->completions[c.id] = std::move(c);
  return Status::OK();
}

Status EntryReader::FinallyRun(const Json& j) {
  WIZQ_RETURN_IF_ERROR(Shape(true, "kind"));
  BarnumFinallyRun f;
  f.line = line_;
  WIZQ_RETURN_IF_ERROR(Id(j, "finally_for", "finally_for", &f.finally_for));
  auto done = log_->completions.find(f.finally_for);
  if (done == log_->completions.end() || !done->second.success) {
    return Err("finally_for", "task " + std::to_string(f.finally_for) +
                                  " has not succeeded: its hook cannot run");
  }
  if (log_->finally_runs.count(f.finally_for) != 0) {
    return Err(
        "finally_for",
        "the hook of task " + std::to_string(f.finally_for) + " already ran");
  }
  const std::optional<uint32_t> gp = log_->tasks[f.finally_for].parent;
  WIZQ_RETURN_IF_ERROR(Children(j.value("children", Json::array()), "children",
                                gp, &f.children));
  log_->finally_runs[f.finally_for] = std::move(f);
  return Status::OK();
}

Status EntryReader::Read(const Json& j) {
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string()) {
    return Err("kind", "a state log entry is an object with a \"kind\"");
  }
  const std::string kind = j["kind"].get<std::string>();
  if (log_->config.is_null() && kind != "Config") {
    return Err("kind", "the first entry must be the Config, not " + kind);
  }
  if (kind == "Config") {
    if (!log_->config.is_null()) return Err("kind", "a second Config");
    if (!j.contains("config") || !j["config"].is_object()) {
      return Err("config", "must be an object");
    }
    log_->config = j["config"];
    return Status::OK();
  }
  if (kind == "TaskSubmitted") {
    uint32_t id = 0;
    WIZQ_RETURN_IF_ERROR(Submitted(j, "", false, &id));
    if (**v2_ && log_->tasks[id].origin != BarnumTask::Origin::kInitial) {
      log_->tasks.erase(id);
      return Err("origin", "a top-level task of a v2 log must be a Seed");
    }
    return Status::OK();
  }
  if (kind == "TaskCompleted") return Completed(j);
  if (kind == "FinallyRun") return FinallyRun(j);
  return Err("kind", "unknown entry kind \"" + kind + "\"");
}

// Whether a step's action has Barnum v2's `params`.
bool ConfigLooksV2(const Json& config) {
  auto steps = config.find("steps");
  if (steps == config.end() || !steps->is_array()) return false;
  for (const Json& s : *steps) {
    if (s.is_object() && s.contains("action") && s["action"].is_object() &&
        s["action"].contains("params")) {
      return true;
    }
  }
  return false;
}

}  // namespace

Status ReadBarnumLog(const std::string& path, std::string_view text,
                     BarnumLog* log) {
  *log = BarnumLog();
  log->path = path;
  std::optional<bool> v2;
  bool saw_reference = false;
  int line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    const bool last = nl == std::string_view::npos;
    std::string_view raw =
        text.substr(pos, last ? text.size() - pos : nl - pos);
    pos = last ? text.size() : nl + 1;
    line++;
    if (raw.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    Json j = Json::parse(raw, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      if (last && !log->config.is_null()) {  // a crash mid-write: set aside
        log->torn_tail = true;
        break;
      }
      return BarnumLineError(path, line, "not a JSON object (not NDJSON)");
    }
    if (log->config.is_null() && j.is_object() && j.contains("kind") &&
        j["kind"] == "Config" && j.contains("config") &&
        ConfigLooksV2(j["config"])) {
      v2 = true;
    }
    EntryReader reader(log, &v2, &saw_reference, line);
    WIZQ_RETURN_IF_ERROR(reader.Read(j));
    log->lines = line;
  }
  if (log->lines == 0) {
    return BarnumLineError(path, 1, "kind: empty log (no Config entry)");
  }
  log->format = v2.value_or(false) ? BarnumFormat::kV2
                : saw_reference    ? BarnumFormat::kReference
                                   : BarnumFormat::kV1;
  return Status::OK();
}

}  // namespace wizq
