#include "cli/agent.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "agent/agent_serve.h"
#include "agent/agent_service.h"
#include "cli/store_flags.h"
#include "fs/env.h"
#include "orchestrator/run.h"
#include "queue/task.h"

namespace wizq {

struct AgentCli::Args {
  CLI::App* agent = nullptr;
  CLI::App *take = nullptr, *heartbeat = nullptr, *done = nullptr,
           *fail = nullptr, *release = nullptr, *serve = nullptr;
  RunPlace place;  // --dir, --store, --schema, --run-id
  std::vector<std::string> steps;
  double wait = 0;
  std::string agent_name;
  int64_t task = 0;
  std::string lease;
  std::string response;
  std::string response_file;
  std::string message;
  int jobs = 1;
  std::vector<std::string> command;
};

namespace {

void OnStop(int, siginfo_t* info, void*) {
  RequestStop(info != nullptr ? static_cast<int>(info->si_pid) : 0);
}

void InstallStopHandlers() {
  struct sigaction sa = {};
  sa.sa_sigaction = OnStop;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

CLI::App* Sub(CLI::App* parent, const char* name, const char* help,
              RunPlace* place) {
  CLI::App* c = parent->add_subcommand(name, help);
  c->set_version_flag("--version", std::string("wizq ") + WIZQ_VERSION);
  AddRunPlaceOptions(c, place);
  return c;
}

void AddLeaseOptions(CLI::App* c, int64_t* task, std::string* lease) {
  c->add_option("--task", *task, "The task id (from take)")
      ->required()
      ->check(CLI::Range(int64_t{1}, INT64_MAX));
  c->add_option("--lease", *lease, "The lease token (from take)")->required();
}

int Print(const char* cmd, const AgentReply& r) {
  if (!r.json.empty()) std::printf("%s\n", r.json.c_str());
  std::fflush(stdout);
  if (!r.message.empty()) {
    std::fprintf(stderr, "wizq agent %s: %s\n", cmd, r.message.c_str());
  }
  return r.exit_code;
}

}  // namespace

AgentCli::AgentCli(CLI::App& app) : a_(std::make_unique<Args>()) {
  Args& a = *a_;
  a.agent = app.add_subcommand(
      "agent",
      "Agents for Pool steps: take, heartbeat, done, fail, release, serve");
  a.agent->set_version_flag("--version", std::string("wizq ") + WIZQ_VERSION);
  a.agent->require_subcommand(1);

  a.take = Sub(a.agent, "take", "Claim a ready Pool task; print its payload",
               &a.place);
  a.take->add_option("--step", a.steps, "Only tasks of this step (repeatable)");
  a.take->add_option("--wait", a.wait, "Wait up to this many seconds for one")
      ->check(CLI::Range(0.0, 1e9));
  a.take->add_option("--agent", a.agent_name, "The agent's name, for status");

  a.heartbeat = Sub(a.agent, "heartbeat", "Renew a task's lease", &a.place);
  AddLeaseOptions(a.heartbeat, &a.task, &a.lease);

  a.done = Sub(a.agent, "done", "Complete a task with its response", &a.place);
  AddLeaseOptions(a.done, &a.task, &a.lease);
  auto* resp = a.done->add_option("--response", a.response,
                                  "The response: a JSON array of next tasks");
  a.done
      ->add_option("--response-file", a.response_file,
                   "Read the response from a file (default: stdin)")
      ->excludes(resp);

  a.fail =
      Sub(a.agent, "fail", "Fail a task's attempt (agent_failed)", &a.place);
  AddLeaseOptions(a.fail, &a.task, &a.lease);
  a.fail->add_option("--message", a.message, "Why");

  a.release = Sub(a.agent, "release",
                  "Give a task back uncharged (pending again, the attempt "
                  "refunded)",
                  &a.place);
  AddLeaseOptions(a.release, &a.task, &a.lease);

  a.serve =
      Sub(a.agent, "serve",
          "Run COMMAND for each Pool task until the run finishes", &a.place);
  a.serve->add_option("--step", a.steps,
                      "Only tasks of this step (repeatable)");
  a.serve->add_option("--jobs,-j", a.jobs, "Tasks worked on at once")
      ->check(CLI::Range(1, 1024));
  a.serve->add_option("--agent", a.agent_name, "The agent's name, for status");
  a.serve->add_option("COMMAND", a.command, "The agent command and its args")
      ->required();
  a.serve->prefix_command(false);
}

AgentCli::~AgentCli() = default;

bool AgentCli::chosen() const { return a_->agent->parsed(); }

int AgentCli::Run() {
  Args& a = *a_;
  std::unique_ptr<AgentService> svc = AgentService::Open(a.place);
  if (*a.take) {
    TakeRequest req;
    req.steps = a.steps;
    req.wait_seconds = a.wait;
    req.agent = a.agent_name;
    return Print("take", svc->Take(req));
  }
  if (*a.heartbeat) return Print("heartbeat", svc->Heartbeat(a.task, a.lease));
  if (*a.fail) {
    return Print("fail",
                 svc->Fail(a.task, a.lease, kReasonAgentFailed, a.message));
  }
  if (*a.release) return Print("release", svc->Release(a.task, a.lease));
  if (*a.done) {
    std::string response = a.response;
    if (!a.response_file.empty()) {
      Status s = Env::Posix()->ReadUserFile(a.response_file, &response);
      if (!s.ok()) {
        std::fprintf(stderr,
                     "wizq agent done: cannot read --response-file: %s\n",
                     s.message().c_str());
        return kExitInvalid;
      }
    } else if (a.response.empty()) {
      response.assign(std::istreambuf_iterator<char>(std::cin),
                      std::istreambuf_iterator<char>());
    }
    return Print("done", svc->Done(a.task, a.lease, response));
  }
  InstallStopHandlers();
  ServeOptions o;
  o.place = a.place;
  o.steps = a.steps;
  o.jobs = a.jobs;
  o.agent =
      a.agent_name.empty() ? "serve-" + std::to_string(getpid()) : a.agent_name;
  o.command = a.command;
  o.note = [](const std::string& line) {
    std::fprintf(stderr, "wizq agent serve: %s\n", line.c_str());
  };
  std::string error;
  const int code = ServeAgent(o, &error);
  if (!error.empty()) {
    std::fprintf(stderr, "wizq agent serve: %s\n", error.c_str());
  }
  return code;
}

}  // namespace wizq
