// The directory store's one public entry: Store::Open (queue/open_store.cc)
// calls it for a location that is no database. Every other header of
// queue/dir/ (and audit/) is private to the directory store's library
// (dir_private.h): code outside it holds a run only through queue/store.h.
#ifndef WIZQ_QUEUE_DIR_DIR_OPEN_H_
#define WIZQ_QUEUE_DIR_DIR_OPEN_H_

#include <memory>
#include <string>
#include <vector>

#include "queue/store.h"

namespace wizq {

// Where the directory store keeps a run: `<install_dir>/.wizard`. The one
// place that spells the name (docs/FORMAT.md, "Folder layout"). It is also
// the machine-local workspace of a run on this store (LocalWorkspace,
// tasks/exec/attempt_files.h), the one exception ARCHITECTURE.md lists.
inline std::string WizardDir(const std::string& install_dir) {
  return install_dir + "/.wizard";
}

// `events` (Store::ReadEvents of any store, in seq order from 1) as the
// directory store's `audit.jsonl` (docs/FORMAT.md): each line its own
// commit, with its checksum. A `.wizard/` that holds only this file opens
// as that run (`wizq export --format audit`).
std::string DirAuditLog(const std::vector<EventRecord>& events);

// Opens the run in `<options.install_dir>/.wizard/` (queue/store.h).
Status OpenDirStore(const StoreOptions& options, std::unique_ptr<Store>* out,
                    OpenReport* report);

}  // namespace wizq

#endif  // WIZQ_QUEUE_DIR_DIR_OPEN_H_
