// RunInfo and RunRef: what identifies a run and what it was started with,
// as every store reports it (queue/store.h).
#ifndef WIZQ_QUEUE_RUN_INFO_H_
#define WIZQ_QUEUE_RUN_INFO_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wizq {

// The format version of a run's record (RunInfo::format_version,
// run_started's `format`): what every store writes and reads (the
// directory store's queue.json carries it as kSnapshotVersion).
inline constexpr int kRunFormatVersion = 1;

enum class RunStatus { kRunning, kPaused, kCompleted, kFailed };
const char* RunStatusName(RunStatus s);
bool ParseRunStatus(std::string_view name, RunStatus* s);

// One run of a location: the current one or an archived one. `key` names
// it to Store::OpenRun (the directory store: its archive directory;
// PostgreSQL: its row); "" is the current run.
struct RunRef {
  std::string run_id;
  std::string key;
  bool archived = false;
  RunStatus status = RunStatus::kRunning;
  int64_t started_ms = 0;
  int64_t finished_ms = 0;
  bool empty() const { return run_id.empty() && key.empty(); }
};

struct RunInfo {
  int format_version = 0;  // of what recorded the run
  std::string run_id;
  std::string install_dir;
  std::string workflow;     // frozen workflow, JSON text
  std::string entry_input;  // JSON text
  std::string wizq_version;
  RunStatus status = RunStatus::kRunning;
  int64_t started_ms = 0;
  int64_t finished_ms = 0;
  int resumes = 0;  // run_resumed events so far
  // The key (RunRef::key) of the run this one replaced, archived when this
  // one started; "" if none: what reuse draws on (orchestrator/reuse.h).
  // The directory store: the archive directory's path.
  std::string previous_run;
  // What this run may reuse of previous_run, as chosen when it started
  // (queue_archived: --no-reuse, --from): a resumed run keeps it.
  bool no_reuse = false;
  std::vector<std::string> from;
  int64_t adopted = 0;  // task_adopted events so far
  // The step files the run was started with, a JSON object of path ->
  // hash (DefHasher::Files), recorded by a store that workers on several
  // machines share (PostgreSQL); "" where not recorded (the directory
  // store).
  std::string def_files;
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_RUN_INFO_H_
