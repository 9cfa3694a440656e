// The prose of the man pages that the command tree cannot give: a
// description and examples per command, and the FILES section. Everything
// else on a page (synopsis, options, exit status, environment) is
// generated (man_page.h).
#ifndef WIZQ_CLI_DOCGEN_MAN_TEXT_H_
#define WIZQ_CLI_DOCGEN_MAN_TEXT_H_

#include <string>
#include <vector>

namespace wizq::docgen {

struct ManExample {
  std::string what;  // one sentence saying what the commands do
  // The commands, one per line, each after "$ " as a user types them;
  // a line without "$ " continues the command before it (a here-document).
  // The examples of a page work when run in order, from an empty
  // directory, with the examples of /usr/share/doc/wizq/examples/ and
  // stdin not a terminal (tests/packaging/man_examples.sh runs them).
  std::string shell;
};

struct ManText {
  std::string command;      // "run", "agent take"; "" for wizq(1)
  std::string description;  // paragraphs separated by blank lines
  std::vector<ManExample> examples;
};

// The text of `command`, or nullptr if it has none.
const ManText* FindManText(const std::string& command);

struct ManFile {
  std::string path;  // "DIR/.wizard/queue.json"
  std::string what;
};

// The files the FILES section lists.
const std::vector<ManFile>& ManFiles();

}  // namespace wizq::docgen

#endif  // WIZQ_CLI_DOCGEN_MAN_TEXT_H_
