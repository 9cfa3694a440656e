// The exit codes of the wizq commands (SPEC §7), in one table: the code
// returns the enumerators, and the man pages' EXIT STATUS section
// (cli/docgen/) prints the table, so the two cannot drift apart.
#ifndef WIZQ_UTIL_EXIT_CODE_H_
#define WIZQ_UTIL_EXIT_CODE_H_

#include "util/status.h"

namespace wizq {

// X(enumerator, code, name, meaning). docs/CLI.md, "Exit codes", says the
// same at length.
#define WIZQ_EXIT_CODES(X)                                                     \
  X(kExitCompleted, 0, "ok",                                                   \
    "the run completed (every task done), or the command did what it was "     \
    "asked.")                                                                  \
  X(kExitTaskFailed, 1, "task failed",                                         \
    "the run finished with a task (or finally hook) failed for good, or "      \
    "--halt stopped it after N failures (the rest stays pending); wizq agent " \
    "done: the response was invalid and the attempt failed.")                  \
  X(kExitInvalid, 2, "invalid input",                                          \
    "invalid workflow, input or arguments (a store location libpq cannot "     \
    "read, a bad --schema), or no run in the directory or the store; "         \
    "nothing ran and nothing was written.")                                    \
  X(kExitEnvironment, 3, "environment error",                                  \
    "an I/O error, a corrupt or unreadable file under .wizard/ (named with "   \
    "its byte offset), a run written by a newer wizq (left untouched), "       \
    "another run with live workers in the directory, a lost agent lease, "     \
    "or a PostgreSQL store that cannot be reached or refuses, or whose "       \
    "schema is older (wizq db migrate) or newer than this wizq's.")            \
  X(kExitPaused, 4, "paused",                                                  \
    "only human gates (Prompt steps) without an answer are left; stderr "      \
    "names each and the wizq answer command that answers it.")                 \
  X(kExitNothingToTake, 5, "nothing to take",                                  \
    "wizq agent take: no Pool task is ready ({\"status\":\"idle\"}) or the "   \
    "run has finished.")                                                       \
  X(kExitInterrupted, 130, "interrupted",                                      \
    "SIGINT (Ctrl+C), SIGTERM or SIGHUP: the running tasks were stopped and "  \
    "put back, no attempt charged; the same command resumes the run.")

enum ExitCode {
#define WIZQ_EXIT_CODE_ENUMERATOR(enumerator, code, name, meaning) \
  enumerator = code,
  WIZQ_EXIT_CODES(WIZQ_EXIT_CODE_ENUMERATOR)
#undef WIZQ_EXIT_CODE_ENUMERATOR
};

struct ExitCodeInfo {
  int code;
  const char* name;     // a few words: "environment error"
  const char* meaning;  // one or two sentences
};

inline constexpr ExitCodeInfo kExitCodes[] = {
#define WIZQ_EXIT_CODE_INFO(enumerator, code, name, meaning) \
  {code, name, meaning},
    WIZQ_EXIT_CODES(WIZQ_EXIT_CODE_INFO)
#undef WIZQ_EXIT_CODE_INFO
};

// The exit code of a command that could not open or read its run: invalid
// input when what it was told is wrong (InvalidArgument: a store location
// libpq cannot read, a bad schema name; NotFound: no such run), else an
// environment error (unreachable, refused, a newer schema...).
inline int ExitCodeOfOpen(const Status& s) {
  return s.IsInvalidArgument() || s.IsNotFound() ? kExitInvalid
                                                 : kExitEnvironment;
}

}  // namespace wizq

#endif  // WIZQ_UTIL_EXIT_CODE_H_
