// The man pages generated at build time (build/man/, cli/docgen/man_page.h)
// against what the binary's --help says: every command `wizq --help` and
// its subcommands' --help list has a page, each page lists exactly the
// options and arguments of that command's --help, and has the sections a
// page needs, its exit codes those of util/exit_code.h.
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/integration_util.h"
#include "util/exit_code.h"

namespace wizq {
namespace {

using test::Contains;
using test::RunWizq;
using test::WizqResult;

std::string ManDir() { return test::BuildDir() + "/man"; }

std::string Help(const std::string& command) {
  std::vector<std::string> args = {"wizq"};
  std::istringstream words(command);
  for (std::string w; words >> w;) args.push_back(w);
  args.push_back("--help");
  const WizqResult r = RunWizq(args);
  EXPECT_TRUE(r.exited && r.code == 0) << command << ": " << r.Describe();
  return r.out;
}

// The lines of --help's section `title` ("Options:") that name an entry:
// two spaces then the entry, up to the next section.
std::vector<std::string> HelpEntries(const std::string& help,
                                     const std::string& title) {
  std::vector<std::string> out;
  bool in = false;
  for (const std::string& line : test::SplitLines(help)) {
    if (!line.empty() && line[0] != ' ') in = line == title;
    if (in && line.size() > 2 && line.compare(0, 2, "  ") == 0 &&
        line[2] != ' ') {
      out.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  return out;
}

// Every command path ("", "run", "agent take") under `command`, by --help.
std::vector<std::string> Commands(const std::string& command = "") {
  std::vector<std::string> out = {command};
  for (const std::string& sub : HelpEntries(Help(command), "Subcommands:")) {
    for (const std::string& c :
         Commands(command.empty() ? sub : command + " " + sub)) {
      out.push_back(c);
    }
  }
  return out;
}

std::string PageName(const std::string& command) {
  std::string name = command.empty() ? "wizq" : "wizq " + command;
  for (char& c : name) {
    if (c == ' ') c = '-';
  }
  return name;
}

std::string Page(const std::string& command) {
  const std::string path = ManDir() + "/" + PageName(command) + ".1";
  return std::filesystem::exists(path) ? test::ReadAll(path) : "";
}

// Roff back to text: \- is -, \fB and \fR go.
std::string Unroff(std::string s) {
  s = std::regex_replace(s, std::regex(R"(\\f[BIR])"), "");
  return std::regex_replace(s, std::regex(R"(\\-)"), "-");
}

// The lines of the page's section `name` (".SH NAME" up to the next .SH).
std::vector<std::string> Section(const std::string& page,
                                 const std::string& name) {
  std::vector<std::string> out;
  bool in = false;
  for (const std::string& line : test::SplitLines(page)) {
    if (line.rfind(".SH ", 0) == 0) {
      in = line == ".SH " + name;
    } else if (in) {
      out.push_back(line);
    }
  }
  return out;
}

// The tags of a section's .TP entries, as text.
std::vector<std::string> Tags(const std::string& page,
                              const std::string& section) {
  std::vector<std::string> out;
  const std::vector<std::string> lines = Section(page, section);
  for (size_t i = 0; i + 1 < lines.size(); i++) {
    if (lines[i] == ".TP") out.push_back(Unroff(lines[i + 1]));
  }
  return out;
}

// "-j,--jobs" (as --help prints it) for a page's tag "-j, --jobs INT".
std::string HelpForm(const std::string& tag) {
  const std::string flags = std::regex_replace(tag, std::regex(", "), ",");
  return flags.substr(0, flags.find(' '));
}

TEST(ManPagesTest, EveryCommandHasAPageAndEveryPageACommand) {
  const std::vector<std::string> commands = Commands();
  // The tree as it is today; a new command is found the same way.
  EXPECT_GE(commands.size(), 18u);
  std::set<std::string> expected;
  for (const std::string& c : commands) {
    expected.insert(PageName(c) + ".1");
    EXPECT_NE(Page(c), "") << "no man page for `wizq " << c << "` in "
                           << ManDir();
  }
  for (const auto& e : std::filesystem::directory_iterator(ManDir())) {
    const std::string name = e.path().filename().string();
    if (name[0] == '.') continue;  // the build's stamp
    EXPECT_TRUE(expected.count(name)) << name << " is the page of no command";
  }
}

TEST(ManPagesTest, OptionsAndArgumentsAreThoseOfHelp) {
  for (const std::string& c : Commands()) {
    SCOPED_TRACE("wizq " + c);
    const std::string help = Help(c);
    const std::string page = Page(c);
    ASSERT_NE(page, "");
    std::vector<std::string> page_options;
    for (const std::string& tag : Tags(page, "OPTIONS")) {
      page_options.push_back(HelpForm(tag));
    }
    EXPECT_EQ(page_options, HelpEntries(help, "Options:"));
    EXPECT_EQ(Tags(page, "ARGUMENTS"), HelpEntries(help, "Positionals:"));
    // Each option's description is the one --help prints.
    for (const std::string& line : Section(page, "OPTIONS")) {
      if (line[0] == '.' || line.rfind("\\fB", 0) == 0) continue;
      // The description, without the full stop and facts the page adds.
      std::string description = Unroff(line.substr(0, line.find(". ")));
      if (!description.empty() && description.back() == '.') {
        description.pop_back();
      }
      EXPECT_TRUE(Contains(help, description.substr(0, 40)))
          << "\"" << description << "\" is not in --help:\n"
          << help;
    }
  }
}

TEST(ManPagesTest, EveryPageHasItsSections) {
  for (const std::string& c : Commands()) {
    SCOPED_TRACE("wizq " + c);
    const std::string page = Page(c);
    for (const char* s :
         {"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS",
          "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"}) {
      EXPECT_FALSE(Section(page, s).empty())
          << "no " << s << " section"
          << (std::string(s) == "EXAMPLES"
                  ? " (add the command's examples to cli/docgen/man_text.cc)"
                  : "");
    }
    // NAME is "wizq-run \- what --help says of it".
    const std::vector<std::string> name = Section(page, "NAME");
    ASSERT_FALSE(name.empty());
    EXPECT_EQ(Unroff(name[0]).rfind(PageName(c) + " - ", 0), 0u) << name[0];
    EXPECT_TRUE(Contains(Section(page, "FILES").size() > 1
                             ? Unroff(Section(page, "FILES")[1])
                             : "",
                         "DIR/.wizard/"));
    // Every exit code of the table, in order.
    std::vector<std::string> codes;
    for (const ExitCodeInfo& e : kExitCodes) {
      codes.push_back(std::to_string(e.code));
    }
    std::vector<std::string> listed;
    for (const std::string& t : Tags(page, "EXIT STATUS")) {
      listed.push_back(t.substr(3));  // ".B 0"
    }
    EXPECT_EQ(listed, codes);
  }
}

TEST(ManPagesTest, EnvironmentIsTheTable) {
  const std::string run = Page("run");
  for (const char* v : {"NO_COLOR", "WIZQ_CRASH_AT", "WIZQ_RUN_ID",
                        "WIZQ_IDEMPOTENCY_KEY", "WIZQ_ORIGIN"}) {
    EXPECT_TRUE(Contains(Unroff(run), std::string(".B ") + v)) << v;
  }
  EXPECT_FALSE(Contains(run, "WIZQ_LEASE"));
  EXPECT_TRUE(Contains(Unroff(Page("agent serve")), ".B WIZQ_LEASE"));
  EXPECT_TRUE(Contains(Unroff(Page("crashtest")), ".B TMPDIR"));
}

}  // namespace
}  // namespace wizq
