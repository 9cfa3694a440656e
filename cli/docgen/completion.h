// Shell completion for bash, zsh and fish, from the command tree that
// --help prints (command_tree.h).
//
// `wizq completion SHELL` prints a small script (completion_scripts.cc)
// that the shell loads; on every Tab it runs the hidden
//   wizq __complete SHELL WORD... CURRENT
// with the words after `wizq` up to the one being completed, and reads on
// stdout either nothing (no completion) or a first line saying what to
// complete:
//   words     the lines that follow, "VALUE" or "VALUE<TAB>DESCRIPTION"
//   files     file names (the shell lists them)
//   dirs      directory names
//   workflow  *.json and *.jsonc files, and directories
// Commands, options and option values from a fixed set come from the tree;
// step names (--from, --step) from the WORKFLOW on the command line, else
// from the run in --dir; task ids waiting for an answer (`wizq answer`,
// --answer) from the run in --dir, read as `wizq status` reads it
// (completion_values.h), within 200 ms or not at all.
#ifndef WIZQ_CLI_DOCGEN_COMPLETION_H_
#define WIZQ_CLI_DOCGEN_COMPLETION_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace wizq::docgen {

struct CompletionArgs {
  std::string shell;
};

// Adds `wizq completion SHELL` to `app`.
CLI::App* AddCompletionCommand(CLI::App& app, CompletionArgs* args);

// Prints the script for args.shell; returns the exit code.
int PrintCompletionScript(const CompletionArgs& args);

// The script that `wizq completion SHELL` prints ("" for another shell).
std::string CompletionScript(const std::string& shell);

// `wizq __complete SHELL WORD...`: argv holds SHELL and the words (the last
// one is being completed). Prints what to complete as above; prints
// nothing, on stdout or stderr, when there is nothing or on any error.
// Returns 0.
int Complete(const CLI::App& root, int argc, char** argv);

// What Complete prints for `words` (after `wizq`; the last one is being
// completed), without the 200 ms limit.
std::string CompletionFor(const CLI::App& root,
                          const std::vector<std::string>& words);

}  // namespace wizq::docgen

#endif  // WIZQ_CLI_DOCGEN_COMPLETION_H_
