// embed_worker: a small program that embeds wizq (include/wizq/wizard.h),
// for tests/embed_crash_test.cc, which SIGKILLs it at random moments.
//
//   embed_worker --dir DIR --ledger FILE [--items N] [--mode torture|suicide]
//
// torture: Root spawns N Item tasks, each Item a Leaf (and every Item also
//   the same Leaf {"i": 0}, which dedup keeps to one task); Root has a
//   Function finally hook. Every handler call appends "B KEY PID NS" when
//   it begins and "E KEY PID NS" when it ends to the ledger (one write(2)
//   of O_APPEND each: whole lines, kept by a kill -9), KEY being STEP#i.
// suicide: one Function task whose handler SIGKILLs its own process; the
//   step allows 3 attempts (SPEC §6.3: it must end failed, not loop).
//
// Exits with the wizq command's code for the run's outcome.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "wizq/wizard.h"

namespace {

std::string g_ledger;

int64_t Ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Ledger(char what, const std::string& key) {
  const std::string line = std::string(1, what) + " " + key + " " +
                           std::to_string(getpid()) + " " +
                           std::to_string(Ns()) + "\n";
  int fd =
      open(g_ledger.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, line.data(), line.size()) !=
                    static_cast<ssize_t>(line.size())) {
    std::perror("ledger");
    _exit(3);
  }
  close(fd);
}

// The value's "i" (the values here are {"i": N}).
std::string IndexOf(const std::string& inputs) {
  const size_t p = inputs.find(':');
  if (p == std::string::npos) return "0";
  return inputs.substr(p + 1, inputs.find('}') - p - 1);
}

void Work() {
  thread_local std::mt19937 rng(std::random_device{}());
  std::this_thread::sleep_for(
      std::chrono::milliseconds(std::uniform_int_distribution<>(2, 30)(rng)));
}

const char* kTorture = R"({
  "entrypoint": "Root",
  "options": {"max_retries": 1000},
  "steps": [
    {"name": "Root", "action": {"kind": "Function"}, "next": ["Item"],
     "finally": {"kind": "Function"}},
    {"name": "Item", "action": {"kind": "Function"}, "next": ["Leaf"]},
    {"name": "Leaf", "action": {"kind": "Function"}, "next": []}
  ]})";

const char* kSuicide = R"({
  "entrypoint": "Die",
  "steps": [{"name": "Die", "action": {"kind": "Function"},
             "options": {"max_retries": 2}}]})";

wizq::Handler Logged(
    std::string step,
    std::function<wizq::HandlerResult(const wizq::TaskInfo&)> body) {
  return [step, body](const wizq::TaskInfo& t, const wizq::CancelToken&) {
    const std::string key =
        t.finally_hook ? step : step + "#" + IndexOf(t.inputs_json);
    Ledger('B', key);
    Work();
    wizq::HandlerResult r = body(t);
    Ledger('E', key);
    return r;
  };
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, mode = "torture";
  int items = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--dir") dir = argv[i + 1];
    if (a == "--ledger") g_ledger = argv[i + 1];
    if (a == "--items") items = std::atoi(argv[i + 1]);
    if (a == "--mode") mode = argv[i + 1];
  }
  if (dir.empty() || g_ledger.empty()) {
    std::fprintf(stderr, "usage: embed_worker --dir DIR --ledger FILE\n");
    return 2;
  }
  std::unique_ptr<wizq::Wizard> w;
  wizq::Status s =
      wizq::Wizard::Parse(mode == "suicide" ? kSuicide : kTorture, "", &w);
  if (s.ok() && mode == "suicide") {
    s = w->RegisterHandler("Die",
                           [](const wizq::TaskInfo&, const wizq::CancelToken&) {
                             Ledger('B', "Die");
                             kill(getpid(), SIGKILL);
                             return wizq::HandlerResult::Done();
                           });
  } else if (s.ok()) {
    s = w->RegisterHandler(
        "Root", Logged("Root", [items](auto&) {
          std::vector<wizq::Spawn> next;
          for (int i = 0; i < items; i++) {
            next.push_back({"Item", "{\"i\":" + std::to_string(i) + "}"});
          }
          return wizq::HandlerResult::Next(next);
        }));
    if (s.ok()) {
      s = w->RegisterHandler(
          "Item", Logged("Item", [](auto& t) {
            return wizq::HandlerResult::Next(
                {{"Leaf", t.inputs_json}, {"Leaf", "{\"i\":0}"}});
          }));
    }
    if (s.ok()) {
      s = w->RegisterHandler("Leaf", Logged("Leaf", [](auto&) {
                               return wizq::HandlerResult::Done();
                             }));
    }
    if (s.ok()) {
      s = w->RegisterHandler("Root.finally", Logged("Root.finally", [](auto&) {
                               return wizq::HandlerResult::Done();
                             }));
    }
  }
  if (!s.ok()) {
    std::fprintf(stderr, "embed_worker: %s\n", s.ToString().c_str());
    return 2;
  }
  wizq::WizardOptions o;
  o.install_dir = dir;
  o.jobs = 4;
  std::string error;
  const wizq::RunOutcome out = w->Run("{}", o, &error);
  if (!error.empty()) std::fprintf(stderr, "embed_worker: %s\n", error.c_str());
  return wizq::ExitCodeOf(out);
}
