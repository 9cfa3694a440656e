// A wizq run as a Barnum state log (`wizq export --format barnum`,
// docs/INTEROP.md).
//
// The log is rebuilt from the run's audit log, in the order things
// happened: the Config (the frozen workflow in Barnum's resolved form),
// then submissions and completions as that format writes them. wizq
// retries in place; each failed attempt that was retried is written as
// Barnum writes a retry: a Failed outcome naming a new task that
// `Retry {replaces}` the failed one. Barnum ids are given in the order
// tasks and retries appear (v2 hooks have none).
#ifndef WIZQ_INTEROP_BARNUM_EXPORT_H_
#define WIZQ_INTEROP_BARNUM_EXPORT_H_

#include <string>
#include <string_view>
#include <vector>

#include "interop/barnum_log.h"
#include "util/status.h"

namespace wizq {

class Store;

// The run `store` holds, from its committed events (Store::ReadEvents: a
// consistent prefix of a live run, or a finished one).
Status ExportBarnum(Store& store, BarnumFormat format, std::string* log);

// The pure part: event lines (committed, in order; decoded by
// queue/events.h) to the log's text.
Status BarnumLogFromAudit(const std::vector<std::string_view>& lines,
                          BarnumFormat format, std::string* log);

}  // namespace wizq

#endif  // WIZQ_INTEROP_BARNUM_EXPORT_H_
