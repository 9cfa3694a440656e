#include "cli/run_signals.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>

#include "orchestrator/run.h"
#include "orchestrator/run_loop.h"
#include "util/job_control.h"

namespace wizq {
namespace {

void OnStopSignal(int signo, siginfo_t* info, void*) {
  const int saved = errno;
  // The second request: what still runs is killed now, not after the grace.
  if (StopRequested()) job_control::SignalGroups(SIGKILL);
  NoteStopSignal(signo);
  RequestStop(info != nullptr ? static_cast<int>(info->si_pid) : 0);
  errno = saved;
}

void OnTerminalStop(int) {
  const int saved = errno;
  job_control::StopAllAndSelf();
  errno = saved;
}

}  // namespace

void InstallRunSignalHandlers() {
  struct sigaction sa = {};
  sa.sa_sigaction = OnStopSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  struct sigaction tstp = {};
  tstp.sa_handler = OnTerminalStop;
  tstp.sa_flags = SA_RESTART;
  sigemptyset(&tstp.sa_mask);
  sigaction(SIGTSTP, &tstp, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

std::string ParseHalt(const std::string& text, HaltPolicy* halt) {
  if (text == "never") {
    *halt = HaltPolicy();
    return "";
  }
  const size_t comma = text.find(',');
  const std::string when = text.substr(0, comma);
  const std::string rest =
      comma == std::string::npos ? "" : text.substr(comma + 1);
  const std::string wrong =
      "must be soon,fail=N or now,fail=N (N >= 1), "
      "or never; got \"" +
      text + "\"";
  if ((when != "soon" && when != "now") || rest.rfind("fail=", 0) != 0) {
    return wrong;
  }
  const std::string n = rest.substr(5);
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(n.c_str(), &end, 10);
  if (n.empty() || *end != '\0' || errno != 0 || v < 1 || v > 1000000000) {
    return wrong;
  }
  halt->when =
      when == "soon" ? HaltPolicy::When::kSoon : HaltPolicy::When::kNow;
  halt->failures = static_cast<int>(v);
  return "";
}

void AddHaltOption(CLI::App* run_cmd, HaltPolicy* halt) {
  run_cmd
      ->add_option_function<std::string>(
          "--halt",
          [halt](const std::string& text) {
            const std::string error = ParseHalt(text, halt);
            if (!error.empty()) throw CLI::ValidationError("--halt", error);
          },
          "soon|now,fail=N: stop after N failed tasks (soon: let the running "
          "ones finish; now: stop them, uncounted); the rest stays pending")
      ->type_name("soon,fail=N|now,fail=N|never");
}

}  // namespace wizq
