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

namespace {

// The directory store holds one current run, and its archive.
Status ListDirRuns(const StoreOptions& options, bool archived,
                   std::vector<RunSummary>* out) {
  StoreOptions o = options;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Store> store;
  WIZQ_RETURN_IF_ERROR(OpenDirStore(o, &store, nullptr));
  std::vector<RunRef> refs;
  WIZQ_RETURN_IF_ERROR(store->ListRuns(&refs));
  for (const RunRef& ref : refs) {
    if (ref.archived && !archived) continue;
    RunSummary s;
    s.ref = ref;
    std::unique_ptr<Store> one;
    Store* run = store.get();
    if (ref.archived) {
      WIZQ_RETURN_IF_ERROR(store->OpenRun(ref, &one));
      run = one.get();
    }
    WIZQ_RETURN_IF_ERROR(run->Counts(&s.counts));
    if (!ref.archived) {
      std::vector<WorkerInfo> workers;
      WIZQ_RETURN_IF_ERROR(run->Workers(&workers));
      for (const WorkerInfo& w : workers) s.live_workers += w.alive ? 1 : 0;
    }
    out->push_back(std::move(s));
  }
  return Status::OK();
}

}  // namespace

Status Store::ListAll(const StoreOptions& options, bool archived,
                      std::vector<RunSummary>* runs) {
  runs->clear();
  if (options.location.empty()) return ListDirRuns(options, archived, runs);
  return PgStore::ListAll(options, archived, runs);
}

}  // namespace wizq
