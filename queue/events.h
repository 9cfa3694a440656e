// The audit events of `.wizard/audit.jsonl`: one struct per kind, each
// encoding and decoding itself (LevelDB's VersionEdit::EncodeTo/DecodeFrom).
// The line format, the commit and crc fields and the free space are in
// docs/FORMAT.md and audit/log_format.h; this header owns what each event
// carries, and is the one place events are decoded: QueueState and
// RunHistory (queue/), orchestrator/reuse.cc, the Barnum export and
// `wizq log` (EventFieldReader) read Store::ReadEvents' lines with it.
//
// A line is {"seq":N,"ts":MS,"event":"<kName>",<fields>} (+ "commit", "crc",
// added by the LogWriter). EncodeTo writes <fields>, always in the order
// below: the bytes are the format (existing logs and the fuzz corpora hold
// them). DecodeField reads one field; fields it does not know (crc, commit,
// a newer wizq's additions) are skipped. A field of the wrong JSON type is a
// simdjson error ("audit event does not parse"); what the values mean is
// checked when QueueState applies the event (queue/dir/state.cc), with messages
// that name the seq and the event.
//
// Strings are views: into the caller's strings when encoding, into the line
// (or the parser's buffer, for a string with escapes) when decoding. An
// event lives no longer than what it views.
//
// Adding an event kind (e.g. lease_renewed):
//   1. a struct here with kName, its fields (the format doc line as a
//      comment), EncodeTo and DecodeField (events.cc); equality is one
//      template for every kind (the encoded bytes);
//   2. the struct in the `Event` variant below (an event is known by its
//      kName, docs/FORMAT.md lists it);
//   3. if it changes a task or the run: `Status Apply(const NewEvent&,
//      int64_t ts)` in QueueState (queue/dir/state.{h,cc}; std::visit
//      refuses to compile without it); a purely informational event says
//      `kInformational = true` instead and needs none;
//   4. where a transition writes it, `DirQueue::Stage(NewEvent{...})`;
//   5. its row in the event table of docs/FORMAT.md;
//   6. a golden line in tests/queue_events_test.cc; if it changes a task or
//      the run, the same change in the reference fold of
//      tests/store/contract_oracle_test.cc (which shares no code with this).
// `wizq log --table` and reports (HistoryBuilder, queue/history.cc) show
// it once it has an `On` overload there; without one they skip it.
// Older wizq versions skip an event kind they do not know.
#ifndef WIZQ_QUEUE_EVENTS_H_
#define WIZQ_QUEUE_EVENTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "util/json_writer.h"
#include "util/status.h"

