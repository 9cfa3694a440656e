// store_tool: one change to a run through the store contract, made by
// another process, for the store tests (tests/store/, tests/pg/): attaches
// to the run at --location/--dir (--schema: the PostgreSQL store's),
// waits --delay-ms, then either submits one task of step --type with JSON
// --inputs, or, with --claim-all, claims the tasks of step --type one at a
// time as a worker, completing each and printing its id on a line of its
// own, until none is left. Exits 0 (1 on an error, printed).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "queue/store.h"

namespace {

wizq::Status Submit(wizq::Store* store, const std::string& type,
                    const std::string& inputs) {
  wizq::NewTask t;
  t.type = type;
  t.inputs = inputs;
  return store->Transact([&](wizq::StoreTxn& txn) {
    int64_t id = 0;
    bool dup = false;
    return txn.Submit(t, &id, &dup);
  });
}

wizq::Status ClaimAll(wizq::Store* store, const std::string& type) {
  wizq::ClaimFilter f;
  f.steps = {type};
  while (true) {
    std::vector<wizq::Task> got;
    WIZQ_RETURN_IF_ERROR(store->Transact([&](wizq::StoreTxn& txn) {
      got.clear();
      return txn.Claim(f, &got);
    }));
    if (got.empty()) return wizq::Status::OK();
    std::vector<int64_t> ids;
    WIZQ_RETURN_IF_ERROR(store->Transact([&](wizq::StoreTxn& txn) {
      return txn.Complete(got[0].id, wizq::Completion(), &ids);
    }));
    std::printf("%lld\n", static_cast<long long>(got[0].id));
  }
}

}  // namespace

int main(int argc, char** argv) {
  wizq::StoreOptions o;
  int delay_ms = 0;
  bool claim_all = false;
  std::string type = "S", inputs = "{}";
  for (int i = 1; i < argc; i++) {
    const std::string k = argv[i];
    if (k == "--claim-all") {
      claim_all = true;
      continue;
    }
    if (i + 1 >= argc) break;
    const std::string v = argv[++i];
    if (k == "--location") o.location = v;
    if (k == "--dir") o.install_dir = v;
    if (k == "--run-id") o.run_id = v;
    if (k == "--schema") o.schema = v;
    if (k == "--delay-ms") delay_ms = std::atoi(v.c_str());
    if (k == "--type") type = v;
    if (k == "--inputs") inputs = v;
  }
  o.mode = wizq::OpenMode::kAttach;
  o.leases_only = !claim_all;
  std::unique_ptr<wizq::Store> store;
  wizq::Status s = wizq::Store::Open(o, &store, nullptr);
  if (s.ok()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    s = claim_all ? ClaimAll(store.get(), type)
                  : Submit(store.get(), type, inputs);
  }
  if (s.ok()) s = store->Close();
  if (!s.ok()) {
    std::fprintf(stderr, "store_tool: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
