// embed-wizard: a small setup wizard that embeds wizq (docs/EMBEDDING.md).
//
//   embed-wizard --dir DIR [--mirror DIR] [--yes]
//
// Its steps are C++ functions: check the system, ask for confirmation (a
// Prompt step answered by this program's own prompt), plan the packages of
// the mirror's manifest, then per package fetch (copy), verify (sha256),
// unpack and configure; a finally hook writes SUMMARY.txt. Its progress bar
// is drawn from wizq's observer events. Kill it (even kill -9) and run it
// again: it resumes, and what was done is not done again.
//
// Off a terminal (or with --yes) the confirmation takes its default (yes),
// so `embed-wizard --dir D </dev/null` runs unattended.
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "progress_bar.h"
#include "wizq/wizard.h"

#ifndef WIZQ_EXAMPLE_MIRROR
#define WIZQ_EXAMPLE_MIRROR "mirror"
#endif

namespace {

// The workflow, built in code. Retries and a timeout apply to every step.
const char* kWorkflow = R"({
  "entrypoint": "CheckSystem",
  "options": {"max_retries": 2, "timeout": 120, "max_concurrency": 4},
  "steps": [
    {"name": "CheckSystem", "action": {"kind": "Function"},
     "next": ["Confirm"]},
    {"name": "Confirm", "next": ["Plan"],
     "action": {"kind": "Prompt", "mode": "confirm", "default": true,
                "message": "Install the mirror's packages?"}},
    {"name": "Plan", "action": {"kind": "Function"}, "next": ["Fetch"],
     "finally": {"kind": "Function", "handler": "Summary"}},
    {"name": "Fetch", "action": {"kind": "Function"}, "next": ["Verify"]},
    {"name": "Verify", "action": {"kind": "Function"}, "next": ["Unpack"]},
    {"name": "Unpack", "action": {"kind": "Function"}, "next": ["Configure"]},
    {"name": "Configure", "action": {"kind": "Function"}, "next": []}
  ]})";

std::string g_mirror = WIZQ_EXAMPLE_MIRROR;

// The string field `key` of a flat JSON object (the manifest's packages
// and the values this wizard builds: no escapes, no nesting).
std::string Field(const std::string& json, const std::string& key) {
  size_t p = json.find("\"" + key + "\"");
  if (p == std::string::npos) return "";
  p = json.find('"', json.find(':', p) + 1);
  return json.substr(p + 1, json.find('"', p + 1) - p - 1);
}

// Runs a shell command; its first output line. Throws when it fails: the
// attempt fails with the message and the step's retries apply.
std::string Shell(const std::string& cmd) {
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) throw std::runtime_error("cannot run: " + cmd);
  char buf[512] = {0};
  std::string line = fgets(buf, sizeof(buf), f) ? buf : "";
  if (pclose(f) != 0) throw std::runtime_error("failed: " + cmd);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

wizq::HandlerResult CheckSystem(const wizq::TaskInfo& t,
                                const wizq::CancelToken&) {
  for (const char* tool : {"tar", "sha256sum", "cp"}) {
    if (std::system(
            ("command -v " + std::string(tool) + " >/dev/null").c_str()))
      return wizq::HandlerResult::Failed(std::string(tool) + " is missing");
  }
  struct statvfs fs;
  if (statvfs(t.install_dir.c_str(), &fs) == 0 &&
      fs.f_bavail * fs.f_frsize < (10u << 20)) {
    return wizq::HandlerResult::Failed("less than 10 MiB free in " +
                                       t.install_dir);
  }
  return wizq::HandlerResult::Next({{"Confirm", "{}"}});
}

// The confirmation's answer arrives as {"answer": BOOL, "value": ...}.
wizq::HandlerResult Plan(const wizq::TaskInfo& t, const wizq::CancelToken&) {
  if (t.inputs_json.find("\"answer\":true") == std::string::npos)
    return wizq::HandlerResult::Done();  // declined: nothing to install
  std::ifstream in(g_mirror + "/manifest.json");
  if (!in) return wizq::HandlerResult::Failed("no manifest in " + g_mirror);
  std::vector<wizq::Spawn> next;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"file\"") == std::string::npos) continue;
    next.push_back({"Fetch", "{\"name\":\"" + Field(line, "name") +
                                 "\",\"file\":\"" + Field(line, "file") +
                                 "\",\"sha256\":\"" + Field(line, "sha256") +
                                 "\"}"});
  }
  return wizq::HandlerResult::Next(next);
}

// Copies into a temporary name, then renames: a retried or resumed attempt
// never sees half a file under the final name.
wizq::HandlerResult Fetch(const wizq::TaskInfo& t, const wizq::CancelToken&) {
  const std::string dl = t.install_dir + "/downloads";
  const std::string file = Field(t.inputs_json, "file");
  const std::string tmp = dl + "/." + t.idempotency_key;
  Shell("mkdir -p " + Quote(dl) + " && cp " + Quote(g_mirror + "/" + file) +
        " " + Quote(tmp) + " && mv " + Quote(tmp) + " " +
        Quote(dl + "/" + file));
  return wizq::HandlerResult::Next({{"Verify", t.inputs_json}});
}

