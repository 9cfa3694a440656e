// wizq::Wizard (include/wizq/wizard.h) over RunWorkflowWith, the entry
// point `wizq run` uses too (orchestrator/run.h).
#include "wizq/wizard.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "agent/run_status.h"
#include "embed/bridge.h"
#include "fs/env.h"
#include "orchestrator/run.h"
#include "queue/run_place.h"
#include "queue/store.h"
#include "tasks/workflow/workflow.h"

// Recorded in the run (run_started), as the wizq command records its own.
#ifndef WIZQ_LIBRARY_VERSION
#define WIZQ_LIBRARY_VERSION "unknown"
#endif

namespace wizq {

struct Wizard::Impl {
  std::unique_ptr<Workflow> workflow;
  std::string source;  // the file, or "<workflow text>", for messages
  std::string text;    // what Parse was given (empty: load `source`)
  std::mutex handlers_mu;
  std::map<std::string, Handler> handlers;  // GUARDED_BY(handlers_mu)
  std::mutex run_mu;                        // one Run at a time
};

Wizard::Wizard(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Wizard::~Wizard() = default;

Status Wizard::Load(const std::string& workflow_path,
                    std::unique_ptr<Wizard>* out) {
  auto impl = std::make_unique<Impl>();
  WIZQ_RETURN_IF_ERROR(Workflow::Load(workflow_path, &impl->workflow));
  impl->source = workflow_path;
  out->reset(new Wizard(std::move(impl)));
  return Status::OK();
}

Status Wizard::Parse(const std::string& workflow_json,
                     const std::string& base_dir,
                     std::unique_ptr<Wizard>* out) {
  auto impl = std::make_unique<Impl>();
  impl->source = "<workflow text>";
  WIZQ_RETURN_IF_ERROR(
      Workflow::Parse(workflow_json, impl->source, &impl->workflow));
  std::string dir = base_dir;
  if (dir.empty()) {
    char buf[PATH_MAX];
    if (getcwd(buf, sizeof(buf)) == nullptr) {
      return Status::IOErrorFromErrno("getcwd", ".", errno);
    }
    dir = buf;
  }
  impl->workflow->set_base_dir(dir);
  impl->text = workflow_json;
  out->reset(new Wizard(std::move(impl)));
  return Status::OK();
}

Status Wizard::RegisterHandler(const std::string& name, Handler handler) {
  const std::vector<std::string> names = FunctionHandlerNames(*impl_->workflow);
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string known;
    for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
    return Status::InvalidArgument(
        "RegisterHandler(\"" + name + "\"): no Function action of " +
        impl_->source + " is named so (" +
        (known.empty() ? "it has none" : "its Functions: " + known) + ")");
  }
  if (!handler) {
    return Status::InvalidArgument("RegisterHandler(\"" + name +
                                   "\"): the handler is empty");
  }
  std::lock_guard<std::mutex> g(impl_->handlers_mu);
  if (!impl_->handlers.emplace(name, std::move(handler)).second) {
    return Status::InvalidArgument("RegisterHandler(\"" + name +
                                   "\"): a handler is registered already");
  }
  return Status::OK();
}

std::vector<std::string> Wizard::MissingHandlers() const {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> g(impl_->handlers_mu);
  for (const std::string& n : FunctionHandlerNames(*impl_->workflow)) {
    if (impl_->handlers.count(n) == 0) out.push_back(n);
  }
  return out;
}

static RunOutcome OutcomeOfExitCode(int code) {
  switch (code) {
    case kExitCompleted:
      return RunOutcome::kCompleted;
    case kExitTaskFailed:
      return RunOutcome::kTaskFailed;
    case kExitInvalid:
      return RunOutcome::kInvalid;
    case kExitPaused:
      return RunOutcome::kPaused;
    case kExitInterrupted:
      return RunOutcome::kInterrupted;
    default:
      return RunOutcome::kEnvironment;
  }
}

RunOutcome Wizard::Run(const std::string& input_json,
                       const WizardOptions& options, std::string* error) {
  error->clear();
  if (!(options.cancel_grace_seconds >= 0)) {
    *error = "WizardOptions::cancel_grace_seconds must be >= 0";
    return RunOutcome::kInvalid;
  }
  std::unique_lock<std::mutex> lock(impl_->run_mu);  // one Run at a time
  RunOptions ro;
  ro.workflow_path = impl_->source;
  ro.install_dir = options.install_dir;
  ro.input_json = input_json;
  ro.run_id = options.run_id;
  ro.jobs = options.jobs;
  ro.fresh = options.fresh;
  ro.no_reuse = options.no_reuse;
  ro.answers = options.answers;
  ro.store = options.store;
  ro.schema = options.schema;
  ro.wizq_version = WIZQ_LIBRARY_VERSION;
  RunExtras extras;
  extras.workflow_text =
      impl_->text.empty() ? impl_->workflow->frozen_json() : impl_->text;
  extras.base_dir = impl_->workflow->base_dir();
  std::shared_ptr<const HandlerMap> handlers;
  {
    std::lock_guard<std::mutex> g(impl_->handlers_mu);
    handlers = std::make_shared<const HandlerMap>(impl_->handlers);
  }
  for (const auto& h : *handlers) extras.handlers.insert(h.first);
  const double grace = options.cancel_grace_seconds;
  PromptAnswerer* answerer = options.answerer;
  extras.make_executors = [&](const std::string& workspace) {
    std::vector<std::unique_ptr<Executor>> out;
    FunctionExecutor::Options fo;
    fo.wizard_dir = workspace;
    fo.grace_seconds = grace;
    out.push_back(
        std::make_unique<FunctionExecutor>(fo, HandlerBody(handlers)));
    if (answerer) out.push_back(NewAnswererExecutor(answerer, grace));
    return out;
  };
  ObserverBridge bridge(options.observer);
  RunError e;
  const int code = RunWorkflowWith(ro, extras, &bridge, &e);
  *error = e.message;
  if (code == kExitInterrupted) ClearStopRequest();  // consumed by this run
  return OutcomeOfExitCode(code);
}

void Wizard::RequestStop() { wizq::RequestStop(0); }

Status Wizard::ReadStatus(const std::string& install_dir,
                          std::string* status_json) {
  WizardOptions where;
  where.install_dir = install_dir;
  return ReadStatus(where, status_json);
}

Status Wizard::ReadStatus(const WizardOptions& where,
                          std::string* status_json) {
  RunPlace place;
  place.dir = where.install_dir;
  place.store = where.store;
  place.schema = where.schema;
  place.run_id = where.run_id;
  StoreOptions o;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Store> store;
  WIZQ_RETURN_IF_ERROR(place.Open(o, &store, nullptr));
  return RunStatusJson(*store,
                       static_cast<int64_t>(Env::Posix()->NowMicros() / 1000),
                       status_json);
}

const char* RunOutcomeName(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::kCompleted:
      return "completed";
    case RunOutcome::kTaskFailed:
      return "task_failed";
    case RunOutcome::kInvalid:
      return "invalid";
    case RunOutcome::kEnvironment:
      return "environment";
    case RunOutcome::kPaused:
      return "paused";
    case RunOutcome::kInterrupted:
      return "interrupted";
  }
  return "unknown";
}

int ExitCodeOf(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::kCompleted:
      return kExitCompleted;
    case RunOutcome::kTaskFailed:
      return kExitTaskFailed;
    case RunOutcome::kInvalid:
      return kExitInvalid;
    case RunOutcome::kEnvironment:
      return kExitEnvironment;
    case RunOutcome::kPaused:
      return kExitPaused;
    case RunOutcome::kInterrupted:
      return kExitInterrupted;
  }
  return kExitEnvironment;
}

}  // namespace wizq
