// Helpers of the Barnum interop tests (tests/barnum_cli_test.cc,
// tests/barnum_roundtrip_test.cc, tests/run_entry_test.cc). Header-only.
#ifndef WIZQ_TESTS_BARNUM_TEST_UTIL_H_
#define WIZQ_TESTS_BARNUM_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <string>

#include "queue/dir/state.h"
#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq::test {

// tests/data/barnum, or a file in it.
inline std::string BarnumData(const std::string& name = "") {
  return SourceDir() + "/tests/data/barnum" + (name.empty() ? "" : "/" + name);
}

// Commands run in the data folder (Barnum's rule for a resumed run).
inline SpawnOptions InBarnumData() {
  SpawnOptions o;
  o.cwd = BarnumData();
  return o;
}

// Barnum's "alive" (interop/barnum_import.h) of every task of a wizq run:
// a task is alive while it has not finished, or it succeeded and something
// under it is alive (its finally hook too when `hooks_are_tasks`, as in a
// v1 log; v2 logs give hooks no task).
inline std::map<int64_t, bool> BarnumAlive(const QueueState& s,
                                           bool hooks_are_tasks) {
  std::map<int64_t, bool> alive;
  for (auto it = s.tasks().rbegin(); it != s.tasks().rend(); ++it) {
    const Task& t = *it;
    bool a =
        t.state == TaskState::kPending || t.state == TaskState::kInProgress;
    if (t.state == TaskState::kDone) {
      for (int64_t c : t.children) {
        if (hooks_are_tasks || s.Find(c)->origin != Origin::kFinally) {
          a = a || alive[c];
        }
      }
      if (hooks_are_tasks && t.finally_task != 0)
        a = a || alive[t.finally_task];
    }
    alive[t.id] = a;
  }
  return alive;
}

}  // namespace wizq::test

#endif  // WIZQ_TESTS_BARNUM_TEST_UTIL_H_
