#include "cli/validate.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <deque>
#include <memory>
#include <set>

#include "orchestrator/run.h"
#include "tasks/workflow/workflow.h"
#include "util/exit_code.h"

namespace wizq {
namespace {

// The first word of a shell command, after any comment lines and
// NAME=VALUE assignments; "" when it is quoted or has shell syntax we do
// not follow.
std::string FirstWord(const std::string& script) {
  size_t at = 0;
  while (true) {
    at = script.find_first_not_of(" \t\n", at);
    if (at == std::string::npos) return "";
    if (script[at] == '#') {  // a comment (or a shebang) to the line's end
      at = script.find('\n', at);
      if (at == std::string::npos) return "";
      continue;
    }
    const size_t end = script.find_first_of(" \t\n;&|<>()", at);
    const std::string word = script.substr(
        at, end == std::string::npos ? std::string::npos : end - at);
    const size_t eq = word.find('=');
    const bool assignment = eq != std::string::npos && eq > 0 &&
                            word.find_first_not_of(
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrst"
                                "uvwxyz0123456789_") == eq;
    if (!assignment) {
      if (word.find_first_of("\"'`$\\*?[~{") != std::string::npos) return "";
      return word;
    }
    if (end == std::string::npos) return "";
    at = end;
  }
}

// A warning for `script` at JSON path `where`, or "".
std::string ScriptWarning(const std::string& script, const std::string& where,
                          const std::string& base_dir) {
  const std::string word = FirstWord(script);
  if (word.empty() || word[0] == '/' || word.find('/') == std::string::npos) {
    return "";  // absolute, or looked up in PATH
  }
  const std::string path = base_dir.empty() ? word : base_dir + "/" + word;
  struct stat st;
  std::string problem;
  if (stat(path.c_str(), &st) != 0) {
    problem = "does not exist";
  } else if (S_ISDIR(st.st_mode)) {
    problem = "is a directory";
  } else if (access(path.c_str(), X_OK) != 0) {
    problem = "is not executable (chmod +x " + word + ")";
  } else {
    return "";
  }
  return where + ": " + word + " " + problem + " (scripts run in " +
         (base_dir.empty() ? std::string(".") : base_dir) +
         ", the workflow file's directory)";
}

// The steps in breadth-first order from the entrypoint; *reachable counts
// the first ones that the entrypoint reaches.
std::vector<const Step*> Ordered(const Workflow& wf, size_t* reachable) {
  std::vector<const Step*> out;
  std::set<std::string> seen;
  std::deque<std::string> queue = {wf.entrypoint()};
  seen.insert(wf.entrypoint());
  while (!queue.empty()) {
    const Step* s = wf.FindStep(queue.front());
    queue.pop_front();
    if (s == nullptr) continue;
    out.push_back(s);
    for (const std::string& n : s->next) {
      if (seen.insert(n).second) queue.push_back(n);
    }
  }
  *reachable = out.size();
  for (const Step& s : wf.steps()) {
    if (seen.insert(s.name).second) out.push_back(&s);
  }
  return out;
}

// "name" with " and \ escaped; `line2`, if any, on a second line.
std::string DotQuote(const std::string& s, const std::string& line2 = "") {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  if (!line2.empty()) out += "\\n" + line2;
  return out + "\"";
}

}  // namespace

std::vector<std::string> ScriptWarnings(const Workflow& wf) {
  std::vector<std::string> out;
  for (size_t i = 0; i < wf.steps().size(); i++) {
    const Step& s = wf.steps()[i];
    const std::string at = "$.steps[" + std::to_string(i) + "]";
    if (s.action.kind == Action::Kind::kCommand) {
      std::string w =
          ScriptWarning(s.action.script, at + ".action.script", wf.base_dir());
      if (!w.empty()) out.push_back(w);
    }
    if (s.finally_hook) {
      std::string w = ScriptWarning(s.finally_hook->script,
                                    at + ".finally.script", wf.base_dir());
      if (!w.empty()) out.push_back(w);
    }
  }
  return out;
}

std::string StepGraphText(const Workflow& wf) {
  size_t reachable = 0;
  const std::vector<const Step*> steps = Ordered(wf, &reachable);
  std::string out;
  for (size_t i = 0; i < steps.size(); i++) {
    const Step& s = *steps[i];
    if (i == reachable) {
      out += "not reachable from " + wf.entrypoint() +
             " through next (a finally hook may still spawn these):\n";
    }
    std::string line = s.name + " (" + ActionKindName(s.action.kind) + ")";
    if (s.name == wf.entrypoint()) line += " [entrypoint]";
    if (s.next.empty()) {
      line += " -> (end)";
    } else {
      line += " ->";
      for (size_t j = 0; j < s.next.size(); j++) {
        line += (j ? ", " : " ") + s.next[j];
      }
    }
    if (s.finally_hook) line += "; finally: Command";
    out += line + "\n";
  }
  return out;
}

std::string StepGraphDot(const Workflow& wf) {
  size_t reachable = 0;
  const std::vector<const Step*> steps = Ordered(wf, &reachable);
  std::string out = "digraph workflow {\n  rankdir=LR;\n  node [shape=box];\n";
  for (size_t i = 0; i < steps.size(); i++) {
    const Step& s = *steps[i];
    out += "  " + DotQuote(s.name) +
           " [label=" + DotQuote(s.name, ActionKindName(s.action.kind));
    if (s.name == wf.entrypoint()) out += ", style=bold";
    if (i >= reachable) out += ", style=dashed";
    out += "];\n";
    if (s.finally_hook) {
      const std::string hook = s.name + " (finally)";
      out += "  " + DotQuote(hook) +
             " [shape=note, label=" + DotQuote(hook, "Command") + "];\n";
      out += "  " + DotQuote(s.name) + " -> " + DotQuote(hook) +
             " [style=dashed];\n";
    }
  }
  for (const Step* s : steps) {
    for (const std::string& n : s->next) {
      out += "  " + DotQuote(s->name) + " -> " + DotQuote(n) + ";\n";
    }
  }
  return out + "}\n";
}

CLI::App* AddValidateCommand(CLI::App& app, ValidateArgs* args,
                             const std::string& version) {
  CLI::App* cmd = app.add_subcommand("validate", "Check a workflow file");
  cmd->set_version_flag("--version", version);
  cmd->add_option("WORKFLOW", args->workflow, "Workflow file")->required();
  cmd->add_flag("--graph", args->graph, "Print the step graph on stdout");
  cmd->add_option("--format", args->format,
                  "Format of --graph: text (default) or dot (Graphviz)")
      ->check(CLI::IsMember({"text", "dot"}));
  return cmd;
}

namespace {

// Function steps are valid, but only a program that embeds wizq runs them.
std::vector<std::string> FunctionNotes(const Workflow& wf) {
  std::vector<std::string> out;
  for (const Step& step : wf.steps()) {
    const Action* hook = step.finally_hook ? &*step.finally_hook : nullptr;
    for (const Action* a : {&step.action, hook}) {
      if (a == nullptr || a->kind != Action::Kind::kFunction) continue;
      out.push_back("step \"" + step.name + "\": its " +
                    (a == hook ? "finally hook" : "action") +
                    " is a Function (handler \"" + a->handler +
                    "\"): only a program that embeds wizq and registers that "
                    "handler can run it; `wizq run` stops with exit 2 "
                    "(docs/EMBEDDING.md)");
    }
  }
  return out;
}

}  // namespace

int RunValidate(const ValidateArgs& args) {
  const std::string& path = args.workflow;
  std::unique_ptr<Workflow> wf;
  std::vector<Finding> findings;
  Status s = Workflow::Load(path, &wf, &findings);
  if (!s.ok()) {
    if (findings.empty()) std::fprintf(stderr, "%s\n", s.message().c_str());
    for (const Finding& f : findings) {
      std::fprintf(stderr, "%s: %s: %s\n", path.c_str(), f.path.c_str(),
                   f.message.c_str());
    }
    return kExitInvalid;
  }
  for (const std::string& w : ScriptWarnings(*wf)) {
    std::fprintf(stderr, "%s: warning: %s\n", path.c_str(), w.c_str());
  }
  // With --graph, stdout is the graph alone (`| dot -Tsvg`).
  const bool graph = args.graph || args.format != "text";
  std::fprintf(graph ? stderr : stdout, "%s: OK (%zu steps, entrypoint %s)\n",
               path.c_str(), wf->steps().size(), wf->entrypoint().c_str());
  for (const std::string& n : FunctionNotes(*wf)) {
    std::fprintf(graph ? stderr : stdout, "%s: note: %s\n", path.c_str(),
                 n.c_str());
  }
  if (graph) {
    const std::string g =
        args.format == "dot" ? StepGraphDot(*wf) : StepGraphText(*wf);
    std::fputs(g.c_str(), stdout);
  }
  return kExitCompleted;
}

}  // namespace wizq
