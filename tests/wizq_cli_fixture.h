// The fixture of the `wizq` command's tests (wizq_cli_test.cc,
// wizq_cli_tasks_test.cc): the real binary runs the workflows of
// tests/data/cli/, whose tasks record what they do in a ledger
// (tests/data/cli/lib.sh), and helpers that read the ledger and status.
#ifndef WIZQ_TESTS_WIZQ_CLI_FIXTURE_H_
#define WIZQ_TESTS_WIZQ_CLI_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "tests/test_util.h"

namespace wizq::cli_test {

namespace fs = std::filesystem;
using test::Contains;
using test::DataFile;
using test::Json;
using test::LedgerLine;
using test::ReadAll;
using test::RunWizq;
using test::ScratchDir;
using test::WizqProcess;
using test::WizqResult;

inline constexpr size_t kNone = SIZE_MAX;

class WizqCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { test::BecomeSubreaper(); }

  // `wizq run WORKFLOW --dir <scratch> [--input INPUT] [extra...]`.
  WizqResult Run(const std::string& workflow, const std::string& input,
                 std::vector<std::string> extra = {},
                 const test::SpawnOptions& opts = {}) {
    std::vector<std::string> args = {"wizq", "run", DataFile(workflow), "--dir",
                                     dir_.path()};
    if (!input.empty()) {
      args.push_back("--input");
      args.push_back(input);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return RunWizq(args, opts);
  }
  std::vector<LedgerLine> Ledger() const {
    return test::ReadLedger(dir_.path());
  }
  std::string Wizard(const std::string& name = "") const {
    return dir_.path() + "/.wizard" + (name.empty() ? "" : "/" + name);
  }

  ScratchDir dir_;
};

// Index of the first (or last) ledger line of `kind` and `role`; kNone,
// with a test failure, if there is none.
inline size_t First(const std::vector<LedgerLine>& ledger,
                    const std::string& kind, const std::string& role) {
  for (const LedgerLine& l : ledger) {
    if (l.kind == kind && l.role == role) return l.index;
  }
  ADD_FAILURE() << "no '" << kind << "' line for " << role << " in the ledger";
  return kNone;
}
inline size_t Last(const std::vector<LedgerLine>& ledger,
                   const std::string& kind, const std::string& role) {
  size_t found = kNone;
  for (const LedgerLine& l : ledger) {
    if (l.kind == kind && l.role == role) found = l.index;
  }
  if (found == kNone) {
    ADD_FAILURE() << "no '" << kind << "' line for " << role
                  << " in the ledger";
  }
  return found;
}

// The one task of `type` in a status document that is (or is not) a
// finally hook; null, with a test failure, if there is not exactly one.
inline Json OneTask(const Json& st, const std::string& type,
                    bool hook = false) {
  std::vector<Json> found;
  for (const Json& t : test::FindTasks(st, type)) {
    if ((t["origin"] == "Finally") == hook) found.push_back(t);
  }
  if (found.size() != 1) {
    ADD_FAILURE() << found.size() << " tasks of type " << type
                  << (hook ? " (finally)" : "") << " in " << st.dump();
    return Json();
  }
  return found[0];
}

// seq of the first audit event `event` about task `id` (0 if none).
inline int64_t SeqOf(const std::vector<Json>& audit, const std::string& event,
                     int64_t id) {
  for (const Json& e : audit) {
    if (e["event"] == event && e.value("id", int64_t{0}) == id) {
      return e["seq"];
    }
  }
  return 0;
}

}  // namespace wizq::cli_test

#endif  // WIZQ_TESTS_WIZQ_CLI_FIXTURE_H_
