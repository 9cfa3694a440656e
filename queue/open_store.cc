// Store::Open: the one place that knows every store (queue/store.h).
#include "queue/dir/dir_open.h"
#include "queue/pg/pg_store.h"
#include "queue/store.h"

namespace wizq {

bool IsDatabaseLocation(std::string_view location) {
  return location.rfind("postgresql://", 0) == 0 ||
         location.rfind("postgres://", 0) == 0 ||
         location.find('=') != std::string_view::npos;
}

Status Store::Open(const StoreOptions& options, std::unique_ptr<Store>* out,
                   OpenReport* report) {
  if (!options.location.empty()) {
    if (!IsDatabaseLocation(options.location)) {
      return Status::InvalidArgument(
          "--store takes a PostgreSQL location (postgresql://... or a libpq "
          "keyword string such as \"host=db dbname=wizq\"), not \"" +
          options.location + "\"");
    }
    return PgStore::Open(options, out, report);
  }
  return OpenDirStore(options, out, report);
}

}  // namespace wizq
