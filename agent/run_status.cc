#include "agent/run_status.h"

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

void TasksArray(const QueueState& s, int64_t now_ms,
                const std::vector<int64_t>* only, JsonWriter& w) {
  w.Key("tasks").BeginArray();
  if (only == nullptr) {
    for (const Task& t : s.tasks()) TaskJson(t, now_ms, w);
  } else {
    for (int64_t id : *only) TaskJson(*s.Find(id), now_ms, w);
  }
  w.EndArray();
}

void RunFields(const QueueState& s, JsonWriter& w) {
  const RunInfo& r = s.run();
  w.Field("run_id", r.run_id);
  w.Field("install_dir", r.install_dir);
  w.Field("status", RunStatusName(r.status));
  w.Key("counts").BeginObject();
  for (TaskState st : {TaskState::kPending, TaskState::kInProgress,
                       TaskState::kDone, TaskState::kFailed}) {
    w.Key(TaskStateName(st)).Int(s.count(st));
  }
  int64_t leased = 0;
  for (int64_t id : s.in_progress()) {
    if (!s.Find(id)->lease_token.empty()) leased++;
  }
  w.Key("leased").Int(leased);
  w.EndObject();
  w.Key("reused").Int(s.reused());  // SPEC §11
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

}  // namespace

std::string RunStatusJson(const QueueState& s, int64_t now_ms) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  RunFields(s, w);
  TasksArray(s, now_ms, nullptr, w);
  w.EndObject();
  return out;
}

const char* LiveStatus(const QueueState& s, const RunStatusExtras& extras) {
  if (extras.interrupted) return "interrupted";
  if (!extras.archive_dir.empty() && s.run().status == RunStatus::kRunning) {
    return "unfinished";
  }
  return RunStatusName(s.run().status);
}

std::string RunStatusJson(const QueueState& s, int64_t now_ms,
                          const RunStatusExtras& extras) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  RunFields(s, w);
  w.Field("live_status", LiveStatus(s, extras));
  w.Key("interrupted").Bool(extras.interrupted);
  if (!extras.resume_command.empty()) {
    w.Field("resume_command", extras.resume_command);
  }
  if (extras.embedded) w.Field("embedded", true);
  if (!extras.archive_dir.empty()) w.Field("archive", extras.archive_dir);
  int64_t live = 0;
  w.Key("workers").BeginArray();
  for (const WorkerEntry& e : extras.workers) {
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
  TasksArray(s, now_ms, extras.only_tasks, w);
  w.EndObject();
  return out;
}

}  // namespace wizq
