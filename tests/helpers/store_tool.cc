// store_tool: one change to a run through the store contract, made by
// another process, for the contract suite (tests/store/): attaches to the
// run at --location/--dir (--schema: the PostgreSQL store's), waits --delay-ms,
// submits one task of step
// --type with JSON --inputs, and exits 0 (1 on an error, printed).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "queue/store.h"

int main(int argc, char** argv) {
  wizq::StoreOptions o;
  int delay_ms = 0;
  std::string type = "S", inputs = "{}";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--location") o.location = v;
    if (k == "--dir") o.install_dir = v;
    if (k == "--run-id") o.run_id = v;
    if (k == "--schema") o.schema = v;
    if (k == "--delay-ms") delay_ms = std::atoi(v.c_str());
    if (k == "--type") type = v;
    if (k == "--inputs") inputs = v;
  }
  o.mode = wizq::OpenMode::kAttach;
  o.leases_only = true;
  std::unique_ptr<wizq::Store> store;
  wizq::Status s = wizq::Store::Open(o, &store, nullptr);
  if (s.ok()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    wizq::NewTask t;
    t.type = type;
    t.inputs = inputs;
    s = store->Transact([&](wizq::StoreTxn& txn) {
      int64_t id = 0;
      bool dup = false;
      return txn.Submit(t, &id, &dup);
    });
  }
  if (s.ok()) s = store->Close();
  if (!s.ok()) {
    std::fprintf(stderr, "store_tool: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
