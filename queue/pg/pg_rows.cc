// The PostgreSQL store's rows as the contract's structs (queue/pg/pg_work.h):
// the select lists of a task and a run, their decoders, and the literals
// that carry lists as one bound parameter.
#include <simdjson.h>

#include "queue/pg/pg_result.h"
#include "queue/pg/pg_work.h"
#include "util/json_writer.h"

namespace wizq {

std::string PgSchemaSql(std::string_view sql, const std::string& quoted) {
  std::string out(sql);
  const std::string_view tag = "{s}";
  size_t pos = 0;
  while ((pos = out.find(tag, pos)) != std::string::npos) {
    out.replace(pos, tag.size(), quoted);
    pos += quoted.size();
  }
  return out;
}

// Every element double-quoted, with `"` and `\` escaped: the array input
// syntax reads any text back unchanged.
std::string PgArray(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); i++) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string PgIntArray(const std::vector<int64_t>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); i++) {
    if (i > 0) out += ',';
    out += std::to_string(items[i]);
  }
  return out + "}";
}

std::string PgWorkerAliveSql() {
  return "EXISTS (SELECT 1 FROM pg_catalog.pg_locks l WHERE l.locktype = "
         "'advisory' AND l.granted AND l.classid = " +
         std::to_string(kPgWorkerLockSpace) +
         "::oid AND l.objid = w.lock_key::oid AND l.objsubid = 2 AND "
         "l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname "
         "= current_database()))";
}

#define WIZQ_PG_TASK_FIELDS                                                   \
  "t.task_id, t.parent, t.step, t.inputs, t.origin, "                         \
  "coalesce(t.dedup_key, '') AS dedup_key, t.state, t.attempt, "              \
  "t.max_attempts, t.started, t.claimed_by, t.claim_host, "                   \
  "coalesce(t.claim_token, '') AS claim_token, t.claim_until_ms, "            \
  "coalesce(t.lease_token, '') AS lease_token, t.lease_expires_ms, t.agent, " \
  "t.timeout_ms, t.deadline_ms, t.retry_on_timeout, t.retry_at_ms, "          \
  "t.error_reason, t.error_message, t.created_ms, t.updated_ms, "             \
  "t.has_finally, t.finally_task, t.finally_for, t.generation, "              \
  "t.hook_stale, t.reused_from, coalesce(t.answer, '') AS answer, "           \
  "t.answer_source, t.open_children, t.settled_counted, t.hook_due, "

const char kPgTaskColumns[] = WIZQ_PG_TASK_FIELDS
    "(SELECT coalesce(string_agg(c.task_id::text, ',' ORDER BY c.task_id), "
    "'') FROM {s}.tasks c WHERE c.run = t.run AND c.parent = t.task_id) "
    "AS children";
const char kPgTaskColumnsNoChildren[] = WIZQ_PG_TASK_FIELDS "'' AS children";
#undef WIZQ_PG_TASK_FIELDS

namespace {

std::vector<int64_t> IdList(std::string_view text) {
  std::vector<int64_t> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    ids.push_back(std::strtoll(std::string(text.substr(pos, end - pos)).c_str(),
                               nullptr, 10));
    pos = end + 1;
  }
  return ids;
}

std::vector<std::string> StringList(std::string_view json) {
  std::vector<std::string> out;
  simdjson::dom::parser parser;
  simdjson::dom::array items;
  if (parser.parse(json.data(), json.size()).get(items) != simdjson::SUCCESS) {
    return out;
  }
  for (simdjson::dom::element e : items) {
    std::string_view s;
    if (e.get(s) == simdjson::SUCCESS) out.emplace_back(s);
  }
  return out;
}

}  // namespace

