// Continuing a Barnum run in wizq (`wizq run --resume-from`): Barnum's
// reconstruction, then the run wizq records (docs/INTEROP.md).
//
// Classification is Barnum's: a task submitted and never completed is
// alive; a task that succeeded is alive while any task depending on it
// (a child, a retry under it, its finally hook) is alive — the fixed
// point. Alive and not completed: pending (runs again); alive and
// completed: waiting (does not run again, waits for its children);
// everything else: done.
//
// The wizq run keeps every Barnum task as a wizq task, with these
// differences (wizq retries in place, and its ids are 1, 2, 3, ...):
//   - a `Retry {replaces}` chain is one wizq task whose earlier attempts
//     failed; the retries it consumed count against max_retries;
//   - wizq task ids are Barnum's order of first submission: Barnum task
//     b is wizq task b + 1 while no retry came before it; `ids` says
//     which Barnum ids each wizq task stands for;
//   - a v2 FinallyRun (a hook that ran, without an id in Barnum) is a
//     done Finally task after every other;
//   - a finally hook that has not fired is not created: its owner is
//     marked as having one, and wizq fires it once the owner's subtree is
//     done (also for an owner without children, which Barnum v2 skips);
//     so is a v1 hook logged before its owner's subtree was done and not
//     yet run (the reference's format example): it has no wizq task;
//   - the attempts are recorded in the order of the log's lines
//     (ImportedTask::order), and several v1 hooks of one owner are its
//     generations: a hook that ran before a task beneath its owner
//     succeeded is stale and runs again (docs/FORMAT.md).
#ifndef WIZQ_INTEROP_BARNUM_IMPORT_H_
#define WIZQ_INTEROP_BARNUM_IMPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "interop/barnum_log.h"
#include "queue/import.h"
#include "util/status.h"

namespace wizq {

// What a task of the log is, by Barnum's reconstruction.
enum class BarnumClass { kPending, kWaiting, kDone };

struct BarnumImport {
  std::string workflow_json;  // the logged Config as a wizq workflow
  RunImport run;              // the tasks, by wizq id
  // For each wizq task (index = id - 1), the Barnum ids it stands for, the
  // chain in order; empty for a v2 FinallyRun. A hook that is not kept
  // (see above) is in no entry.
  std::vector<std::vector<uint32_t>> ids;
  std::map<uint32_t, BarnumClass> classes;  // every Barnum task
};

// Classifies every task of `log` and builds the wizq run. The Config is
// validated as a workflow; problems are InvalidArgument naming the log's
// line and field. `source` goes into run_imported.
Status ImportBarnumLog(const BarnumLog& log, const std::string& source,
                       BarnumImport* out);

// Barnum's failure reason as wizq's (SPEC §3), and back.
std::string WizqReasonOf(const std::string& barnum_reason);
std::string BarnumReasonOf(const std::string& wizq_reason);

}  // namespace wizq

#endif  // WIZQ_INTEROP_BARNUM_IMPORT_H_
