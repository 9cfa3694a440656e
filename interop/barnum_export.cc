#include "interop/barnum_export.h"

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "audit/log.h"
#include "fs/env.h"
#include "interop/barnum_config.h"
#include "interop/barnum_import.h"
#include "queue/queue.h"
#include "tasks/workflow.h"

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

  Status Event(const Json& e);
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
  Status Submitted(const Json& e);
  void Completed(int64_t id, const Json& spawned);
  void WriteHook(Known& t, std::vector<int64_t> children);
  void Failed(int64_t id, const Json& e);
  Json Reason(const Json& e) const;

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

Status Exporter::Submitted(const Json& e) {
  const int64_t id = e.value("id", int64_t{0});
  Known& t = tasks_[id];
  t.type = e.value("type", "");
  t.value = e.value("inputs", Json());
  t.parent = e["parent_id"].is_number() ? e["parent_id"].get<int64_t>() : 0;
  t.finally_for =
      e["finally_for"].is_number() ? e["finally_for"].get<int64_t>() : 0;
  t.initial = e.value("origin", "") == "Initial";
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

void Exporter::Completed(int64_t id, const Json& spawned) {
  Known& t = tasks_[id];
  std::vector<int64_t> children;
  for (const Json& c : spawned) {
    if (c.is_number() && tasks_.count(c.get<int64_t>())) {
      children.push_back(c.get<int64_t>());
    }
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

Json Exporter::Reason(const Json& e) const {
  const std::string kind = BarnumReasonOf(e.value("reason", ""));
  Json r = {{"kind", kind}};
  if (kind == "InvalidResponse") r["message"] = e.value("message", "");
  return r;
}

void Exporter::Failed(int64_t id, const Json& e) {
  Known& t = tasks_[id];
  // v2 never retries or records a failed hook: it runs again on resume.
  if (t.omitted || (v2_ && t.finally_for != 0)) return;
  if (!t.emitted) EmitSubmitted(id);
  const uint32_t failed = IdOf(t);
  Json value = {{"reason", Reason(e)}};
  std::optional<Json> retry_line;
  bool retried = e.value("will_retry", false);
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

Status Exporter::Event(const Json& e) {
  const std::string name = e.value("event", "");
  if (name == "run_started") {
    std::unique_ptr<Workflow> wf;
    WIZQ_RETURN_IF_ERROR(
        Workflow::Parse(e.value("workflow", Json()).dump(), "frozen", &wf));
    out_.push_back(
        {{"kind", "Config"},
         {"config", Json::parse(WorkflowToBarnumConfig(*wf, format_).dump())}});
    have_config_ = true;
    return Status::OK();
  }
  if (!have_config_) return Status::Corruption("no run_started line");
  if (name == "task_submitted") return Submitted(e);
  const int64_t id = e.value("id", int64_t{0});
  if ((name == "task_completed" || name == "task_failed") &&
      tasks_.count(id) == 0) {
    return Status::Corruption(name + " of unknown task " + std::to_string(id));
  }
  if (name == "task_completed") Completed(id, e.value("spawned", Json()));
  if (name == "task_failed") Failed(id, e);
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

// How many times --retry-failed put each task back (task_retried). The
// lines are wizq's own (crc-checked), so the event's name is spelled one
// way; only those lines are parsed.
std::map<int64_t, int> RetriedTasks(
    const std::vector<std::string_view>& lines) {
  std::map<int64_t, int> out;
  for (std::string_view line : lines) {
    if (line.find("\"event\":\"task_retried\"") == std::string_view::npos) {
      continue;
    }
    Json e = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (e.is_object() && e.value("event", "") == "task_retried") {
      out[e.value("id", int64_t{0})]++;
    }
  }
  return out;
}

}  // namespace

Status BarnumLogFromAudit(const std::vector<std::string_view>& lines,
                          BarnumFormat format, std::string* log) {
  Exporter ex(format, RetriedTasks(lines));
  for (std::string_view line : lines) {
    Json e = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!e.is_object())
      return Status::Corruption("an audit line does not parse");
    Status s = ex.Event(e);
    if (!s.ok()) {
      return s.Annotate("audit seq " + std::to_string(e.value("seq", 0)));
    }
  }
  *log = ex.Finish();
  return Status::OK();
}

Status ExportBarnum(Env* env, const std::string& install_dir,
                    BarnumFormat format, std::string* log) {
  const std::string dir = WizardDir(install_dir);
  const std::string path = dir + "/audit.jsonl";
  if (!env->FileExists(path)) {
    return Status::NotFound("no wizq run in " + install_dir + " (" + path +
                            " does not exist)");
  }
  // A reader, as `wizq status` (queue.h, OpenMode::kReadOnly): under the
  // lock if its file exists and can be opened, so that no batch is
  // half-appended while the log is read; else (a read-only mount, a copy)
  // without it, and a batch being written reads as a torn tail, left out.
  // Never creates the lock file.
  std::unique_ptr<FileLock> lock;
  if (env->FileExists(dir + "/lock")) {
    env->LockFile(dir + "/lock", true, &lock).IgnoreError();  // see above
  }
  std::string data;
  Status s = env->ReadFile(path, &data);
  lock.reset();
  WIZQ_RETURN_IF_ERROR(s);
  LogParseResult parsed;
  WIZQ_RETURN_IF_ERROR(ParseLog(path, data, 0, 1, &parsed));
  std::vector<std::string_view> lines;
  for (const LogRecord& r : parsed.records) lines.push_back(r.line);
  return BarnumLogFromAudit(lines, format, log).Annotate(path);
}

}  // namespace wizq
