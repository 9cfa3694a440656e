#include "cli/suggest.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "queue/pg/pg_location.h"
#include "util/exit_code.h"
#include "views/json_events.h"

namespace wizq {

bool WantsJson(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--json") == 0) return true;
    if (std::strcmp(argv[i], "--") == 0) return false;
  }
  return false;
}

namespace {

std::vector<const CLI::App*> Subcommands(const CLI::App& app) {
  std::vector<const CLI::App*> out;
  for (const CLI::App* s :
       app.get_subcommands([](const CLI::App*) { return true; })) {
    out.push_back(s);
  }
  return out;
}

const CLI::App* FindSub(const CLI::App& app, const std::string& name) {
  for (const CLI::App* s : Subcommands(app)) {
    if (s->get_name() == name) return s;
  }
  return nullptr;
}

// The command the user meant (`run`, `agent take`) and its App: the
// leading words of argv that name subcommands.
// *next is the index of the first word after them.
const CLI::App* ChosenCommand(const CLI::App& app, int argc, char** argv,
                              std::string* name, int* next) {
  const CLI::App* at = &app;
  *next = 1;
  for (; *next < argc; ++*next) {
    const CLI::App* sub = FindSub(*at, argv[*next]);
    if (sub == nullptr) break;
    *name += (name->empty() ? "" : " ") + sub->get_name();
    at = sub;
  }
  return at;
}

// "--jobs", "-j", ... of `cmd` and the options it inherits (--help).
std::vector<std::string> FlagNames(const CLI::App& cmd) {
  std::vector<std::string> out;
  for (const CLI::Option* o :
       cmd.get_options([](const CLI::Option*) { return true; })) {
    for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
  }
  return out;
}

// A "did you mean" for the first word of argv that `cmd` does not know:
// an unknown --flag, or an unknown subcommand of a command that has some.
std::string Suggestion(const CLI::App& cmd, int first, int argc, char** argv) {
  const std::vector<std::string> flags = FlagNames(cmd);
  for (int i = first; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a.rfind("--", 0) != 0) continue;
    a = a.substr(0, a.find('='));
    if (std::find(flags.begin(), flags.end(), a) != flags.end()) continue;
    const std::string best = ClosestMatch(a, flags);
    if (!best.empty()) return "did you mean " + best + "?";
  }
  std::vector<std::string> subs;
  for (const CLI::App* s : Subcommands(cmd)) subs.push_back(s->get_name());
  for (int i = first; i < argc && !subs.empty(); i++) {
    if (argv[i][0] == '-') continue;
    const std::string best = ClosestMatch(argv[i], subs);
    if (!best.empty()) return "did you mean " + best + "?";
  }
  return "";
}

void Report(const std::string& prefix, const std::string& message,
            const std::string& hint, bool json) {
  std::string line = prefix + ": " + message;
  if (!hint.empty()) line += "; " + hint;
  std::fprintf(stderr, "%s\nRun with --help for more information.\n",
               line.c_str());
  if (json) {
    JsonError e;
    e.code = kExitInvalid;
    e.message = hint.empty() ? message : message + "; " + hint;
    EmitJsonError(e);
  }
}

}  // namespace

bool ReportUnknownCommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-' || FindSub(app, argv[1]) != nullptr) {
    return false;
  }
  std::vector<std::string> names;
  std::string all;
  for (const CLI::App* s : Subcommands(app)) {
    names.push_back(s->get_name());
    all += (all.empty() ? "" : ", ") + s->get_name();
  }
  const std::string best = ClosestMatch(argv[1], names);
  Report("wizq", std::string("unknown command \"") + argv[1] + "\"",
         (best.empty() ? "" : "did you mean " + best + "? ") +
             "the commands are " + all,
         WantsJson(argc, argv));
  return true;
}

int ReportParseError(const CLI::App& app, const CLI::ParseError& e, int argc,
                     char** argv) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
  std::string name;
  int next = 1;
  const CLI::App* cmd = ChosenCommand(app, argc, argv, &name, &next);
  std::string message = e.what();
  while (!message.empty() && message.back() == '\n') message.pop_back();
  // A stray argument is quoted back: a store location without its password.
  for (int i = 1; i < argc; i++) {
    if (PgLocationHasPassword(argv[i])) {
      message = ScrubPgSecrets(message, PgLocationSecrets(argv[i]));
    }
  }
  Report(name.empty() ? "wizq" : "wizq " + name, message,
         Suggestion(*cmd, next, argc, argv), WantsJson(argc, argv));
  return kExitInvalid;
}

}  // namespace wizq
