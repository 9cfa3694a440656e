// The store contract suite (queue/store.h): one set of cases that every
// store passes, run once per store (River's riverdrivertest.Exercise).
// A store enters by a StoreFactory (tests/store/*_factory.cc) that makes a
// fresh, empty place for each case: a temporary install directory for the
// directory store, a fresh schema in a throwaway cluster for PostgreSQL.
//
// The cases use the contract only: what they check is what any caller may
// rely on, on any store. Cases that need the directory's files (crashes at
// each Env operation, torn logs, snapshots) stay in the queue_*_test files.
#ifndef WIZQ_TESTS_STORE_STORE_CONTRACT_H_
#define WIZQ_TESTS_STORE_STORE_CONTRACT_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "queue/store.h"

namespace wizq::store_test {

class StoreFactory {
 public:
  virtual ~StoreFactory() = default;
  virtual std::string Name() const = 0;
  // Options naming a fresh, empty place (location, install_dir, env);
  // valid until Cleanup.
  virtual StoreOptions NewPlace() = 0;
  virtual void Cleanup() = 0;
};

// The factories the suite runs on, by name (registered at static init).
using FactoryMaker = std::function<std::unique_ptr<StoreFactory>()>;
struct Registered {
  std::string name;
  FactoryMaker make;
};
std::vector<Registered>& Factories();
inline void PrintTo(const Registered& r, std::ostream* os) { *os << r.name; }
struct Register {
  Register(std::string name, FactoryMaker make);
};

// A NewTask of step `type` with JSON `inputs`.
NewTask MakeTask(const std::string& type, const std::string& inputs,
                 int64_t parent = 0, int max_attempts = 1,
                 Origin origin = Origin::kSpawned, bool has_finally = false,
                 int64_t finally_for = 0);

class StoreContractTest : public ::testing::TestWithParam<Registered> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Options for a run "r1" on this case's place with one root task
  // Root {"n":0} (unless `roots` says otherwise).
  StoreOptions Options(std::vector<NewTask> roots = {
                           MakeTask("Root", "{\"n\":0}", 0, 1,
                                    Origin::kInitial)});
  std::unique_ptr<Store> OpenOk(const StoreOptions& o,
                                OpenReport* report = nullptr);

  // One-verb transactions; each fails the case on an error.
  int64_t Submit(Store* s, const NewTask& t, bool* dup = nullptr);
  // Claims one task for this worker (any step, no limits); 0 if none.
  int64_t ClaimAny(Store* s);
  std::vector<Task> Claim(Store* s, const ClaimFilter& f);
  std::vector<int64_t> Complete(Store* s, int64_t id,
                                std::vector<NewTask> children = {});
  bool Fail(Store* s, int64_t id, bool retryable, int64_t delay_ms = 0);
  Task Get(Store* s, int64_t id);
  RunCounts CountsOf(Store* s);
  std::vector<std::string> EventsNamed(Store* s, const std::string& name);

  std::unique_ptr<StoreFactory> factory_;
  StoreOptions place_;
};

// A ClaimFilter for every step of `steps` (their tasks and their hooks).
ClaimFilter AnyOf(std::vector<std::string> steps, int max = 1);

// The name of an event line ("task_claimed"), and a field of it.
std::string EventName(const std::string& line);
int64_t IntField(const std::string& line, const std::string& key);

}  // namespace wizq::store_test

#endif  // WIZQ_TESTS_STORE_STORE_CONTRACT_H_
