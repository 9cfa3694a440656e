#include "interop/barnum_export.h"

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "interop/barnum_config.h"
#include "interop/barnum_import.h"
#include "queue/events.h"
#include "queue/store.h"
#include "tasks/workflow/workflow.h"

namespace wizq {

using Json = nlohmann::ordered_json;  // Barnum's field order: kind first

namespace {

// What the export knows of one wizq task.
struct Known {
  std::string type;
  Json value;
  int64_t parent = 0;
  int64_t finally_for = 0;  // a hook: its owner
  bool initial = false;
  std::optional<uint32_t> cur;  // its Barnum id (the latest retry's)
  bool emitted = false;         // its submission is in the log
  bool completed = false;       // succeeded
  bool had_children = false;
  bool omitted = false;       // cannot be written (v2: see WriteHook)
  bool hook_written = false;  // v2: its FinallyRun is in the log
  // Failures for good that `wizq run --retry-failed` put back later
  // (task_retried): each is written as a retry, as Barnum writes one.
  int retried_later = 0;
};

class Exporter {
 public:
  // `retried`: how many task_retried events the log holds, by task id.
  Exporter(BarnumFormat f, std::map<int64_t, int> retried)
      : v2_(f == BarnumFormat::kV2), format_(f), retried_(std::move(retried)) {}

  Status Add(const Event& e);
  std::string Finish();

 private:
  uint32_t IdOf(Known& t) {
    if (!t.cur) t.cur = next_id_++;
    return *t.cur;
  }
  Json ParentId(int64_t parent) {
    return parent == 0 ? Json() : Json(IdOf(tasks_[parent]));
  }
  Json Submission(int64_t id, const Json& origin);
  void EmitSubmitted(int64_t id);
  void EmitHooksOf(int64_t owner);
  Status Started(const RunStarted& e);
  Status Submitted(const TaskSubmitted& e);
  void Completed(int64_t id, const std::vector<int64_t>& spawned);
  void WriteHook(Known& t, std::vector<int64_t> children);
  void Failed(int64_t id, const TaskFailed& e);
  Json Reason(const TaskFailed& e) const;