wizq::HandlerResult Verify(const wizq::TaskInfo& t, const wizq::CancelToken&) {
  const std::string file =
      t.install_dir + "/downloads/" + Field(t.inputs_json, "file");
  const std::string got = Shell("sha256sum " + Quote(file)).substr(0, 64);
  if (got != Field(t.inputs_json, "sha256"))
    return wizq::HandlerResult::Failed("checksum mismatch for " + file);
  return wizq::HandlerResult::Next({{"Unpack", t.inputs_json}});
}

wizq::HandlerResult Unpack(const wizq::TaskInfo& t,
                           const wizq::CancelToken& cancel) {
  const std::string name = Field(t.inputs_json, "name");
  const std::string pkgs = t.install_dir + "/pkgs";
  const std::string tmp = pkgs + "/.unpack-" + t.idempotency_key;
  Shell("mkdir -p " + Quote(pkgs) + " && rm -rf " + Quote(tmp) + " && mkdir " +
        Quote(tmp) + " && tar -xzf " +
        Quote(t.install_dir + "/downloads/" + Field(t.inputs_json, "file")) +
        " -C " + Quote(tmp));
  if (cancel.cancelled()) return wizq::HandlerResult::Failed("cancelled");
  Shell("rm -rf " + Quote(pkgs + "/" + name) + " && mv " +
        Quote(tmp + "/" + name) + " " + Quote(pkgs + "/" + name) +
        " && rmdir " + Quote(tmp));
  return wizq::HandlerResult::Next({{"Configure", t.inputs_json}});
}

wizq::HandlerResult Configure(const wizq::TaskInfo& t,
                              const wizq::CancelToken&) {
  const std::string name = Field(t.inputs_json, "name");
  Shell("mkdir -p " + Quote(t.install_dir + "/etc"));
  std::ofstream(t.install_dir + "/etc/" + name + ".conf")
      << "prefix=" << t.install_dir << "/pkgs/" << name << "\n";
  return wizq::HandlerResult::Done();
}

// Plan's finally hook: runs once every package has settled.
wizq::HandlerResult Summary(const wizq::TaskInfo& t, const wizq::CancelToken&) {
  std::string status;
  wizq::Status s = wizq::Wizard::ReadStatus(t.install_dir, &status);
  if (!s.ok()) return wizq::HandlerResult::Failed(s.ToString());
  std::ofstream out(t.install_dir + "/SUMMARY.txt");
  out << "installed into " << t.install_dir << "\n";
  std::string ls = Shell("ls " + Quote(t.install_dir + "/pkgs") +
                         " 2>/dev/null | tr '\\n' ' ' || true");
  out << "packages: " << ls << "\n";
  return wizq::HandlerResult::Done();
}

// Answers the confirmation: on a terminal, asks; otherwise (or --yes) the
// prompt's default.
class Asker : public wizq::PromptAnswerer {
 public:
  explicit Asker(bool ask) : ask_(ask) {}
  wizq::Status Answer(const wizq::PromptRequest& q, const wizq::CancelToken&,
                      std::string* answer) override {
    if (!ask_) {
      *answer = q.default_json.empty() ? "true" : q.default_json;
      return wizq::Status::OK();
    }
    std::fprintf(stderr, "\n%s [Y/n] ", q.message.c_str());
    std::string line;
    if (!std::getline(std::cin, line))
      return wizq::Status::NotFound("no answer");
    *answer =
        (line.empty() || line[0] == 'y' || line[0] == 'Y') ? "true" : "false";
    return wizq::Status::OK();
  }

 private:
  const bool ask_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  bool yes = false;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--mirror" && i + 1 < argc) {
      g_mirror = argv[++i];
    } else if (a == "--yes") {
      yes = true;
    } else {
      std::fprintf(stderr,
                   "usage: embed-wizard --dir DIR [--mirror DIR] "
                   "[--yes]\n");
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "embed-wizard: --dir DIR is required\n");
    return 2;
  }
  std::unique_ptr<wizq::Wizard> wizard;
  wizq::Status s = wizq::Wizard::Parse(kWorkflow, "", &wizard);
  const std::pair<const char*, wizq::Handler> handlers[] = {
      {"CheckSystem", CheckSystem},
      {"Plan", Plan},
      {"Fetch", Fetch},
      {"Verify", Verify},
      {"Unpack", Unpack},
      {"Configure", Configure},
      {"Summary", Summary}};
  for (const auto& [name, handler] : handlers) {
    if (s.ok()) s = wizard->RegisterHandler(name, handler);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "embed-wizard: %s\n", s.ToString().c_str());
    return 2;
  }
  // Ctrl+C: stop cleanly; the next run resumes.
  signal(SIGINT, [](int) { wizq::Wizard::RequestStop(); });
  signal(SIGTERM, [](int) { wizq::Wizard::RequestStop(); });

  const bool terminal = isatty(STDIN_FILENO) && isatty(STDERR_FILENO);
  ProgressBar bar(isatty(STDERR_FILENO) != 0);
  Asker asker(terminal && !yes);
  wizq::WizardOptions options;
  options.install_dir = dir;
  options.observer = &bar;
  options.answerer = &asker;
  std::string error;
  const wizq::RunOutcome outcome = wizard->Run("{}", options, &error);
  if (!error.empty()) std::fprintf(stderr, "embed-wizard: %s\n", error.c_str());
  std::fprintf(stderr, "embed-wizard: %s\n", wizq::RunOutcomeName(outcome));
  return wizq::ExitCodeOf(outcome);
}
