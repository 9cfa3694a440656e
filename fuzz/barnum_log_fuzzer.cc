// Fuzz target: a Barnum state log (interop/barnum_log.h) and Barnum's
// reconstruction of it (interop/barnum_import.h), as `wizq run
// --resume-from` reads it.
//
// ReadBarnumLog must accept the text or return InvalidArgument naming the
// file and a line ("state.ndjson:<n>"); never crash, never throw. For an
// accepted log, ImportBarnumLog returns OK or such an InvalidArgument, and
// an OK import is one the queue accepts (ValidateImport) whose counts are
// the classes of every task of the log.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "interop/barnum_import.h"
#include "interop/barnum_log.h"
#include "queue/import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wizq;
  const std::string_view text = fuzz::AsText(data, size);
  BarnumLog log;
  Status s = ReadBarnumLog("state.ndjson", text, &log);
  if (!s.ok()) {
    FUZZ_CHECK(s.IsInvalidArgument(), s.ToString());
    FUZZ_CHECK(s.message().rfind("state.ndjson:", 0) == 0,
               "the message does not name the line: " + s.ToString());
    return 0;
  }
  BarnumImport imp;
  s = ImportBarnumLog(log, "fuzz", &imp);
  if (!s.ok()) {
    FUZZ_CHECK(s.IsInvalidArgument(), s.ToString());
    FUZZ_CHECK(s.message().rfind("state.ndjson", 0) == 0,
               "the message does not name the log: " + s.ToString());
    return 0;
  }
  FUZZ_CHECK(ValidateImport(imp.run).ok(), "an import the queue refuses");
  FUZZ_CHECK(imp.classes.size() == log.tasks.size(), "a task not classified");
  FUZZ_CHECK(
      imp.run.tasks_pending + imp.run.tasks_waiting + imp.run.tasks_done ==
          static_cast<int64_t>(log.tasks.size()),
      "counts do not add up");
  FUZZ_CHECK(imp.ids.size() == imp.run.tasks.size(), "ids and tasks differ");
  return 0;
}