  const bool v2_;
  const BarnumFormat format_;
  std::vector<Json> out_;
  std::map<int64_t, Known> tasks_;
  std::map<int64_t, std::vector<int64_t>> hooks_waiting_;  // v1, by owner
  std::map<int64_t, int> retried_;
  uint32_t next_id_ = 0;
  bool have_config_ = false;
};

Json Exporter::Submission(int64_t id, const Json& origin) {
  Known& t = tasks_[id];
  Json s = {{"task_id", IdOf(t)}, {"step", t.type}, {"value", t.value}};
  if (!v2_) s["parent_id"] = ParentId(t.parent);
  s["origin"] = origin;
  return s;
}

// v1: a task's own TaskSubmitted line (v2 embeds all but seeds).
void Exporter::EmitSubmitted(int64_t id) {
  Known& t = tasks_[id];
  if (t.emitted || t.omitted) return;
  t.emitted = true;
  Json origin = {{"kind", t.initial ? "Initial" : "Spawned"}};
  if (t.finally_for != 0) {
    origin = {{"kind", "Finally"},
              {"finally_for", IdOf(tasks_[t.finally_for])}};
  }
  if (v2_) origin = {{"kind", "Seed"}};
  Json line = {{"kind", "TaskSubmitted"}};
  line.update(Submission(id, origin));
  out_.push_back(std::move(line));
}

void Exporter::EmitHooksOf(int64_t owner) {
  auto it = hooks_waiting_.find(owner);
  if (it == hooks_waiting_.end()) return;
  for (int64_t id : it->second) EmitSubmitted(id);
  hooks_waiting_.erase(it);
}

Status Exporter::Submitted(const TaskSubmitted& e) {
  const int64_t id = e.id;
  Known& t = tasks_[id];
  t.type = std::string(e.type);
  t.value = Json::parse(e.inputs, nullptr, /*allow_exceptions=*/false);
  if (t.value.is_discarded()) {
    return Status::Corruption("task_submitted " + std::to_string(id) +
                              ": its inputs are not JSON");
  }
  t.parent = e.parent_id;
  t.finally_for = e.finally_for;
  t.initial = e.origin == "Initial";
  auto r = retried_.find(id);
  if (r != retried_.end()) t.retried_later = r->second;
  if (t.finally_for != 0 && tasks_.count(t.finally_for) == 0) {
    return Status::Corruption("task_submitted " + std::to_string(id) +
                              " names an unknown finally_for");
  }
  // Seeds now; children when their spawner's completion is written;
  // hooks (v1) once their owner has succeeded.
  if (t.initial) EmitSubmitted(id);
  if (t.finally_for != 0 && !v2_) {
    hooks_waiting_[t.finally_for].push_back(id);
    if (tasks_[t.finally_for].completed) EmitHooksOf(t.finally_for);
  }
  return Status::OK();
}

void Exporter::WriteHook(Known& t, std::vector<int64_t> children) {
  Known& owner = tasks_[t.finally_for];
  // Barnum v2 runs a hook only for a task that had children; a FinallyRun
  // for one without would break its replay. Such a hook, and what it
  // spawned, is left out (docs/INTEROP.md). So is a hook that re-ran
  // (generation 2 on): v2 has one FinallyRun per task, and a wizq import
  // finds the first one stale and runs the hook again.
  if (!owner.had_children || owner.omitted || owner.hook_written) {
    t.omitted = true;
    for (int64_t c : children) tasks_[c].omitted = true;
    return;
  }
  Json kids = Json::array();
  for (int64_t c : children) {
    Known& k = tasks_[c];
    Json origin = {{"kind", "Spawned"}};
    if (owner.parent != 0) origin["parent_id"] = IdOf(tasks_[owner.parent]);
    kids.push_back(Submission(c, origin));
    k.emitted = true;
  }
  owner.hook_written = true;
  out_.push_back({{"kind", "FinallyRun"},
                  {"finally_for", IdOf(owner)},
                  {"children", kids}});
}

void Exporter::Completed(int64_t id, const std::vector<int64_t>& spawned) {
  Known& t = tasks_[id];
  std::vector<int64_t> children;
  for (int64_t c : spawned) {
    if (tasks_.count(c)) children.push_back(c);
  }
  if (t.omitted) {
    for (int64_t c : children) tasks_[c].omitted = true;
    return;
  }
  if (!t.emitted && t.finally_for == 0) EmitSubmitted(id);
  t.completed = true;
  t.had_children = !children.empty();
  if (v2_ && t.finally_for != 0) return WriteHook(t, children);
  if (!t.emitted) EmitSubmitted(id);  // v1 hook
  Json value = {{"finally_value", t.value}};
  if (v2_) {
    Json kids = Json::array();
    for (int64_t c : children) {
      kids.push_back(
          Submission(c, {{"kind", "Spawned"}, {"parent_id", IdOf(t)}}));
      tasks_[c].emitted = true;
    }
    value["children"] = kids;
  } else {
    Json ids = Json::array();
    for (int64_t c : children) ids.push_back(IdOf(tasks_[c]));
    value["spawned_task_ids"] = ids;
  }
  out_.push_back({{"kind", "TaskCompleted"},
                  {"task_id", IdOf(t)},
                  {"outcome", {{"kind", "Success"}, {"value", value}}}});
  for (int64_t c : children) EmitSubmitted(c);
  EmitHooksOf(id);
}

Json Exporter::Reason(const TaskFailed& e) const {
  const std::string kind = BarnumReasonOf(std::string(e.reason));
  Json r = {{"kind", kind}};
  if (kind == "InvalidResponse") r["message"] = std::string(e.message);
  return r;
}

void Exporter::Failed(int64_t id, const TaskFailed& e) {
  Known& t = tasks_[id];
  // v2 never retries or records a failed hook: it runs again on resume.
  if (t.omitted || (v2_ && t.finally_for != 0)) return;
  if (!t.emitted) EmitSubmitted(id);
  const uint32_t failed = IdOf(t);
  Json value = {{"reason", Reason(e)}};
  std::optional<Json> retry_line;
  bool retried = e.will_retry;
  if (!retried && t.retried_later > 0) {  // --retry-failed put it back
    t.retried_later--;
    retried = true;
  }
  if (retried) {
    const uint32_t retry = next_id_++;
    Json sub = {{"task_id", retry}, {"step", t.type}, {"value", t.value}};
    if (!v2_) sub["parent_id"] = ParentId(t.parent);
    sub["origin"] = {{"kind", "Retry"}, {"replaces", failed}};
    t.cur = retry;
    if (v2_) {
      value["retry"] = sub;
    } else {
      value["retry_task_id"] = retry;
      retry_line = Json{{"kind", "TaskSubmitted"}};
      retry_line->update(sub);
    }
  } else {
    value[v2_ ? "retry" : "retry_task_id"] = Json();
  }
  out_.push_back({{"kind", "TaskCompleted"},
                  {"task_id", failed},
                  {"outcome", {{"kind", "Failed"}, {"value", value}}}});
  if (retry_line) out_.push_back(*retry_line);
}

Status Exporter::Started(const RunStarted& e) {
  std::unique_ptr<Workflow> wf;
  WIZQ_RETURN_IF_ERROR(Workflow::Parse(std::string(e.workflow), "frozen", &wf));
  out_.push_back(
      {{"kind", "Config"},
       {"config", Json::parse(WorkflowToBarnumConfig(*wf, format_).dump())}});
  have_config_ = true;
  return Status::OK();
}

Status Exporter::Add(const Event& e) {
  if (const auto* started = std::get_if<RunStarted>(&e)) {
    return Started(*started);
  }
  if (!have_config_) return Status::Corruption("no run_started line");
  if (const auto* sub = std::get_if<TaskSubmitted>(&e)) return Submitted(*sub);
  const auto* done = std::get_if<TaskCompleted>(&e);
  const auto* failed = std::get_if<TaskFailed>(&e);
  if (done == nullptr && failed == nullptr) return Status::OK();
  const int64_t id = done != nullptr ? done->id : failed->id;
  if (tasks_.count(id) == 0) {
    return Status::Corruption(std::string(EventName(e)) + " of unknown task " +
                              std::to_string(id));
  }
  if (done != nullptr) Completed(id, done->spawned);
  if (failed != nullptr) Failed(id, *failed);
  return Status::OK();
}

std::string Exporter::Finish() {
  // A child no completion listed (v1 only: v2 has nowhere to put it).
  for (auto& [id, t] : tasks_) {
    if (!v2_ && !t.emitted && !t.omitted) EmitSubmitted(id);
  }
  std::string text;
  for (const Json& line : out_) text += line.dump() + "\n";
  return text;
}

// How many times --retry-failed put each task back (task_retried).
Status RetriedTasks(const std::vector<std::string_view>& lines,
                    std::map<int64_t, int>* out) {
  EventDecoder decoder;
  EventHeader header;
  Event event;
  for (std::string_view line : lines) {
    WIZQ_RETURN_IF_ERROR(decoder.Decode(line, &header, &event));
    if (const auto* r = std::get_if<TaskRetried>(&event)) (*out)[r->id]++;
  }
  return Status::OK();
}

}  // namespace

Status BarnumLogFromAudit(const std::vector<std::string_view>& lines,
                          BarnumFormat format, std::string* log) {
  std::map<int64_t, int> retried;
  WIZQ_RETURN_IF_ERROR(RetriedTasks(lines, &retried));
  Exporter ex(format, std::move(retried));
  EventDecoder decoder;
  for (std::string_view line : lines) {
    EventHeader header;
    Event event;
    WIZQ_RETURN_IF_ERROR(decoder.Decode(line, &header, &event));
    Status s = ex.Add(event);
    if (!s.ok()) return s.Annotate("audit seq " + std::to_string(header.seq));
  }
  *log = ex.Finish();
  return Status::OK();
}

Status ExportBarnum(Store& store, BarnumFormat format, std::string* log) {
  std::vector<EventRecord> events;
  std::vector<EventRecord> page;
  const size_t kPage = 1 << 16;
  do {
    const int64_t after = events.empty() ? 0 : events.back().seq;
    WIZQ_RETURN_IF_ERROR(store.ReadEvents(after, kPage, &page));
    for (EventRecord& rec : page) events.push_back(std::move(rec));
  } while (page.size() == kPage);
  std::vector<std::string_view> lines;
  for (const EventRecord& rec : events) lines.push_back(rec.line);
  return BarnumLogFromAudit(lines, format, log)
      .Annotate(store.DisplayLocation());
}

}  // namespace wizq
