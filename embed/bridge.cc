#include "embed/bridge.h"

#include <nlohmann/json.hpp>

#include "tasks/exec/prompt.h"
#include "util/canonical_json.h"

namespace wizq {

// --- CancelToken, HandlerResult ----------------------------------------------

struct CancelToken::State {
  std::shared_ptr<CancelFlag> flag;
};

CancelToken::CancelToken()
    : state_(std::make_shared<State>(State{std::make_shared<CancelFlag>()})) {}
CancelToken::CancelToken(std::shared_ptr<State> state)
    : state_(std::move(state)) {}
bool CancelToken::cancelled() const { return state_->flag->cancelled(); }
bool CancelToken::WaitFor(double seconds) const {
  return state_->flag->WaitFor(seconds);
}

static CancelToken TokenOf(const std::shared_ptr<CancelFlag>& flag) {
  return CancelToken(
      std::make_shared<CancelToken::State>(CancelToken::State{flag}));
}

HandlerResult HandlerResult::Next(std::vector<Spawn> next) {
  return HandlerResult(true, ResponseOf(next));
}
HandlerResult HandlerResult::NextJson(std::string response_json) {
  return HandlerResult(true, std::move(response_json));
}
HandlerResult HandlerResult::Done() { return HandlerResult(true, "[]"); }
HandlerResult HandlerResult::Failed(std::string message) {
  return HandlerResult(false, std::move(message));
}

std::string ResponseOf(const std::vector<Spawn>& next) {
  // The values are spliced in as given: the run loop validates the whole
  // response as it does a Command's stdout (invalid_response if not JSON).
  std::string out = "[";
  for (const Spawn& s : next) {
    if (out.size() > 1) out += ",";
    out += "{\"kind\":" + nlohmann::json(s.step).dump() + ",\"value\":" +
           (s.inputs_json.empty() ? std::string("{}") : s.inputs_json) + "}";
  }
  return out + "]";
}

// --- handlers
// -----------------------------------------------------------------

FunctionExecutor::Body HandlerBody(std::shared_ptr<const HandlerMap> handlers) {
  return [handlers](const Attempt& a,
                    const std::shared_ptr<CancelFlag>& flag) -> AttemptResult {
    // Everything the call needs is copied first: an abandoned call may
    // outlive the run's Workflow (Attempt::action points into it).
    const std::string name = a.action ? a.action->handler : a.step;
    TaskInfo t;
    t.id = a.task_id;
    t.step = a.step;
    t.inputs_json = a.value_json;
    t.attempt = a.number;
    t.run_id = a.run_id;
    t.idempotency_key = a.idempotency_key;
    t.install_dir = a.install_dir;
    t.finally_hook = a.origin == Origin::kFinally;
    AttemptResult r;
    auto it = handlers->find(name);
    if (it == handlers->end()) {
      r.outcome = AttemptResult::Outcome::kExited;
      r.error = "no handler is registered for Function \"" + name + "\"";
      return r;
    }
    // Exceptions propagate to the executor, which fails the attempt.
    HandlerResult h = it->second(t, TokenOf(flag));
    if (h.ok()) {
      r.outcome = AttemptResult::Outcome::kResponded;
      r.exit_code = 0;
      r.response = h.text();
    } else {
      r.outcome = AttemptResult::Outcome::kExited;
      r.error = "the handler failed: " + h.text();
    }
    return r;
  };
}

// --- prompts
// ------------------------------------------------------------------

namespace {

PromptRequest RequestOf(const Attempt& a, const PromptSpec& p) {
  PromptRequest q;
  q.task_id = a.task_id;
  q.step = a.step;
  q.mode = PromptModeName(p.mode);
  q.message = p.message;
  q.choices = p.choices;
  q.default_json = p.default_json.value_or("");
  q.answer_schema_json = p.answer_schema_json;
  q.inputs_json = a.value_json;
  return q;
}

struct AnswererState {
  PromptAnswerer* answerer;
  std::mutex ask_mu;  // one question at a time
  std::mutex mu;
  std::set<int64_t> declined;  // GUARDED_BY(mu)
};

AttemptResult AskAnswerer(AnswererState* st, const Attempt& a,
                          const std::shared_ptr<CancelFlag>& flag) {
  AttemptResult r;
  r.exit_code = 0;
  r.outcome = AttemptResult::Outcome::kResponded;
  if (!a.answer_json.empty()) {
    r.answer_json = a.answer_json;  // recorded before
    return r;
  }
  const PromptRequest q = RequestOf(a, *a.action->prompt);
  const std::shared_ptr<const PromptSpec> spec = a.action->prompt;
  std::lock_guard<std::mutex> one(st->ask_mu);
  constexpr int kMaxMisses = 3;
  for (int miss = 0; miss < kMaxMisses && !flag->cancelled(); miss++) {
    std::string answer, canonical;
    if (!st->answerer->Answer(q, TokenOf(flag), &answer).ok()) break;
    if (CanonicalizeJson(answer, &canonical).ok() &&
        CheckAnswer(*spec, canonical).ok()) {
      r.answer_json = canonical;
      r.answer_source = "program";
      return r;
    }
  }
  std::lock_guard<std::mutex> g(st->mu);
  st->declined.insert(a.task_id);
  r.exit_code = -1;
  r.outcome = AttemptResult::Outcome::kUnanswered;
  r.error = "the program gave no answer";
  return r;
}

}  // namespace

std::unique_ptr<FunctionExecutor> NewAnswererExecutor(PromptAnswerer* answerer,
                                                      double grace_seconds) {
  auto st = std::make_shared<AnswererState>();
  st->answerer = answerer;
  FunctionExecutor::Options o;
  o.kind = Action::Kind::kPrompt;
  o.grace_seconds = grace_seconds;
  o.can_run_task = [st](const Task& t, const Action&) {
    std::lock_guard<std::mutex> g(st->mu);
    return st->declined.count(t.id) == 0;
  };
  return std::make_unique<FunctionExecutor>(
      std::move(o),
      [st](const Attempt& a, const std::shared_ptr<CancelFlag>& flag) {
        return AskAnswerer(st.get(), a, flag);
      });
}

// --- observer
// -------------------------------------------------------------------

Observer::~Observer() = default;
void Observer::OnOpened(const std::string&, const std::string&,
                        const RunProgress&) {}
void Observer::OnTaskStarted(int64_t, const std::string&, int,
                             const RunProgress&) {}
void Observer::OnTaskFinished(int64_t, const std::string&, const std::string&,
                              const std::string&, bool, int,
                              const RunProgress&) {}
void Observer::OnNote(const std::string&) {}
void Observer::OnRunFinished(RunOutcome, const RunProgress&) {}
void Observer::OnPaused(const std::vector<int64_t>&, const RunProgress&) {}
PromptAnswerer::~PromptAnswerer() = default;

static RunProgress ProgressOf(const Progress& p) {
  RunProgress r;
  r.pending = p.pending;
  r.running = p.running;
  r.done = p.done;
  r.failed = p.failed;
  r.total = p.total;
  r.reused = p.reused;
  r.elapsed_ms = p.elapsed_ms;
  return r;
}

void ObserverBridge::OnOpened(const std::string& run_id,
                              const OpenReport& report, const Progress& p) {
  if (observer_ == nullptr) return;
  const char* how = report.action == OpenAction::kJoined     ? "joined"
                    : report.action == OpenAction::kResumed  ? "resumed"
                    : report.action == OpenAction::kFinished ? "finished"
                                                             : "started";
  observer_->OnOpened(run_id, how, ProgressOf(p));
}

void ObserverBridge::OnTaskStarted(const Task& task, int attempt,
                                   const Progress& p) {
  if (observer_)
    observer_->OnTaskStarted(task.id, task.type, attempt, ProgressOf(p));
}

void ObserverBridge::OnTaskFinished(const Task& task, const std::string& reason,
                                    const std::string& message, bool will_retry,
                                    int spawned, const Progress& p) {
  if (observer_) {
    observer_->OnTaskFinished(task.id, task.type, reason, message, will_retry,
                              spawned, ProgressOf(p));
  }
}

void ObserverBridge::OnRunFinished(RunStatus status, const Progress& p) {
  if (observer_ == nullptr) return;
  const RunOutcome o = status == RunStatus::kCompleted ? RunOutcome::kCompleted
                       : status == RunStatus::kFailed
                           ? RunOutcome::kTaskFailed
                           : RunOutcome::kInterrupted;
  observer_->OnRunFinished(o, ProgressOf(p));
}

void ObserverBridge::OnNote(const std::string& message) {
  if (observer_) observer_->OnNote(message);
}

void ObserverBridge::OnPaused(const std::vector<WaitingPrompt>& waiting,
                              const Progress& p) {
  if (observer_ == nullptr) return;
  std::vector<int64_t> ids;
  for (const WaitingPrompt& w : waiting) ids.push_back(w.id);
  observer_->OnPaused(ids, ProgressOf(p));
}

}  // namespace wizq
