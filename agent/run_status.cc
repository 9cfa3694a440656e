#include "agent/run_status.h"

#include "util/json_writer.h"

namespace wizq {
namespace {

void TaskJson(const Task& t, int64_t now_ms, JsonWriter& w) {
  w.BeginObject().Key("id").Int(t.id).Field("type", t.type);
  w.Field("state", TaskStateName(t.state)).Key("attempts").Int(t.attempts);
  w.Key("max_attempts").Int(t.max_attempts);
  w.Key("parent_id");
  if (t.parent_id == 0) {
    w.Null();
  } else {
    w.Int(t.parent_id);
  }
  w.Field("origin", OriginName(t.origin));
  w.Key("inputs").RawValue(t.inputs);
  if (!t.error_reason.empty()) {
    w.Key("error").BeginObject().Field("reason", t.error_reason);
    w.Field("message", t.error_message).EndObject();
  }
  if (t.state == TaskState::kInProgress && !t.lease_token.empty()) {
    w.Key("lease").BeginObject().Field("agent", t.agent);
    w.Key("expires_ms").Int(t.lease_expires_ms);
    w.Key("lapses_in_ms").Int(t.lease_expires_ms - now_ms).EndObject();
  }
  w.EndObject();
}

}  // namespace

std::string RunStatusJson(const QueueState& s, int64_t now_ms) {
  std::string out;
  JsonWriter w(&out);
  const RunInfo& r = s.run();
  w.BeginObject().Field("run_id", r.run_id);
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
  w.EndObject().Key("tasks").BeginArray();
  for (const Task& t : s.tasks()) TaskJson(t, now_ms, w);
  w.EndArray().EndObject();
  return out;
}

}  // namespace wizq
