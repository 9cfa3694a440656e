#include "queue/run_place.h"

#include <utility>

#include "fs/path.h"
#include "queue/pg/pg_location.h"
#include "util/shell_quote.h"

namespace wizq {

Status RunPlace::Open(StoreOptions o, std::unique_ptr<Store>* out,
                      OpenReport* report) const {
  o.location = store;
  o.schema = schema;
  o.run_id = run_id;
  if (!RealPath(dir, &o.install_dir).ok()) {
    return Status::NotFound("no wizq run in " + dir +
                            " (the directory does not exist)");
  }
  std::unique_ptr<Store> opened;
  WIZQ_RETURN_IF_ERROR(Store::Open(o, &opened, report));
  if (!database() && !run_id.empty()) {
    RunInfo run;
    WIZQ_RETURN_IF_ERROR(opened->GetRun(&run));
    if (run.run_id != run_id) {
      opened->Close().IgnoreError();
      return Status::NotFound("no wizq run " + run_id + " in " + dir +
                              " (the run there is " + run.run_id + ")");
    }
  }
  *out = std::move(opened);
  return Status::OK();
}

std::string RunPlace::CommandOptions(const std::string& run) const {
  if (!database()) return "";
  std::string out;
  if (store_from_flag) {
    out = " --store " + ShellQuote(PgLocationWithoutPassword(store));
  }
  if (!schema.empty()) out += " --schema " + ShellQuote(schema);
  return out + " --run-id " + ShellQuote(run);
}

std::string RunPlace::Describe() const {
  if (!database()) return "in " + dir;
  const std::string where = "in the store " + RedactPgLocation(store);
  return run_id.empty() ? where : run_id + " " + where;
}

}  // namespace wizq
