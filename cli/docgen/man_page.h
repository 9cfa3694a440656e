// The man pages: wizq(1), and wizq-COMMAND(1) for every command and
// subcommand (wizq-agent-take(1)), generated at build time by `wizq __man
// DIR` from the command tree that --help prints (command_tree.h), the
// tables of exit codes (util/exit_code.h) and environment variables
// (util/environment.h), and the descriptions and examples of man_text.h.
#ifndef WIZQ_CLI_DOCGEN_MAN_PAGE_H_
#define WIZQ_CLI_DOCGEN_MAN_PAGE_H_

#include <CLI/CLI.hpp>
#include <string>

namespace wizq::docgen {

// "wizq", "wizq-run", "wizq-agent-take": the page's name (and file name
// without ".1").
std::string ManPageName(const CLI::App& cmd);

// The page of `cmd` in man(7) format. `date` is YYYY-MM-DD.
std::string ManPage(const CLI::App& cmd, const std::string& version,
                    const std::string& date);

// Writes every page (NAME.1) into `dir`, creating it; the date is that of
// SOURCE_DATE_EPOCH when it is set (reproducible builds), else today's.
// Returns the exit code, having named on stderr what failed.
int WriteManPages(const CLI::App& root, const std::string& version,
                  const std::string& dir);

}  // namespace wizq::docgen

#endif  // WIZQ_CLI_DOCGEN_MAN_PAGE_H_
