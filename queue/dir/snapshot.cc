#include "queue/dir/snapshot.h"

#include <simdjson.h>

#include "queue/json_util.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

void WriteNullableId(JsonWriter* w, std::string_view key, int64_t id) {
  w->Key(key);
  if (id == 0) {
    w->Null();
  } else {
    w->Int(id);
  }
}

void EncodeTask(const Task& t, JsonWriter* w) {
  w->BeginObject();
  w->Key("id").Int(t.id);
  w->Field("type", t.type);
  w->Key("inputs").RawValue(t.inputs);
  w->Field("state", TaskStateName(t.state));
  w->Key("attempts").Int(t.attempts);
  w->Key("max_attempts").Int(t.max_attempts);
  WriteNullableId(w, "parent_id", t.parent_id);
  w->Field("origin", OriginName(t.origin));
  w->Field("dedup_key", t.dedup_key);
  w->Key("claimed_by");
  if (t.claimed_by.empty()) {
    w->Null();
  } else {
    w->String(t.claimed_by);
  }
  w->Key("children").BeginArray();
  for (int64_t c : t.children) w->Int(c);
  w->EndArray();
  w->Field("has_finally", t.has_finally);
  WriteNullableId(w, "finally_for", t.finally_for);
  WriteNullableId(w, "finally_task", t.finally_task);
  // Only when set, so a run without re-run hooks writes what it did before.
  if (t.generation > 1) w->Key("generation").Int(t.generation);
  if (t.hook_stale) w->Field("hook_stale", true);
  w->Key("error");
  if (t.error_reason.empty()) {
    w->Null();
  } else {
    w->BeginObject().Field("reason", t.error_reason);
    w->Field("message", t.error_message).EndObject();
  }
  w->Key("created_ms").Int(t.created_ms);
  w->Key("updated_ms").Int(t.updated_ms);
  w->Key("retry_at_ms").Int(t.retry_at_ms);
  if (t.reused_from != 0) w->Key("reused_from").Int(t.reused_from);
  if (t.started) w->Key("started").Bool(true);  // the held attempt started
  if (!t.claim_host.empty()) w->Field("claim_host", t.claim_host);
  if (!t.answer.empty()) {  // a Prompt task's recorded answer (SPEC §10)
    w->Key("answer").RawValue(t.answer);
    w->Field("answer_source", t.answer_source);
  }
  // Only while a lease holds the task, or an agent took it (SPEC §9).
  if (!t.lease_token.empty() || !t.agent.empty()) {
    w->Key("lease").BeginObject().Field("token", t.lease_token);
    w->Key("expires_ms").Int(t.lease_expires_ms);
    w->Field("agent", t.agent).EndObject();
  }
  // Only while a leased attempt with a time limit runs (SPEC §9).
  if (t.timeout_ms > 0) {
    w->Key("attempt_timeout").BeginObject();
    w->Key("timeout_ms").Int(t.timeout_ms);
    w->Key("deadline_ms").Int(t.deadline_ms);
    w->Field("retry_on_timeout", t.retry_on_timeout).EndObject();
  }
  w->EndObject();
}

}  // namespace

std::string EncodeSnapshot(const QueueState& state, uint64_t audit_offset) {
  const RunInfo& run = state.run();
  std::string out;
  out.reserve(256 + state.tasks().size() * 320 + run.workflow.size());
  JsonWriter w(&out);
  w.BeginObject();
  w.Field("format", kSnapshotFormat);
  w.Key("version").Int(kSnapshotVersion);
  w.Field("wizq_version", run.wizq_version);
  w.Field("run_id", run.run_id);
  w.Field("install_dir", run.install_dir);
  w.Field("status", RunStatusName(run.status));
  w.Key("seq").Int(state.last_seq());
  w.Key("audit_offset").Uint(audit_offset);
  w.Key("next_task_id").Int(state.next_task_id());
  w.Key("started_ms").Int(run.started_ms);
  w.Key("finished_ms").Int(run.finished_ms);
  w.Key("resumes").Int(run.resumes);
  if (!run.previous_run.empty()) w.Field("previous_run", run.previous_run);
  if (run.no_reuse) w.Key("no_reuse").Bool(true);
  if (!run.from.empty()) {
    w.Key("from").BeginArray();
    for (const std::string& f : run.from) w.String(f);
    w.EndArray();
  }
  if (run.adopted != 0) w.Key("adopted").Int(run.adopted);
  w.Key("input").RawValue(run.entry_input);
  w.Key("workflow").RawValue(run.workflow);
  w.Key("counts").BeginObject();
  for (TaskState s : {TaskState::kPending, TaskState::kInProgress,
                      TaskState::kDone, TaskState::kFailed}) {
    w.Key(TaskStateName(s)).Int(state.count(s));
  }
  w.EndObject();
  w.Key("tasks").BeginArray();
  for (const Task& t : state.tasks()) EncodeTask(t, &w);
  w.EndArray();
  w.EndObject();
  out.push_back('\n');
  return out;
}

}  // namespace wizq
