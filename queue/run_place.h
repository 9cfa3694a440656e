// RunPlace: where a command finds its run (SPEC §7, §14), as its options
// name it: --dir, --store, --schema and --run-id. Every command that opens
// a run takes one and opens the store through it, so that each means the
// same on every command and on both stores.
#ifndef WIZQ_QUEUE_RUN_PLACE_H_
#define WIZQ_QUEUE_RUN_PLACE_H_

#include <memory>
#include <string>

#include "queue/store.h"
#include "util/status.h"

namespace wizq {

struct RunPlace {
  // The directory store: the install directory that holds `.wizard/`. The
  // PostgreSQL store: the machine's local working directory (task output
  // and the attempt journal, a subdirectory per run: LocalWorkspace).
  std::string dir = ".";
  // "" : the directory store in `dir`; else a PostgreSQL location
  // (IsDatabaseLocation), from --store or WIZQ_STORE.
  std::string store;
  // --store named it (else WIZQ_STORE did, which a command printed for the
  // user to run inherits: it then leaves --store out).
  bool store_from_flag = false;
  std::string schema;  // the PostgreSQL store's schema ("": wizq)
  // The run: "" is the run in `dir` (the directory store) or the store's
  // most recently started current run (PostgreSQL).
  std::string run_id;

  bool database() const { return !store.empty(); }

  // Opens the run by o.mode (Store::Open), with what of `o` names the run
  // filled in from this place: location, schema, run_id, and install_dir
  // (`dir` made absolute and canonical; NotFound naming it when it does not
  // exist). On the directory store a run_id given must be the run's (else
  // NotFound naming both).
  Status Open(StoreOptions o, std::unique_ptr<Store>* out,
              OpenReport* report = nullptr) const;

  // The run as messages name it: "in DIR", or "RUN in the store URL" with
  // the URL's password removed.
  std::string Describe() const;

  // The options a printed command needs to find this run (" --store URL
  // --run-id RUN", the URL without its password; --store only when the
  // user gave it), or "" on the directory store.
  std::string CommandOptions(const std::string& run) const;
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_RUN_PLACE_H_
