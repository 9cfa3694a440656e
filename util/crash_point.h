// Deterministic crash points for the crash-point sweep tests.
//
// With WIZQ_CRASH_AT=<point>:<n> in the environment, the n-th time the
// process passes CRASH_POINT("<point>") it _exit()s at once (status 86,
// kCrashExitCode): no destructor, no flush, no unlock — as close to kill -9
// at that exact instruction as a test can get. Without the variable a crash
// point costs one predictable branch.
//
// With WIZQ_CRASH_IF=<text> as well, only the passes whose text (the
// second argument: the batch of audit lines at log.before_write and
// log.after_sync) contains <text> count: `wizq crashtest` kills a run just
// before or after the commit of one event (`"event":"task_completed","id":4,`)
// whatever the batches around it.
//
// Every durable step has a point; add one whenever you add a durable step,
// and list it in kCrashPoints so the sweep covers it.
#ifndef WIZQ_UTIL_CRASH_POINT_H_
#define WIZQ_UTIL_CRASH_POINT_H_

#include <string_view>

namespace wizq {

inline constexpr int kCrashExitCode = 86;

// All points, for the sweep (tests/crash_point_test.cc).
inline constexpr const char* kCrashPoints[] = {
    "log.before_write",             // a batch built, nothing written
    "log.after_write",              // appended, not yet fdatasync'd
    "log.after_sync",               // durable, the caller not yet told
    "atomic_write.after_tmp_sync",  // e.g. a checkpoint: temp synced, not
                                    // renamed
    "atomic_write.after_rename",    // renamed, directory not yet synced
    "torn.after_copy",              // torn tail copied aside, log not cut
    "archive.after_snapshot",       // queue.json archived, audit.jsonl not yet
    "run.after_claim_commit",       // claims durable, tasks not started
    "run.after_spawn",              // a task's process started
    "run.before_result_commit",     // a task finished, result not committed
    "run.after_result_commit",      // result + children durable, not dispatched
    "run.before_finish",            // all settled, run_finished not written
    "reuse.before_commit",  // tasks completed from the previous run, staged
    "retry.before_commit",  // failed tasks put back (--retry-failed), staged
    // The human gate (SPEC §10), swept by tests/prompt_crash_test.cc with
    // a workflow that has a Prompt step (prompt.asking on a pty).
    "prompt.asking",             // a question is on the terminal, unanswered
    "gate.after_answer_commit",  // an --answer recorded, its task not run
    "gate.before_pause",         // only unanswered gates left, not paused
    "gate.after_pause",          // run_paused durable, worker still listed
    "answer.after_commit",       // `wizq answer` recorded, worker not left
    // The PostgreSQL store's COMMIT (SPEC §14), swept on a run on the
    // store by tests/pg/pg_crash_test.cc, with the run.* points.
    "pg.before_commit",      // a transaction's statements done, no COMMIT
    "pg.after_commit_sent",  // COMMIT sent to the server, its answer not read
    "pg.after_commit_ack",   // COMMIT acknowledged, the caller not yet told
};

namespace internal {
inline bool HasPrefix(const char* name, const char* prefix) {
  while (*prefix != '\0' && *name == *prefix) {
    name++;
    prefix++;
  }
  return *prefix == '\0';
}
}  // namespace internal

// The points of the human gate: the sweep of tests/crash_point_test.cc
// leaves them to the gate's own tests.
inline bool IsGateCrashPoint(const char* name) {
  return internal::HasPrefix(name, "prompt.") ||
         internal::HasPrefix(name, "gate.") ||
         internal::HasPrefix(name, "answer.");
}

// The points only a run on the PostgreSQL store passes.
inline bool IsPgCrashPoint(const char* name) {
  return internal::HasPrefix(name, "pg.");
}

namespace internal {
extern bool g_crash_points_armed;
void CrashPointSlow(const char* name, std::string_view text, bool has_text);
}  // namespace internal

inline void CrashPoint(const char* name) {
  if (internal::g_crash_points_armed) internal::CrashPointSlow(name, {}, false);
}
// A crash point whose passes WIZQ_CRASH_IF can select by `text`.
inline void CrashPoint(const char* name, std::string_view text) {
  if (internal::g_crash_points_armed)
    internal::CrashPointSlow(name, text, true);
}

}  // namespace wizq

#endif  // WIZQ_UTIL_CRASH_POINT_H_
