// The options of wizq_machines_torture (driver.cc: what each means).
#ifndef WIZQ_TESTS_MACHINES_TORTURE_OPTIONS_H_
#define WIZQ_TESTS_MACHINES_TORTURE_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tests/machines/torture/faults.h"

namespace wizq::machines {

struct Options {
  std::string build, source;
  int machines = 4, faults = 300, min_per_kind = 20;
  int64_t lease_s = 5, max_seconds = 2700, run_seconds = 600;
  uint32_t seed = 0;
  std::vector<std::string> kinds = kFaultKinds;  // --kinds a,b: only those
  bool keep = false;
  bool allow_unmatched = false;  // make test: unmatched, hung reported only
};

// Parses argv into *o; std::invalid_argument naming what is wrong.
bool ParseArgs(int argc, char** argv, Options* o);

}  // namespace wizq::machines

#endif  // WIZQ_TESTS_MACHINES_TORTURE_OPTIONS_H_
