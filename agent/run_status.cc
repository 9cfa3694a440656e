#include "agent/run_status.h"

#include <utility>
#include <vector>

#include "util/json_writer.h"

namespace wizq {
namespace {

void TaskJson(const Task& t, int64_t now_ms, JsonWriter& w) {
  w.BeginObject().Key("id").Int(t.id).Field("type", t.type);
  w.Field("state", TaskStateName(t.state)).Key("attempts").Int(t.attempts);
  w.Key("max_attempts").Int(t.max_attempts);
  if (!t.answer.empty()) {  // a Prompt task's recorded answer (SPEC §10)
    w.Key("answer").RawValue(t.answer).Field("answer_source", t.answer_source);
  }
  w.Key("parent_id");
  if (t.parent_id == 0) {
    w.Null();
  } else {
    w.Int(t.parent_id);
  }
  w.Field("origin", OriginName(t.origin));
  if (t.origin == Origin::kFinally) {  // whose hook, and which run of it
    w.Key("finally_for").Int(t.finally_for);
    if (t.generation > 1) w.Key("generation").Int(t.generation);
  }
  w.Key("inputs").RawValue(t.inputs);
  if (t.reused_from != 0) w.Key("reused_from").Int(t.reused_from);
  if (!t.error_reason.empty()) {
    w.Key("error").BeginObject().Field("reason", t.error_reason);
    w.Field("message", t.error_message).EndObject();
  }
  if (t.state == TaskState::kInProgress && !t.lease_token.empty()) {
    w.Key("lease").BeginObject().Field("agent", t.agent);
    w.Key("expires_ms").Int(t.lease_expires_ms);
    w.Key("lapses_in_ms").Int(t.lease_expires_ms - now_ms).EndObject();
  }
  // Added for `wizq status` (additive): who holds or last held it, when it
  // was submitted and last changed, when a retry may start.
  if (!t.claimed_by.empty()) w.Field("claimed_by", t.claimed_by);
  w.Key("created_ms").Int(t.created_ms).Key("updated_ms").Int(t.updated_ms);
  if (t.retry_at_ms > 0 && t.state == TaskState::kPending) {
    w.Key("retry_at_ms").Int(t.retry_at_ms);
  }
  w.EndObject();
}

Status TasksArray(StoreReads& run, int64_t now_ms,
                  const std::vector<int64_t>* only, JsonWriter& w) {
  std::vector<Task> tasks;
  if (only == nullptr) {
    WIZQ_RETURN_IF_ERROR(run.ListTasks(TaskFilter(), &tasks));
  } else {
    tasks.resize(only->size());
    for (size_t i = 0; i < only->size(); i++) {
      WIZQ_RETURN_IF_ERROR(run.GetTask((*only)[i], &tasks[i]));
    }
  }
  w.Key("tasks").BeginArray();
  for (const Task& t : tasks) TaskJson(t, now_ms, w);
  w.EndArray();
  return Status::OK();
}

void RunFields(const RunInfo& r, const RunCounts& c, JsonWriter& w) {
  w.Field("run_id", r.run_id);
  w.Field("install_dir", r.install_dir);
  w.Field("status", RunStatusName(r.status));
  w.Key("counts").BeginObject();
  for (TaskState st : {TaskState::kPending, TaskState::kInProgress,
                       TaskState::kDone, TaskState::kFailed}) {
    w.Key(TaskStateName(st)).Int(c.of(st));
  }
  w.Key("leased").Int(c.leased);
  w.EndObject();
  w.Key("reused").Int(c.reused);  // SPEC §11
  if (!r.previous_run.empty()) w.Field("previous_run", r.previous_run);
  w.Key("started_ms").Int(r.started_ms).Key("finished_ms");
  if (r.finished_ms > 0) {
    w.Int(r.finished_ms);
  } else {
    w.Null();
  }
  w.Key("resumes").Int(r.resumes).Key("adopted").Int(r.adopted);
  w.Field("wizq_version", r.wizq_version);
}

void ExtraFields(const RunInfo& r, const RunStatusExtras& extras,
                 JsonWriter& w) {
  w.Field("live_status", LiveStatus(r, extras));
  w.Key("interrupted").Bool(extras.interrupted);
  if (!extras.resume_command.empty()) {
    w.Field("resume_command", extras.resume_command);
  }
  if (extras.embedded) w.Field("embedded", true);
  if (!extras.archive_dir.empty()) w.Field("archive", extras.archive_dir);
  int64_t live = 0;
  w.Key("workers").BeginArray();
  for (const WorkerInfo& e : extras.workers) {
    live += e.alive ? 1 : 0;
    w.BeginObject().Field("id", e.id).Key("pid").Int(e.pid);
    w.Field("run_id", e.run_id).Key("started_ms").Int(e.started_ms);
    w.Key("alive").Bool(e.alive).EndObject();
  }
  w.EndArray().Key("live_workers").Int(live);
  w.Key("waiting_prompts").BeginArray();
  for (int64_t id : extras.waiting_prompts) w.Int(id);
  w.EndArray();
  if (extras.task_output_bytes >= 0) {
    w.Key("task_output_bytes").Int(extras.task_output_bytes);
  }
}

// The object, with `extras`' fields when it is given.
Status StatusJson(StoreReads& run, int64_t now_ms,
                  const RunStatusExtras* extras, std::string* out) {
  RunInfo r;
  WIZQ_RETURN_IF_ERROR(run.GetRun(&r));
  RunCounts c;
  WIZQ_RETURN_IF_ERROR(run.Counts(&c));
  std::string json;
  JsonWriter w(&json);
  w.BeginObject();
  RunFields(r, c, w);
  if (extras != nullptr) ExtraFields(r, *extras, w);
  WIZQ_RETURN_IF_ERROR(TasksArray(
      run, now_ms, extras != nullptr ? extras->only_tasks : nullptr, w));
  w.EndObject();
  *out = std::move(json);
  return Status::OK();
}

}  // namespace

Status RunStatusJson(StoreReads& run, int64_t now_ms, std::string* out) {
  return StatusJson(run, now_ms, nullptr, out);
}

const char* LiveStatus(const RunInfo& run, const RunStatusExtras& extras) {
  if (extras.interrupted) return "interrupted";
  if (!extras.archive_dir.empty() && run.status == RunStatus::kRunning) {
    return "unfinished";
  }
  return RunStatusName(run.status);
}

Status RunStatusJson(StoreReads& run, int64_t now_ms,
                     const RunStatusExtras& extras, std::string* out) {
  return StatusJson(run, now_ms, &extras, out);
}

}  // namespace wizq
