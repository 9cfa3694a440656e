#include "cli/docgen/man_page.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "cli/docgen/command_tree.h"
#include "cli/docgen/man_text.h"
#include "util/environment.h"
#include "util/exit_code.h"

namespace wizq::docgen {
namespace {

// `text` escaped for roff. In code (options, commands, examples) every
// character stands for itself: "-" is a minus, quotes are straight. In
// prose a hyphen inside a word stays a hyphen and one that starts an
// option ("--dir", "-9") is a minus.
std::string Roff(const std::string& text, bool code) {
  std::string out;
  bool line_start = true;
  for (size_t i = 0; i < text.size(); i++) {
    const char c = text[i];
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    line_start = c == '\n';
    const char before = i == 0 ? ' ' : text[i - 1];
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-' && (code || before == '-' || before == '(' ||
                            std::isspace(static_cast<unsigned char>(before)))) {
      out += "\\-";
    } else if (code && c == '\'') {
      out += "\\(aq";
    } else if (code && c == '`') {
      out += "\\(ga";
    } else if (code && c == '~') {
      out += "\\(ti";
    } else if (code && c == '^') {
      out += "\\(ha";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Bold(const std::string& code) {
  return "\\fB" + Roff(code, true) + "\\fR";
}
std::string Italic(const std::string& code) {
  return "\\fI" + Roff(code, true) + "\\fR";
}

// `text` ending with a full stop.
std::string Sentence(std::string text) {
  if (!text.empty() && text.back() != '.') text += '.';
  return text;
}

std::string Paragraphs(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    out += ".PP\n" + Roff(text.substr(start, end - start), false) + "\n";
    start = end + 2;
  }
  return out;
}

// The command's one-line description, without the "wizq: " of the root's.
std::string Summary(const CLI::App& cmd) {
  const std::string d = cmd.get_description();
  return d.rfind("wizq: ", 0) == 0 ? d.substr(6) : d;
}

std::string SeeAlsoItem(const CLI::App& cmd) {
  return ".BR " + Roff(ManPageName(cmd), true) + " (1)";
}

std::string Synopsis(const CLI::App& cmd,
                     const std::vector<OptionDoc>& options) {
  std::string out = ".SH SYNOPSIS\n" + Bold(CommandLineName(cmd)) + " [" +
                    Italic("OPTIONS") + "]";
  for (const OptionDoc& o : options) {
    if (!o.flags.empty() && o.required) {
      out += " " + Bold(o.name()) + " " + Italic(o.value);
    }
  }
  for (const OptionDoc& o : options) {
    if (o.positional.empty()) continue;
    const std::string arg = Italic(o.positional) + (o.repeatable ? "..." : "");
    out += " " + (o.required ? arg : "[" + arg + "]");
  }
  if (!Subcommands(cmd).empty()) out += " " + Italic("COMMAND");
  return out + "\n";
}

// What --help says after the description: the value's constraint,
// required, repeatable, excludes.
std::string OptionFacts(const OptionDoc& o) {
  std::string out;
  if (!o.constraint.empty()) {
    out += " Value: " + Roff(o.constraint, true) + ".";
  }
  if (o.required) out += " Required.";
  if (o.repeatable && o.description.find("repeatable") == std::string::npos) {
    out += " Repeatable.";
  }
  for (const std::string& x : o.excludes) {
    out += " Not with " + Bold(x) + ".";
  }
  return out;
}

std::string OptionsSections(const std::vector<OptionDoc>& options) {
  std::string args;
  std::string opts;
  for (const OptionDoc& o : options) {
    const std::string body =
        Roff(Sentence(o.description), false) + OptionFacts(o) + "\n";
    if (!o.positional.empty()) {
      args += ".TP\n" + Italic(o.positional) + "\n" + body;
      continue;
    }
    std::string tag;
    for (const std::string& f : o.flags) {
      tag += (tag.empty() ? "" : ", ") + Bold(f);
    }
    if (!o.value.empty()) tag += " " + Italic(o.value);
    opts += ".TP\n" + tag + "\n" + body;
  }
  std::string out;
  if (!args.empty()) out += ".SH ARGUMENTS\n" + args;
  return out + ".SH OPTIONS\n" + opts;
}

std::string ExitStatus() {
  std::string out = ".SH EXIT STATUS\n";
  for (const ExitCodeInfo& e : kExitCodes) {
    out += ".TP\n.B " + std::to_string(e.code) + "\n" +
           Roff(std::string(e.name) + ": " + e.meaning, false) + "\n";
  }
  return out;
}

bool ListsVariable(const EnvVarInfo& v, const std::string& command) {
  if (command.empty()) return true;
  const std::string list = std::string(",") + v.commands + ",";
  return list.find("," + command + ",") != std::string::npos;
}

std::string Environment(const std::string& command) {
  std::string read;
  std::string task;
  for (const EnvVarInfo& v : kEnvironment) {
    if (!ListsVariable(v, command)) continue;
    (v.use == EnvUse::kRead ? read : task) +=
        ".TP\n.B " + Roff(v.name, true) + "\n" + Roff(v.meaning, false) + "\n";
  }
  std::string out = ".SH ENVIRONMENT\n";
  if (read.empty() && task.empty()) {
    return out + "No environment variable changes what " +
           Roff(command.empty() ? "wizq" : "wizq " + command, true) +
           " does.\n";
  }
  if (!read.empty()) out += ".PP\nwizq reads:\n" + read;
  if (!task.empty()) {
    out += ".PP\nEach task's process gets, besides wizq's own environment:\n" +
           task;
  }
  return out;
}

std::string Files() {
  std::string out = ".SH FILES\n";
  for (const ManFile& f : ManFiles()) {
    out += ".TP\n" + Italic(f.path) + "\n" + Roff(f.what, false) + "\n";
  }
  return out;
}

std::string Examples(const ManText* text) {
  if (text == nullptr || text->examples.empty()) return "";
  std::string out = ".SH EXAMPLES\n";
  for (const ManExample& e : text->examples) {
    out += ".PP\n" + Roff(e.what, false) + "\n.PP\n.RS 4\n.nf\n" +
           Roff(e.shell, true) + (e.shell.back() == '\n' ? "" : "\n") +
           ".fi\n.RE\n";
  }
  return out;
}

std::string SeeAlso(const CLI::App& cmd) {
  std::vector<std::string> items;
  if (cmd.get_parent() != nullptr) {
    for (const CLI::App* a = cmd.get_parent(); a != nullptr;
         a = a->get_parent()) {
      items.insert(items.begin(), SeeAlsoItem(*a));
    }
  }
  for (const CLI::App* s : Subcommands(cmd)) items.push_back(SeeAlsoItem(*s));
  std::string out = ".SH SEE ALSO\n";
  for (size_t i = 0; i < items.size(); i++) {
    out += items[i] + (i + 1 < items.size() ? ",\n" : "\n");
  }
  return out + ".PP\nThe documentation in /usr/share/doc/wizq/.\n";
}

std::string Today() {
  const char* epoch = std::getenv("SOURCE_DATE_EPOCH");
  const time_t t = epoch != nullptr && *epoch != '\0'
                       ? static_cast<time_t>(std::strtoll(epoch, nullptr, 10))
                       : std::time(nullptr);
  struct tm tm = {};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

}  // namespace

std::string ManPageName(const CLI::App& cmd) {
  std::string name = CommandLineName(cmd);
  for (char& c : name) {
    if (c == ' ') c = '-';
  }
  return name;
}

std::string ManPage(const CLI::App& cmd, const std::string& version,
                    const std::string& date) {
  const std::string name = ManPageName(cmd);
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  const std::string path = CommandPath(cmd);
  const ManText* text = FindManText(path);
  const std::vector<OptionDoc> options = Options(cmd);
  std::string page =
      ".\\\" " + name +
      "(1): generated by `wizq __man` from the definitions of wizq's\n"
      ".\\\" commands (cli/docgen/); edit those, not this file.\n"
      ".TH " +
      Roff(upper, true) + " 1 " + Roff(date, true) + " \"wizq " + version +
      "\" \"wizq manual\"\n" +
      // No hyphenation, ragged right: option names and paths stay whole.
      ".nh\n.ad l\n.SH NAME\n" + Roff(name, true) + " \\- " +
      Roff(Summary(cmd), false) + "\n" + Synopsis(cmd, options) +
      ".SH DESCRIPTION\n" +
      Paragraphs(text != nullptr ? text->description : Sentence(Summary(cmd)));
  if (!Subcommands(cmd).empty()) {
    page += ".SH COMMANDS\n";
    for (const CLI::App* s : Subcommands(cmd)) {
      page += ".TP\n" + SeeAlsoItem(*s) + "\n" +
              Roff(Sentence(Summary(*s)), false) + "\n";
    }
  }
  return page + OptionsSections(options) + ExitStatus() + Environment(path) +
         Files() + Examples(text) + SeeAlso(cmd);
}

int WriteManPages(const CLI::App& root, const std::string& version,
                  const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "wizq __man: cannot create %s: %s\n", dir.c_str(),
                 ec.message().c_str());
    return kExitEnvironment;
  }
  const std::string date = Today();
  for (const CLI::App* cmd : AllCommands(root)) {
    const std::string path = dir + "/" + ManPageName(*cmd) + ".1";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << ManPage(*cmd, version, date);
    out.close();
    if (!out) {
      std::fprintf(stderr, "wizq __man: cannot write %s\n", path.c_str());
      return kExitEnvironment;
    }
  }
  return kExitCompleted;
}

}  // namespace wizq::docgen
