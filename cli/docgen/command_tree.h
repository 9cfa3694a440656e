// The wizq command tree as the generated documents read it: the commands,
// their options and positionals, taken from the CLI11 App that Main parses
// with (cli/main.cc), so that the man pages (man_page.h) and the shell
// completion (completion.h) say what --help says, for any command or
// option added later.
#ifndef WIZQ_CLI_DOCGEN_COMMAND_TREE_H_
#define WIZQ_CLI_DOCGEN_COMMAND_TREE_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace wizq::docgen {

// One option or positional of a command.
struct OptionDoc {
  std::vector<std::string> flags;  // "-j", "--jobs"; empty for a positional
  std::string positional;          // "WORKFLOW"; empty for an option
  std::string value;               // "INT", "TEXT", ...; empty for a flag
  // What --help prints after the value's type: "INT in [1 - 1024]",
  // "{text,dot}"; empty if nothing.
  std::string constraint;
  // The values it takes when they are a fixed set: a CLI11 IsMember check
  // ("{text,dot}"), or a value name of alternatives, "soon,fail=N|never"
  // (each up to its first upper-case placeholder: "soon,fail=", "never").
  std::vector<std::string> choices;
  std::string description;
  std::vector<std::string> excludes;  // the other options' names, sorted
  bool required = false;
  bool repeatable = false;  // takes more than one value (or occurrence)

  // "--jobs" (the long name, else the short one, else the positional's).
  const std::string& name() const;
};

// The visible subcommands of `cmd`, in the order they were defined.
std::vector<const CLI::App*> Subcommands(const CLI::App& cmd);

// `cmd` and every command beneath it, depth first, parents first.
std::vector<const CLI::App*> AllCommands(const CLI::App& cmd);

// "run", "agent take"; "" for the root.
std::string CommandPath(const CLI::App& cmd);

// "wizq run", "wizq agent take"; "wizq" for the root.
std::string CommandLineName(const CLI::App& cmd);

// The subcommand of `cmd` called `name`, or nullptr.
const CLI::App* FindSubcommand(const CLI::App& cmd, const std::string& name);

// The options of `cmd` (-h,--help first, as --help lists them) and then its
// positionals, in the order they were defined.
std::vector<OptionDoc> Options(const CLI::App& cmd);

// The option of `cmd` one of whose flags is `flag` ("--dir", "-j"), or
// nullptr.
const OptionDoc* FindFlag(const std::vector<OptionDoc>& options,
                          const std::string& flag);

}  // namespace wizq::docgen

#endif  // WIZQ_CLI_DOCGEN_COMMAND_TREE_H_
