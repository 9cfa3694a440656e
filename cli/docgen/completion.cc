#include "cli/docgen/completion.h"

#include <unistd.h>

#include <cstdio>

#include "cli/docgen/command_tree.h"
#include "cli/docgen/completion_values.h"
#include "util/exit_code.h"

namespace wizq::docgen {
namespace {

// How long the values read from a run or a workflow may take: a Tab that
// hangs is worse than one that completes nothing.
constexpr int kDeadlineMs = 200;

// What an option's (or positional's) value completes to, by its name.
enum class ValueKind { kNone, kFiles, kDirs, kWorkflow, kSteps, kWaiting };

ValueKind KindOf(const OptionDoc& o) {
  const std::string& n = o.name();
  if (n == "WORKFLOW") return ValueKind::kWorkflow;
  if (n == "--dir" || n == "--template") return ValueKind::kDirs;
  if (n == "--from" || n == "--step") return ValueKind::kSteps;
  if (n == "TASK=VALUE" || n == "--answer") return ValueKind::kWaiting;
  if (n == "--output" || n == "--resume-from" || n == "COMMAND" ||
      (n.size() > 5 && n.compare(n.size() - 5, 5, "-file") == 0)) {
    return ValueKind::kFiles;
  }
  return ValueKind::kNone;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// bash passes words as typed: 'a b', "a b" and a\ b are all `a b`.
std::string Unquote(const std::string& word) {
  std::string out;
  char quote = 0;
  for (size_t i = 0; i < word.size(); i++) {
    const char c = word[i];
    if (quote != 0 && c == quote) {
      quote = 0;
    } else if (quote == 0 && (c == '\'' || c == '"')) {
      quote = c;
    } else if (c == '\\' && quote != '\'' && i + 1 < word.size()) {
      out += word[++i];
    } else {
      out += c;
    }
  }
  return out;
}

// The walk over the words before the one being completed.
struct Walk {
  const CLI::App* cmd;
  std::vector<OptionDoc> options;      // cmd's
  const OptionDoc* pending = nullptr;  // the option whose value comes next
  size_t positionals = 0;              // positionals given so far
  bool after_dashdash = false;
  bool lost = false;  // a word named no subcommand of a command that has some
  CompletionContext ctx;

  explicit Walk(const CLI::App& root) : cmd(&root), options(Options(root)) {}

  // The positional the next positional word fills, or null: the first
  // ones take one word each, a repeatable one (the last) all the rest.
  const OptionDoc* NextPositional() const {
    size_t n = 0;
    for (const OptionDoc& o : options) {
      if (o.positional.empty()) continue;
      if (n == positionals || o.repeatable) return &o;
      n++;
    }
    return nullptr;
  }

  void Value(const OptionDoc& o, const std::string& value) {
    if (o.name() == "--dir") ctx.dir = value;
    if (o.name() == "WORKFLOW") ctx.workflow = value;
  }

  void Word(const std::string& w) {
    if (pending != nullptr) {
      if (w == "=") return;  // bash splits --dir=x into --dir, =, x
      Value(*pending, w);
      pending = nullptr;
      return;
    }
    if (!after_dashdash && w == "--") {
      after_dashdash = true;
      return;
    }
    if (!after_dashdash && w.size() > 1 && w[0] == '-') {
      const size_t eq = w.find('=');
      const OptionDoc* o = FindFlag(options, w.substr(0, eq));
      if (o == nullptr || o->value.empty()) return;
      if (eq == std::string::npos) {
        pending = o;
      } else {
        Value(*o, w.substr(eq + 1));
      }
      return;
    }
    if (positionals == 0 && !Subcommands(*cmd).empty()) {
      const CLI::App* sub = FindSubcommand(*cmd, w);
      if (sub == nullptr) {
        lost = true;
        return;
      }
      cmd = sub;
      options = Options(*sub);
      return;
    }
    if (const OptionDoc* p = NextPositional()) Value(*p, w);
    positionals++;
  }
};

// Adds `lead + value` when value starts with `prefix`.
void AddWord(const std::string& lead, const std::string& value,
             const std::string& description, const std::string& prefix,
             std::string* out) {
  if (!StartsWith(value, prefix)) return;
  *out += lead + value;
  if (!description.empty()) *out += "\t" + description;
  *out += "\n";
}

// The values that start with `prefix`, each after `lead` ("--format=" when
// the word being completed is --format=VALUE).
std::string Words(const std::vector<Candidate>& values,
                  const std::string& prefix, const std::string& lead = "") {
  std::string out;
  for (const Candidate& c : values) {
    AddWord(lead, c.value, c.description, prefix, &out);
  }
  return out.empty() ? "" : "words\n" + out;
}

// What the value of `o` completes to: `cur` is what was typed of it.
std::string ValueCompletion(const OptionDoc& o, const CompletionContext& ctx,
                            const std::string& cur,
                            const std::string& lead = "") {
  if (!o.choices.empty()) {
    std::vector<Candidate> values;
    for (const std::string& c : o.choices) values.push_back({c, ""});
    return Words(values, cur, lead);
  }
  switch (KindOf(o)) {
    case ValueKind::kFiles:
      return "files\n";
    case ValueKind::kDirs:
      return "dirs\n";
    case ValueKind::kWorkflow:
      return "workflow\n";
    case ValueKind::kSteps:
      return Words(StepNames(ctx), cur, lead);
    case ValueKind::kWaiting:
      return Words(WaitingTasks(ctx), cur, lead);
    case ValueKind::kNone:
      break;
  }
  return "";
}

std::string OptionNames(const std::vector<OptionDoc>& options,
                        const std::string& cur) {
  std::string out;
  for (const OptionDoc& o : options) {
    if (o.flags.empty()) continue;
    AddWord("", o.name(), o.description, cur, &out);
  }
  return out.empty() ? "" : "words\n" + out;
}

}  // namespace

std::string CompletionFor(const CLI::App& root,
                          const std::vector<std::string>& words) {
  if (words.empty()) return "";
  Walk walk(root);
  for (size_t i = 0; i + 1 < words.size(); i++) walk.Word(words[i]);
  if (walk.lost) return "";
  std::string cur = words.back();
  if (walk.pending != nullptr) {
    if (cur == "=") cur.clear();
    return ValueCompletion(*walk.pending, walk.ctx, cur);
  }
  if (!walk.after_dashdash && StartsWith(cur, "-")) {
    const size_t eq = cur.find('=');
    if (eq == std::string::npos) return OptionNames(walk.options, cur);
    const OptionDoc* o = FindFlag(walk.options, cur.substr(0, eq));
    if (o == nullptr || o->value.empty()) return "";
    return ValueCompletion(*o, walk.ctx, cur.substr(eq + 1),
                           cur.substr(0, eq + 1));
  }
  if (walk.positionals == 0 && !walk.after_dashdash) {
    std::vector<Candidate> subs;
    for (const CLI::App* s : Subcommands(*walk.cmd)) {
      subs.push_back({s->get_name(), s->get_description()});
    }
    if (!subs.empty()) return Words(subs, cur);
  }
  if (const OptionDoc* p = walk.NextPositional()) {
    return ValueCompletion(*p, walk.ctx, cur);
  }
  return cur.empty() ? OptionNames(walk.options, cur) : "";
}

int Complete(const CLI::App& root, int argc, char** argv) {
  if (argc < 1) return kExitCompleted;
  const bool bash = std::string(argv[0]) == "bash";
  std::vector<std::string> words;
  for (int i = 1; i < argc; i++) {
    words.push_back(bash ? Unquote(argv[i]) : std::string(argv[i]));
  }
  ArmDeadline(kDeadlineMs);
  const std::string out = CompletionFor(root, words);
  DisarmDeadline();
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        write(STDOUT_FILENO, out.data() + done, out.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return kExitCompleted;
}

}  // namespace wizq::docgen
