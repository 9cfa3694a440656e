#include "tasks/exec/prompt_executor.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "tasks/exec/prompt.h"
#include "util/console.h"
#include "util/crash_point.h"

namespace wizq {

PromptExecutor::PromptExecutor(bool interactive, int in_fd)
    : interactive_(interactive), in_fd_(in_fd) {}

PromptExecutor::~PromptExecutor() { TerminateAll(0); }

bool PromptExecutor::CanRun(const Action& action) const {
  return action.kind == Action::Kind::kPrompt;
}

bool PromptExecutor::CanRunTask(const Task& task, const Action& action) const {
  if (!CanRun(action)) return false;
  if (!task.answer.empty()) return true;
  if (!interactive_) return action.prompt && action.prompt->default_json;
  std::lock_guard<std::mutex> g(mu_);
  return !eof_ && declined_.count(task.id) == 0;
}

void PromptExecutor::Finish(int64_t task_id, AttemptResult result) {
  if (started_.count(task_id) == 0) return;  // dropped by TerminateAll
  done_.emplace_back(task_id, std::move(result));
  cv_.notify_all();
}

Status PromptExecutor::Start(const Attempt& attempt) {
  if (attempt.action == nullptr || !attempt.action->prompt) {
    return Status::InvalidArgument("task " + std::to_string(attempt.task_id) +
                                   " is not a Prompt task");
  }
  const PromptSpec& prompt = *attempt.action->prompt;
  std::lock_guard<std::mutex> g(mu_);
  started_[attempt.task_id] = true;
  AttemptResult r;
  r.outcome = AttemptResult::Outcome::kResponded;
  r.exit_code = 0;
  if (!attempt.answer_json.empty()) {
    r.answer_json = attempt.answer_json;  // recorded before
  } else if (!interactive_ && prompt.default_json) {
    r.answer_json = *prompt.default_json;
    r.answer_source = "default";
  } else if (!interactive_ || eof_) {
    r.outcome = AttemptResult::Outcome::kUnanswered;
    r.error = "no one can answer here";
  } else {
    questions_.push_back(
        {attempt.task_id, attempt.step, attempt.action->prompt});
    if (!asker_.joinable()) {
      stop_ = false;
      asker_ = std::thread([this] { AskLoop(); });
    }
    cv_.notify_all();
    return Status::OK();
  }
  Finish(attempt.task_id, std::move(r));
  return Status::OK();
}

Status PromptExecutor::Wait(int timeout_ms, Done* done) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] { return !done_.empty() || started_.empty() || stop_; };
  if (timeout_ms < 0) {
    cv_.wait(lock, ready);
  } else if (timeout_ms > 0) {
    cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready);
  }
  for (auto& d : done_) {
    started_.erase(d.first);
    done->push_back(std::move(d));
  }
  done_.clear();
  return Status::OK();
}

size_t PromptExecutor::running() const {
  std::lock_guard<std::mutex> g(mu_);
  return started_.size();
}

void PromptExecutor::TerminateAll(double) {
  {
    // Under the lock: the asker either sees stop_ or is already waiting
    // when the notification comes (no lost wakeup, no hung join).
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (asker_.joinable()) asker_.join();
  std::lock_guard<std::mutex> g(mu_);
  questions_.clear();
  started_.clear();
  done_.clear();
}

void PromptExecutor::AskLoop() {
  while (true) {
    Question q;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !questions_.empty(); });
      if (stop_) return;
      q = questions_.front();
      questions_.pop_front();
    }
    AttemptResult r = AskOne(q);
    std::lock_guard<std::mutex> g(mu_);
    if (r.outcome == AttemptResult::Outcome::kUnanswered) {
      declined_.insert(q.task_id);
    }
    Finish(q.task_id, std::move(r));
  }
}

AttemptResult PromptExecutor::AskOne(const Question& q) {
  AttemptResult r;
  r.outcome = AttemptResult::Outcome::kUnanswered;
  const bool at_eof = [&] {
    std::lock_guard<std::mutex> g(mu_);
    return eof_;
  }();
  if (at_eof) return r;
  console::BeginQuestion();
  console::Ask("wizq: task " + std::to_string(q.task_id) + " " + q.step +
               " asks:\n? " + PromptQuestion(*q.prompt));
  CrashPoint("prompt.asking");
  for (int miss = 0; miss < kMaxMisses && !stop_; miss++) {
    std::string line;
    if (!ReadLine(&line)) {
      if (!stop_) {
        std::lock_guard<std::mutex> g(mu_);
        eof_ = true;
      }
      console::Ask("\n");
      break;
    }
    std::string answer;
    Status s = AnswerFromReply(*q.prompt, line, &answer);
    if (s.ok()) {
      r.outcome = AttemptResult::Outcome::kResponded;
      r.exit_code = 0;
      r.answer_json = answer;
      r.answer_source = "terminal";
      break;
    }
    if (miss + 1 < kMaxMisses) console::Ask(s.message() + "\n? ");
  }
  if (r.outcome == AttemptResult::Outcome::kUnanswered) {
    r.error = "no answer on the terminal";
    console::Ask("wizq: no answer for task " + std::to_string(q.task_id) +
                 "; it waits (the run pauses when nothing else can run)\n");
  }
  console::EndQuestion();
  return r;
}

bool PromptExecutor::ReadLine(std::string* line) {
  while (!stop_) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      *line = buffer_.substr(0, nl);
      if (!line->empty() && line->back() == '\r') line->pop_back();
      buffer_.erase(0, nl + 1);
      return true;
    }
    struct pollfd p = {in_fd_, POLLIN, 0};
    int n = poll(&p, 1, 100);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) continue;
    char buf[512];
    ssize_t got = read(in_fd_, buf, sizeof(buf));
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      if (buffer_.empty()) return false;
      *line = buffer_;  // a last line without its newline
      buffer_.clear();
      return true;
    }
    buffer_.append(buf, static_cast<size_t>(got));
  }
  return false;
}

}  // namespace wizq