namespace wizq {

// A field's value being decoded (simdjson's On-Demand value, defined in
// queue/event_value.h for the files that decode), and the error of a
// decode: a simdjson::error_code, 0 (SUCCESS) when none.
class EventValue;
using EventError = int;

// Fields of every line, written by LogWriter::BeginEvent.
struct EventHeader {
  int64_t seq = 0;        // rises by exactly 1 per line, from 1
  int64_t ts = 0;         // ms since the Unix epoch
  std::string_view name;  // "event"
};

// A run begins: the first line of every log.
struct RunStarted {
  static constexpr std::string_view kName = "run_started";
  int64_t format = 0;  // format version of the files (kSnapshotVersion)
  std::string_view run_id;
  std::string_view install_dir;
  std::string_view wizq_version;
  int64_t pid = 0;
  std::string_view input;     // entry input, JSON text
  std::string_view workflow;  // the frozen workflow, JSON text
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// A stopped run is taken up again (no other worker was alive).
struct RunResumed {
  static constexpr std::string_view kName = "run_resumed";
  int64_t tasks_pending = 0;
  int64_t tasks_done = 0;
  int64_t tasks_reset = 0;  // in_progress tasks put back to pending
  int64_t tasks_lost = 0;   // in_progress tasks failed with worker_lost
  // Of tasks_reset, those whose attempt still runs or finished on its own:
  // put back without charge, to be adopted. Written only when non-zero.
  int64_t tasks_adopted = 0;
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// The previous run was archived (the second event of the new run).
struct QueueArchived {
  static constexpr std::string_view kName = "queue_archived";
  std::string_view reason;
  std::string_view path;  // the archive directory
  // What the new run may reuse of it (orchestrator/reuse.h), as chosen
  // when it started: nothing (--no-reuse), and the steps and previous ids
  // that run live (--from). Written only when set.
  bool no_reuse = false;
  std::vector<std::string> from;
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// A worker process starts working on the run.
struct WorkerJoined {
  static constexpr std::string_view kName = "worker_joined";
  static constexpr bool kInformational = true;  // changes no state
  std::string_view worker;                      // its id, "w<pid>-<hex>"
  int64_t pid = 0;
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// A worker process stops in order (Queue::Close).
struct WorkerLeft {
  static constexpr std::string_view kName = "worker_left";
  static constexpr bool kInformational = true;  // changes no state
  std::string_view worker;
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// A new task, pending.
struct TaskSubmitted {
  static constexpr std::string_view kName = "task_submitted";
  int64_t id = 0;
  std::string_view type;
  std::string_view inputs;  // JSON text
  int64_t parent_id = 0;    // 0 (null): a root
  std::string_view origin;  // OriginName(): Initial, Spawned, Retry, Finally
  std::string_view dedup_key;
  int64_t max_attempts = 0;
  bool has_finally = false;
  int64_t finally_for = 0;  // the owner of a finally hook, 0 (null) if none
  // A hook's generation (Task::generation); written only when above 1, so
  // a first hook's line is what it was before generations existed.
  int64_t generation = 1;
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// A submission folded into an existing task with the same dedup key.
struct TaskDeduplicated {
  static constexpr std::string_view kName = "task_deduplicated";
  static constexpr bool kInformational = true;  // changes no state
  std::string_view type;
  std::string_view dedup_key;
  int64_t existing_id = 0;
  int64_t parent_id = 0;  // 0 (null): a root
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// pending -> in_progress; attempts are counted at claim.
struct TaskClaimed {
  static constexpr std::string_view kName = "task_claimed";
  int64_t id = 0;
  std::string_view type;
  std::string_view worker;  // the holder (ClaimHolder::kWorker)
  int64_t attempt = 0;
  // A claim held by a lease (ClaimHolder::kLease, SPEC §9); written only
  // when `lease` is set. `worker` is then the process that took it.
  std::string_view lease;        // the token
  int64_t lease_expires_ms = 0;  // wall-clock ms
  std::string_view agent;        // the agent's name; written only if given
  // The attempt's time limit, ms after the claim (the step's `timeout`),
  // and whether a timed-out attempt is retried (the step's option); written
  // only with a lease and a limit (timeout_ms > 0).
  int64_t timeout_ms = 0;
  bool retry_on_timeout = true;
  // The host the claim was made on (HostId::Key, queue/host.h), written
  // after `attempt`; only if known (a log from before hosts were recorded
  // has none, nor has an imported attempt).
  std::string_view host = {};
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// in_progress -> done, with the ids its response spawned in the same batch.
struct TaskCompleted {
  static constexpr std::string_view kName = "task_completed";
  int64_t id = 0;
  std::string_view worker;
  std::vector<int64_t> spawned;       // new task ids
  std::vector<int64_t> deduplicated;  // existing ids a child was folded into
  // What defined the task's step when it completed (tasks/workflow/def_hash.h);
  // written only when known (never by wizq before def_hash existed).
  std::string_view def_hash;
  // A task completed from a previous run's recorded result without running
  // (orchestrator/reuse.h): "reused":{"run_id","id"}, written only then.
  // Such a task goes from pending to done, with no claim.
  std::string_view reused_run_id;
  int64_t reused_id = 0;
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// in_progress -> failed, or pending again (a retry, not before retry_at).
struct TaskFailed {
  static constexpr std::string_view kName = "task_failed";
  int64_t id = 0;
  std::string_view worker;
  // exit_code, timeout, invalid_response, worker_lost, agent_failed,
  // agent_disconnected
  std::string_view reason;
  std::string_view message;
  int64_t attempt = 0;
  bool will_retry = false;
  int64_t retry_at = 0;  // ms; written only when will_retry
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// in_progress -> pending: its worker died, or was interrupted.
struct TaskReset {
  static constexpr std::string_view kName = "task_reset";
  int64_t id = 0;
  std::string_view worker;  // the one that held it
  std::string_view reason;  // worker_lost, interrupted, released, ...
  std::string_view message;
  int64_t attempt = 0;
  bool refund = false;  // the attempt does not count; written only when true
  // The attempt never began (claimed ahead, or waiting in the spawner, when
  // its worker died): no work was lost. Written only when true.
  bool never_started = false;
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// Every task settled: the run is over.
struct RunFinished {
  static constexpr std::string_view kName = "run_finished";
  std::string_view status;  // RunStatusName(): completed, failed
  bool resumed = false;
  int64_t tasks_total = 0;
  int64_t tasks_done = 0;
  int64_t tasks_failed = 0;
  int64_t duration_ms = 0;
  // Tasks completed from a previous run's results, and tasks that ran
  // (done or failed, not reused). Written when has_reuse_counts (every run
  // of a wizq that reuses; absent from older lines).
  bool has_reuse_counts = false;
  int64_t tasks_reused = 0;
  int64_t tasks_live = 0;
  // Attempts adopted over the run (task_adopted); written only when
  // non-zero.
  int64_t tasks_adopted = 0;
  // Tasks that finished before an import (QueueState::imported), not in
  // tasks_live; written only when non-zero.
  int64_t tasks_imported = 0;
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// failed -> pending with a fresh attempt budget (`wizq run --retry-failed`):
// max_attempts becomes attempts + the step's budget. A finished run is
// running again from this event on.
struct TaskRetried {
  static constexpr std::string_view kName = "task_retried";
  int64_t id = 0;
  std::string_view reason;  // why it is retried ("retry_failed")
  std::string_view error;   // the failure reason it had
  int64_t max_attempts = 0;
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// A fresh run was recorded from another tool's state log (a Barnum run
// continued with `wizq run --resume-from`): the second event of the run.
// The counts are the source's own classification of its tasks.
struct RunImported {
  static constexpr std::string_view kName = "run_imported";
  static constexpr bool kInformational = true;  // changes no state
  std::string_view source;    // what was imported, e.g. "barnum-v2:/abs/log"
  int64_t tasks_pending = 0;  // to run
  int64_t tasks_waiting = 0;  // ran, waiting for their children
  int64_t tasks_done = 0;     // finished (succeeded, dropped or replaced)
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// A human gate's answer is recorded (SPEC §10): the Prompt task `id`,
// pending or held by `worker`, now has `answer` (JSON) and runs with it.
// Code: queue/events_gate.cc.
struct TaskAnswered {
  static constexpr std::string_view kName = "task_answered";
  int64_t id = 0;
  std::string_view answer;  // JSON text
  std::string_view source;  // terminal, flag, default
  std::string_view worker;  // who recorded it
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// Nothing is left to run but human gates without an answer: the run's
// status becomes paused until a run resumes it (SPEC §10).
struct RunPaused {
  static constexpr std::string_view kName = "run_paused";
  // JSON array text: [{"id":N,"step":S,"mode":M,"message":T}, ...]
  std::string_view waiting;
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// An agent renewed the lease on an in_progress task (SPEC §9).
struct LeaseRenewed {
  static constexpr std::string_view kName = "lease_renewed";
  int64_t id = 0;
  int64_t lease_expires_ms = 0;  // the new expiry, wall-clock ms
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// The result of an attempt whose worker died is taken as that attempt's
// (docs/PROTOCOL.md, "Orphans after a crash"): its process tree finished on
// its own, or was waited for, instead of running the task again. Written
// in the batch just before the task_completed or task_failed it explains.
struct TaskAdopted {
  static constexpr std::string_view kName = "task_adopted";
  int64_t id = 0;
  std::string_view worker;  // the worker that adopted it
  int64_t attempt = 0;      // the adopted attempt's number
  int64_t waited_ms = 0;    // how long it was waited for after the claim
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// The current attempt of a held task started: its payload went to a
// process or a handler. A reclaim then charges it wherever it runs.
struct TaskStarted {
  static constexpr std::string_view kName = "task_started";
  int64_t id = 0;
  std::string_view worker;  // the holder
  int64_t attempt = 0;
  void EncodeTo(JsonWriter& w) const;
  EventError DecodeField(std::string_view key, EventValue v);
};

// An event this wizq does not know (a newer one's): skipped.
struct UnknownEvent {
  static constexpr bool kInformational = true;
  void EncodeTo(JsonWriter&) const {}
  EventError DecodeField(std::string_view key, EventValue v);  // skips all
  bool operator==(const UnknownEvent&) const { return true; }
};

// Every kind, known by kName. UnknownEvent must stay the first (the
// default) alternative.
using Event =
    std::variant<UnknownEvent, RunStarted, RunResumed, QueueArchived,
                 WorkerJoined, WorkerLeft, TaskSubmitted, TaskDeduplicated,
                 TaskClaimed, TaskCompleted, TaskFailed, TaskReset, RunFinished,
                 TaskRetried, RunImported, TaskAnswered, RunPaused,
                 LeaseRenewed, TaskAdopted, TaskStarted>;

// Where a store's shared rules stage an event (queue/txn_rules.h,
// queue/import.h): the store's own Stage of whichever event it holds. The
// event's text fields are views: they stay valid only during the call.
using EventSink = std::function<Status(const Event&)>;

// Calls `stage` with the event `event` holds (a store's Stage template);
// an UnknownEvent is never staged (InvalidArgument).
template <typename F>
Status StageEvent(const Event& event, F&& stage) {
  return std::visit(
      [&](const auto& e) -> Status {
        if constexpr (std::is_same_v<std::decay_t<decltype(e)>, UnknownEvent>) {
          return Status::InvalidArgument("an unknown event is not staged");
        } else {
          return stage(e);
        }
      },
      event);
}

// Two events of a kind are equal when they encode to the same bytes (the
// bytes are the format): one rule for every kind, so that a new kind needs
// no comparison of its own.
template <typename E, typename = decltype(E::kName)>
bool operator==(const E& a, const E& b) {
  std::string x, y;
  JsonWriter wx(&x), wy(&y);
  wx.BeginObject();
  a.EncodeTo(wx);
  wy.BeginObject();
  b.EncodeTo(wy);
  return x == y;
}

// Whether events of kind E change no task and no run state (they have
// `kInformational = true`): QueueState applies them as nothing, so a new
// informational kind needs no Apply overload. Every other kind must have
// one (std::visit refuses to compile without it).
template <typename E, typename = void>
struct IsInformational : std::false_type {};
template <typename E>
struct IsInformational<E, std::void_t<decltype(E::kInformational)>>
    : std::bool_constant<E::kInformational> {};

// The name of the event held (the header's name for an UnknownEvent).
std::string_view EventName(const Event& e);

// Parses one line into its header and event. Errors (a line that is not a
// JSON object, a field of the wrong type) are Corruption "audit event does
// not parse: ...". The event views the line or `parser`'s buffers and lives
// until `parser` parses again; `line` must outlive it too.
class EventDecoder {
 public:
  EventDecoder();
  ~EventDecoder();
  EventDecoder(EventDecoder&&) noexcept;
  EventDecoder& operator=(EventDecoder&&) noexcept;

