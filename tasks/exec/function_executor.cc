#include "tasks/exec/function_executor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "fs/env.h"
#include "tasks/exec/attempt_files.h"

namespace wizq {

std::vector<std::string> FunctionHandlerNames(const Workflow& workflow) {
  std::vector<std::string> out;
  auto add = [&](const Action& a) {
    if (a.kind != Action::Kind::kFunction) return;
    for (const std::string& n : out)
      if (n == a.handler) return;
    out.push_back(a.handler);
  };
  for (const Step& step : workflow.steps()) {
    add(step.action);
    if (step.finally_hook) add(*step.finally_hook);
  }
  return out;
}

Status CheckFunctionHandlers(const Workflow& workflow,
                             const std::set<std::string>& registered) {
  for (const Step& step : workflow.steps()) {
    for (int hook = 0; hook < 2; hook++) {
      const Action* a =
          hook ? (step.finally_hook ? &*step.finally_hook : nullptr)
               : &step.action;
      if (a == nullptr || a->kind != Action::Kind::kFunction ||
          registered.count(a->handler) != 0) {
        continue;
      }
      return Status::InvalidArgument(
          "step \"" + step.name + "\": its " +
          (hook ? "finally hook" : "action") + " is a Function (handler \"" +
          a->handler +
          "\") and no handler is registered for it; a Function step runs "
          "only in a program that embeds wizq and registers one "
          "(docs/EMBEDDING.md)");
    }
  }
  return Status::OK();
}

void CancelFlag::Cancel() {
  {
    std::lock_guard<std::mutex> g(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

bool CancelFlag::WaitFor(double seconds) const {
  std::unique_lock<std::mutex> lock(mu_);
  if (seconds > 0) {
    cv_.wait_for(lock, std::chrono::duration<double>(seconds),
                 [&] { return cancelled_.load(); });
  }
  return cancelled_.load();
}

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%gs", s);
  return buf;
}

}  // namespace

// One running attempt.
struct Slot {
  uint64_t serial = 0;  // which thread posts to this slot
  int attempt = 0;
  std::shared_ptr<CancelFlag> cancel;
  std::thread thread;
  int64_t start_ms = 0;
  int64_t deadline_ms = -1;  // the timeout; -1: none
  int64_t abandon_ms = -1;   // raised: abandoned at this time; -1: not yet
  bool timed_out = false;    // raised by the timeout (not by a stop)
  std::optional<double> timeout_seconds;
  bool finished = false;
  AttemptResult result;
};

struct FunctionExecutor::Shared {
  std::mutex mu;
  std::condition_variable cv;  // a slot finished
  int event_fd = -1;           // written when a slot finished
  uint64_t next_serial = 1;
  std::map<int64_t, Slot> slots;           // by task id
  std::multiset<int64_t> abandoned_tasks;  // bodies still running

  ~Shared() {
    if (event_fd >= 0) close(event_fd);
  }
  // Called by the thread of `serial` when its body returned.
  void Post(int64_t task_id, uint64_t serial, AttemptResult r) {
    std::lock_guard<std::mutex> g(mu);
    auto it = slots.find(task_id);
    if (it != slots.end() && it->second.serial == serial) {
      it->second.finished = true;
      it->second.result = std::move(r);
    } else {
      auto a = abandoned_tasks.find(task_id);  // abandoned: dropped
      if (a != abandoned_tasks.end()) abandoned_tasks.erase(a);
    }
    const uint64_t one = 1;
    if (event_fd >= 0 && write(event_fd, &one, sizeof(one)) < 0) {
      // The counter is full (never: 2^64-2 wakes); Wait still polls.
    }
    cv.notify_all();
  }
};

FunctionExecutor::FunctionExecutor(Options options, Body body)
    : options_(std::move(options)),
      body_(std::make_shared<const Body>(std::move(body))),
      shared_(std::make_shared<Shared>()) {
  shared_->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

FunctionExecutor::~FunctionExecutor() { TerminateAll(options_.grace_seconds); }

bool FunctionExecutor::CanRun(const Action& action) const {
  return action.kind == options_.kind;
}

bool FunctionExecutor::CanRunTask(const Task& task,
                                  const Action& action) const {
  if (!CanRun(action)) return false;
  {
    std::lock_guard<std::mutex> g(shared_->mu);
    if (shared_->abandoned_tasks.count(task.id) != 0) return false;
  }
  return !options_.can_run_task || options_.can_run_task(task, action);
}

// The thread of one attempt: marks it started, runs the body, posts.
static void RunAttempt(std::shared_ptr<FunctionExecutor::Shared> shared,
                       std::shared_ptr<const FunctionExecutor::Body> body,
                       Attempt attempt, std::shared_ptr<CancelFlag> cancel,
                       uint64_t serial, std::string marker, Env* env) {
  AttemptResult r;
  if (!marker.empty()) {
    // Not synced: it only has to survive the process (kill -9), not the
    // machine; lost by a power cut, the attempt is merely not charged.
    const std::string dir = marker.substr(0, marker.rfind('/'));
    std::unique_ptr<WritableFile> f;
    Status s = env->CreateDirs(dir, 0700);
    if (s.ok()) s = env->NewWritableFile(marker, &f);
    if (s.ok()) s = f->Close();
    if (!s.ok()) {
      r.outcome = AttemptResult::Outcome::kSpawnFailed;
      r.error = "cannot record the call: " + s.message();
      shared->Post(attempt.task_id, serial, std::move(r));
      return;
    }
  }
  const int64_t start = NowMs();
  try {
    r = (*body)(attempt, cancel);
  } catch (const std::exception& e) {
    r = AttemptResult();
    r.outcome = AttemptResult::Outcome::kExited;
    r.error = std::string("the handler threw: ") + e.what();
  } catch (...) {
    r = AttemptResult();
    r.outcome = AttemptResult::Outcome::kExited;
    r.error = "the handler threw a non-std::exception";
  }
  r.seconds = static_cast<double>(NowMs() - start) / 1000.0;
  shared->Post(attempt.task_id, serial, std::move(r));
}

Status FunctionExecutor::Start(const Attempt& attempt) {
  auto cancel = std::make_shared<CancelFlag>();
  std::string marker;
  if (!options_.wizard_dir.empty()) {
    marker = AttemptFiles(options_.wizard_dir, attempt.task_id, attempt.number)
                 .function_marker_path();
  }
  Env* env = options_.env ? options_.env : Env::Posix();
  std::lock_guard<std::mutex> g(shared_->mu);
  Slot& slot = shared_->slots[attempt.task_id];
  slot = Slot();
  slot.serial = shared_->next_serial++;
  slot.attempt = attempt.number;
  slot.cancel = cancel;
  slot.start_ms = NowMs();
  slot.timeout_seconds = attempt.timeout_seconds;
  if (attempt.timeout_seconds) {
    slot.deadline_ms =
        slot.start_ms + static_cast<int64_t>(*attempt.timeout_seconds * 1000);
  }
  try {
    slot.thread = std::thread(RunAttempt, shared_, body_, attempt, cancel,
                              slot.serial, marker, env);
  } catch (const std::system_error& e) {
    shared_->slots.erase(attempt.task_id);
    return Status::IOError(std::string("cannot start a thread: ") + e.what());
  }
  return Status::OK();
}

int64_t FunctionExecutor::Sweep(Done* done) {
  const int64_t now = NowMs();
  const int64_t grace_ms =
      static_cast<int64_t>(options_.grace_seconds * 1000 + 0.5);
  int64_t next = -1;
  auto consider = [&](int64_t at) {
    if (at >= 0 && (next < 0 || at - now < next))
      next = std::max<int64_t>(0, at - now);
  };
  for (auto it = shared_->slots.begin(); it != shared_->slots.end();) {
    Slot& s = it->second;
    if (!s.finished && s.deadline_ms >= 0 && now >= s.deadline_ms &&
        s.abandon_ms < 0) {
      s.timed_out = true;
      s.abandon_ms = now + grace_ms;
      s.cancel->Cancel();
    }
    const bool overdue =
        !s.finished && s.abandon_ms >= 0 && now >= s.abandon_ms;
    if (!s.finished && !overdue) {
      consider(s.abandon_ms >= 0 ? s.abandon_ms : s.deadline_ms);
      ++it;
      continue;
    }
    AttemptResult r;
    if (s.finished) {
      s.thread.join();  // it posted: about to return
      r = std::move(s.result);
    } else {
      s.thread.detach();  // holds shared ownership of all it uses
      shared_->abandoned_tasks.insert(it->first);
    }
    if (s.timed_out) {
      r = AttemptResult();
      r.outcome = AttemptResult::Outcome::kTimedOut;
      r.error = "timed out after " + Seconds(*s.timeout_seconds) +
                (s.finished ? " (the handler returned after cancellation; "
                              "its result is discarded)"
                            : " and the handler did not return within " +
                                  Seconds(options_.grace_seconds) +
                                  " of cancellation (its thread is left "
                                  "running; its result will be discarded)");
    }
    r.seconds = static_cast<double>(now - s.start_ms) / 1000.0;
    done->emplace_back(it->first, std::move(r));
    it = shared_->slots.erase(it);
  }
  return next;
}

Status FunctionExecutor::Wait(int timeout_ms, Done* done) {
  const int64_t until = timeout_ms < 0 ? -1 : NowMs() + timeout_ms;
  while (true) {
    int64_t next;
    {
      std::lock_guard<std::mutex> g(shared_->mu);
      const size_t before = done->size();
      next = Sweep(done);
      if (done->size() > before || shared_->slots.empty()) break;
    }
    int64_t wait = until < 0 ? -1 : std::max<int64_t>(0, until - NowMs());
    if (next >= 0 && (wait < 0 || next < wait)) wait = next;
    if (until >= 0 && wait == 0 && NowMs() >= until) break;
    struct pollfd fds[2] = {{shared_->event_fd, POLLIN, 0},
                            {wake_fd_, POLLIN, 0}};
    const int n =
        poll(fds, wake_fd_ >= 0 ? 2 : 1,
             static_cast<int>(std::min<int64_t>(wait < 0 ? 1000 : wait, 1000)));
    if (n < 0 && errno != EINTR) {
      return Status::IOErrorFromErrno("poll", "function executor", errno);
    }
    uint64_t count;
    if (n > 0 && (fds[0].revents & POLLIN) &&
        read(shared_->event_fd, &count, sizeof(count)) < 0) {
      // EAGAIN: another reader took it; nothing to do.
    }
    if (n > 0 && wake_fd_ >= 0 && (fds[1].revents & POLLIN)) {
      std::lock_guard<std::mutex> g(shared_->mu);
      Sweep(done);
      break;
    }
  }
  return Status::OK();
}

size_t FunctionExecutor::running() const {
  std::lock_guard<std::mutex> g(shared_->mu);
  return shared_->slots.size();
}

size_t FunctionExecutor::abandoned() const {
  std::lock_guard<std::mutex> g(shared_->mu);
  return shared_->abandoned_tasks.size();
}

void FunctionExecutor::TerminateAll(double grace_seconds) {
  // The shorter of the caller's grace and this executor's own.
  grace_seconds = std::min(grace_seconds, options_.grace_seconds);
  std::unique_lock<std::mutex> lock(shared_->mu);
  for (auto& [id, s] : shared_->slots) s.cancel->Cancel();
  shared_->cv.wait_for(
      lock, std::chrono::duration<double>(std::max(0.0, grace_seconds)), [&] {
        for (auto& [id, s] : shared_->slots)
          if (!s.finished) return false;
        return true;
      });
  for (auto& [id, s] : shared_->slots) {
    if (s.finished) {
      s.thread.join();
    } else {
      s.thread.detach();
      shared_->abandoned_tasks.insert(id);
    }
  }
  shared_->slots.clear();
}

bool FunctionExecutor::AttemptStarted(int64_t task_id, int attempt) const {
  if (options_.wizard_dir.empty()) return false;
  Env* env = options_.env ? options_.env : Env::Posix();
  return env->FileExists(AttemptFiles(options_.wizard_dir, task_id, attempt)
                             .function_marker_path());
}

bool FunctionExecutor::SetWakeFd(int fd) {
  wake_fd_ = fd;
  return true;
}

}  // namespace wizq
