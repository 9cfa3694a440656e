// What `wizq` says about a command line it cannot parse: CLI11's message
// with the `wizq <cmd>:` prefix, the closest command or flag ("did you
// mean --jobs?"), and with --json an `error` event on stdout as well.
#ifndef WIZQ_CLI_SUGGEST_H_
#define WIZQ_CLI_SUGGEST_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "util/closest_match.h"  // EditDistance, ClosestMatch

namespace wizq {

// When argv[1] is not a command of `app` (nor an option), prints
// `wizq: unknown command "X"; did you mean Y? ...` (and an error event
// with --json) and returns true.
bool ReportUnknownCommand(const CLI::App& app, int argc, char** argv);

// Prints a CLI11 parse error the wizq way and returns the exit code: 0 for
// --help and --version (printed by CLI11), else 2.
int ReportParseError(const CLI::App& app, const CLI::ParseError& e, int argc,
                     char** argv);

// True if the command line asks for --json (an error is then an event too).
bool WantsJson(int argc, char** argv);

}  // namespace wizq

#endif  // WIZQ_CLI_SUGGEST_H_
