// `wizq log`: the run's events (Store::ReadEvents), readably (times, not
// epoch ms) or raw. `wizq status` is views/status.h, `wizq log --table`
// views/log_table.h.
#ifndef WIZQ_VIEWS_INSPECT_H_
#define WIZQ_VIEWS_INSPECT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "queue/run_place.h"
#include "queue/store.h"

namespace wizq {

// Prints the run's events readably, only one task's events if task_id > 0.
int PrintLog(const RunPlace& place, int64_t task_id, bool json);

// Opens the run at `place` read-only for `wizq log`: 0, or the exit
// code once the error is reported (2 no run, 3 unreadable).
int OpenForLog(const RunPlace& place, bool json, std::unique_ptr<Store>* store,
               OpenReport* report);
// Reports an error reading the opened run's events; returns the exit code.
int ReportLogError(const RunPlace& place, const Status& s, bool json);

}  // namespace wizq

#endif  // WIZQ_VIEWS_INSPECT_H_