void PgTaskFromRow(const PgResult& r, int i, PgTask* out) {
  Task& t = out->t;
  t = Task();
  t.id = r.GetInt(i, "task_id");
  t.parent_id = r.GetInt(i, "parent");
  t.type = r.Get(i, "step");
  t.inputs = r.Get(i, "inputs");
  t.origin = static_cast<Origin>(r.GetInt(i, "origin"));
  t.dedup_key = r.Get(i, "dedup_key");
  t.state = static_cast<TaskState>(r.GetInt(i, "state"));
  t.attempts = static_cast<int>(r.GetInt(i, "attempt"));
  t.max_attempts = static_cast<int>(r.GetInt(i, "max_attempts"));
  t.started = r.GetBool(i, "started");
  t.claimed_by = r.Get(i, "claimed_by");
  t.claim_host = r.Get(i, "claim_host");
  t.lease_token = r.Get(i, "lease_token");
  t.lease_expires_ms = r.GetInt(i, "lease_expires_ms");
  t.agent = r.Get(i, "agent");
  t.timeout_ms = r.GetInt(i, "timeout_ms");
  t.deadline_ms = r.GetInt(i, "deadline_ms");
  t.retry_on_timeout = r.GetBool(i, "retry_on_timeout");
  t.retry_at_ms = r.GetInt(i, "retry_at_ms");
  t.error_reason = r.Get(i, "error_reason");
  t.error_message = r.Get(i, "error_message");
  t.created_ms = r.GetInt(i, "created_ms");
  t.updated_ms = r.GetInt(i, "updated_ms");
  t.has_finally = r.GetBool(i, "has_finally");
  t.finally_task = r.GetInt(i, "finally_task");
  t.finally_for = r.GetInt(i, "finally_for");
  t.generation = static_cast<int>(r.GetInt(i, "generation"));
  t.hook_stale = r.GetBool(i, "hook_stale");
  t.reused_from = r.GetInt(i, "reused_from");
  t.answer = r.Get(i, "answer");
  t.answer_source = r.Get(i, "answer_source");
  t.open_children = r.GetInt(i, "open_children");
  t.settled_counted = r.GetBool(i, "settled_counted");
  t.children = IdList(r.Get(i, "children"));
  out->claim_token = r.Get(i, "claim_token");
  out->claim_until_ms = r.GetInt(i, "claim_until_ms");
  out->hook_due = r.GetBool(i, "hook_due");
  out->stored = true;
  out->stored_state = t.state;
  out->stored_attempts = t.attempts;
  out->stored_token = out->claim_token;
  out->dirty = false;
}

const char kPgRunColumns[] =
    "r.run, r.run_id, r.format, r.install_dir, r.workflow, r.def_files, "
    "r.input, "
    "r.wizq_version, r.status, r.started_ms, r.finished_ms, r.resumes, "
    "r.previous_run, r.no_reuse, r.from_steps, r.next_seq, r.next_task, "
    "r.n_pending, r.n_in_progress, r.n_done, r.n_failed, r.n_settled, "
    "r.n_reused, r.n_imported, r.n_adopted, r.n_leased, r.hooks_due, "
    "r.hooks_reopened, r.pending_floor, r.held_floor, r.archived_at IS NOT "
    "NULL AS archived";

void PgRunFromRow(const PgResult& r, int i, PgRun* out) {
  *out = PgRun();
  out->run = r.GetInt(i, "run");
  RunInfo& info = out->info;
  info.format_version = static_cast<int>(r.GetInt(i, "format"));
  info.run_id = r.Get(i, "run_id");
  info.install_dir = r.Get(i, "install_dir");
  info.workflow = r.Get(i, "workflow");
  info.def_files = r.Get(i, "def_files");
  info.entry_input = r.Get(i, "input");
  info.wizq_version = r.Get(i, "wizq_version");
  info.status = static_cast<RunStatus>(r.GetInt(i, "status"));
  info.started_ms = r.GetInt(i, "started_ms");
  info.finished_ms = r.GetInt(i, "finished_ms");
  info.resumes = static_cast<int>(r.GetInt(i, "resumes"));
  info.previous_run = r.Get(i, "previous_run");
  info.no_reuse = r.GetBool(i, "no_reuse");
  info.from = StringList(r.Get(i, "from_steps"));
  info.adopted = r.GetInt(i, "n_adopted");
  out->next_seq = r.GetInt(i, "next_seq");
  out->next_task = r.GetInt(i, "next_task");
  const char* const states[] = {"n_pending", "n_in_progress", "n_done",
                                "n_failed"};
  for (int s = 0; s < 4; s++) out->by_state[s] = r.GetInt(i, states[s]);
  out->settled = r.GetInt(i, "n_settled");
  out->reused = r.GetInt(i, "n_reused");
  out->imported = r.GetInt(i, "n_imported");
  out->leased = r.GetInt(i, "n_leased");
  out->hooks_due = r.GetInt(i, "hooks_due");
  out->hooks_reopened = r.GetInt(i, "hooks_reopened");
  out->pending_floor = r.GetInt(i, "pending_floor");
  out->held_floor = r.GetInt(i, "held_floor");
  out->archived = r.GetBool(i, "archived");
}

std::string PgFromSteps(const std::vector<std::string>& from) {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  for (const std::string& s : from) w.String(s);
  w.EndArray();
  return out;
}

}  // namespace wizq