  Status Decode(std::string_view line, EventHeader* header, Event* event);

  struct Parser;  // simdjson's (queue/event_value.h)

 private:
  std::unique_ptr<Parser> parser_;
  std::string buffer_;  // the line and simdjson's padding, reused
};

// One field of an event line as it is written, for views that show every
// field of any event, known kind or not (`wizq log`).
struct EventField {
  std::string key;
  std::string json;     // the value as minified JSON text
  bool is_int = false;  // an integer: int_value
  int64_t int_value = 0;
  bool is_string = false;  // a string: text, unescaped
  std::string text;
};

// Reads the fields of a line in their order (the header's among them).
// Corruption "audit event does not parse" if it is not a JSON object.
class EventFieldReader {
 public:
  EventFieldReader();
  ~EventFieldReader();
  EventFieldReader(EventFieldReader&&) noexcept;
  EventFieldReader& operator=(EventFieldReader&&) noexcept;

  Status Read(std::string_view line, std::vector<EventField>* fields);

  struct Parser;  // simdjson's (queue/event_value.h)

 private:
  std::unique_ptr<Parser> parser_;
};

// The whole line as LogWriter writes it before commit and crc:
// {"seq":..,"ts":..,"event":"..",<fields>}. For tests and tools.
template <typename E>
std::string EncodeEventLine(int64_t seq, int64_t ts, const E& e) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("seq").Int(seq);
  w.Key("ts").Int(ts);
  w.Key("event").String(E::kName);
  e.EncodeTo(w);
  w.EndObject();
  return out;
}

}  // namespace wizq

#endif  // WIZQ_QUEUE_EVENTS_H_
