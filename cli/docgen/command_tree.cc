#include "cli/docgen/command_tree.h"

#include <algorithm>
#include <cctype>

namespace wizq::docgen {
namespace {

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    out.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// The fixed set of values of an option whose type name is `value` and
// whose checks say `constraint` (see OptionDoc::choices).
std::vector<std::string> Choices(const std::string& value,
                                 const std::string& constraint) {
  if (constraint.size() > 2 && constraint.front() == '{' &&
      constraint.back() == '}') {
    return Split(constraint.substr(1, constraint.size() - 2), ',');
  }
  std::vector<std::string> out;
  if (value.find('|') == std::string::npos) return out;
  for (const std::string& alt : Split(value, '|')) {
    auto upper = std::find_if(alt.begin(), alt.end(), [](char c) {
      return std::isupper(static_cast<unsigned char>(c)) != 0;
    });
    if (upper != alt.begin()) out.emplace_back(alt.begin(), upper);
  }
  return out;
}

OptionDoc Describe(const CLI::Option& o) {
  OptionDoc d;
  for (const std::string& s : o.get_snames()) d.flags.push_back("-" + s);
  for (const std::string& l : o.get_lnames()) d.flags.push_back("--" + l);
  if (o.get_positional() && d.flags.empty()) d.positional = o.get_name(true);
  if (o.get_items_expected_max() > 0) {
    const std::string type = o.get_type_name();
    const size_t colon = type.find(':');
    d.value = type.substr(0, colon);
    if (colon != std::string::npos) d.constraint = type.substr(colon + 1);
    d.choices = Choices(d.value, d.constraint);
  }
  d.description = o.get_description();
  for (const CLI::Option* x : o.get_excludes())
    d.excludes.push_back(x->get_name());
  std::sort(d.excludes.begin(), d.excludes.end());
  d.required = o.get_required();
  d.repeatable = o.get_items_expected_max() > 1;
  return d;
}

}  // namespace

const std::string& OptionDoc::name() const {
  if (!positional.empty() || flags.empty()) return positional;
  return flags.back();  // the long name is listed after the short one
}

std::vector<const CLI::App*> Subcommands(const CLI::App& cmd) {
  return cmd.get_subcommands(
      [](const CLI::App* s) { return !s->get_group().empty(); });
}

std::vector<const CLI::App*> AllCommands(const CLI::App& cmd) {
  std::vector<const CLI::App*> out = {&cmd};
  for (const CLI::App* s : Subcommands(cmd)) {
    for (const CLI::App* c : AllCommands(*s)) out.push_back(c);
  }
  return out;
}

std::string CommandPath(const CLI::App& cmd) {
  const CLI::App* parent = cmd.get_parent();
  if (parent == nullptr) return "";
  const std::string above = CommandPath(*parent);
  return above.empty() ? cmd.get_name() : above + " " + cmd.get_name();
}

std::string CommandLineName(const CLI::App& cmd) {
  const std::string path = CommandPath(cmd);
  return path.empty() ? "wizq" : "wizq " + path;
}

const CLI::App* FindSubcommand(const CLI::App& cmd, const std::string& name) {
  for (const CLI::App* s : Subcommands(cmd)) {
    if (s->get_name() == name) return s;
  }
  return nullptr;
}

std::vector<OptionDoc> Options(const CLI::App& cmd) {
  std::vector<OptionDoc> options;
  std::vector<OptionDoc> positionals;
  for (const CLI::Option* o :
       cmd.get_options([](const CLI::Option*) { return true; })) {
    if (o->get_group().empty()) continue;  // hidden
    OptionDoc d = Describe(*o);
    (d.flags.empty() ? positionals : options).push_back(std::move(d));
  }
  options.insert(options.end(), positionals.begin(), positionals.end());
  return options;
}

const OptionDoc* FindFlag(const std::vector<OptionDoc>& options,
                          const std::string& flag) {
  for (const OptionDoc& o : options) {
    if (std::find(o.flags.begin(), o.flags.end(), flag) != o.flags.end()) {
      return &o;
    }
  }
  return nullptr;
}

}  // namespace wizq::docgen
