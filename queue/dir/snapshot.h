// The snapshot, `.wizard/queue.json`: the whole state of a run as of one
// audit seq. Format version 1 (kSnapshotVersion):
//
//   {"format":"wizq-queue","version":1,"wizq_version":"0.1.0",
//    "run_id":"...","install_dir":"/abs/canonical/path",
//    "status":"running|paused|completed|failed",
//    "seq":120,             // last audit seq included
//    "audit_offset":51234,  // byte offset in audit.jsonl just past seq
//    "next_task_id":42,
//    "started_ms":..., "finished_ms":..., "resumes":1,
//    "input":<entry input JSON>, "workflow":<frozen workflow JSON>,
//    "counts":{"pending":..,"in_progress":..,"done":..,"failed":..},
//    "tasks":[{"id":1,"type":"Step","inputs":<JSON>,"state":"done",
//              "attempts":1,"max_attempts":3,"parent_id":null,
//              "origin":"Initial","dedup_key":"...","claimed_by":"w..."|null,
//              "children":[2,3],"has_finally":false,"finally_for":null,
//              "finally_task":null,
//              "error":{"reason":"timeout","message":"..."}|null,
//              "created_ms":...,"updated_ms":...,"retry_at_ms":0}, ...]}
//
// `children` and `finally_task` are written for readers; the loader derives
// them again from `parent_id` and `finally_for`. `counts` is informational.
// Written only when set: a re-run hook's `"generation":N` (N > 1) and an
// owner's `"hook_stale":true` (Task::generation, Task::hook_stale).
// Unknown fields are ignored (a later minor addition); a higher `version` is
// refused, a lower one is archived (queue/dir/queue.cc).
#ifndef WIZQ_QUEUE_SNAPSHOT_H_
#define WIZQ_QUEUE_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "queue/dir/dir_private.h"
#include "queue/dir/state.h"
#include "queue/run_info.h"
#include "util/status.h"

namespace wizq {

inline constexpr int kSnapshotVersion = kRunFormatVersion;
inline constexpr std::string_view kSnapshotFormat = "wizq-queue";

struct SnapshotHeader {
  int version = 0;
  std::string run_id;
  std::string install_dir;
  int64_t seq = 0;
  uint64_t audit_offset = 0;
};

std::string EncodeSnapshot(const QueueState& state, uint64_t audit_offset);

// Decodes `text` (read from `path`). When the file's version is not
// kSnapshotVersion, stops after the header: the caller decides (refuse a
// newer one, archive an older one) and *state is left empty. Corruption
// names `path`, the byte offset and the field. `text` is parsed in place
// when its capacity leaves room for the parser's padding (as Env::ReadFile
// does), else copied once.
Status DecodeSnapshot(const std::string& path, const std::string& text,
                      SnapshotHeader* header, QueueState* state);

}  // namespace wizq

#endif  // WIZQ_QUEUE_SNAPSHOT_H_
