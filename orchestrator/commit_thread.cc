#include "orchestrator/commit_thread.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <utility>

#include "orchestrator/run_loop.h"  // CommitResult

namespace wizq {

CommitThread::CommitThread()
    : wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

CommitThread::~CommitThread() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

std::future<CommitResult> CommitThread::Launch(
    std::function<CommitResult()> commit) {
  std::future<CommitResult> f;
  {
    std::lock_guard<std::mutex> l(mu_);
    // The wake is written before the future becomes ready, so a Drain()
    // after get() never leaves a stale wake behind (which would make every
    // Wait return at once: a busy loop until the next commit).
    const int fd = wake_fd_;
    landed_.store(false);
    task_ = std::packaged_task<CommitResult()>(
        [this, commit = std::move(commit), fd]() {
          CommitResult r = commit();
          landed_.store(true);
          if (fd >= 0 && wake_wanted_.load()) {
            const uint64_t one = 1;
            [[maybe_unused]] const ssize_t n = write(fd, &one, sizeof(one));
          }
          return r;
        });
    f = task_.get_future();
    has_task_ = true;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  cv_.notify_one();
  return f;
}

void CommitThread::Drain() {
  uint64_t n = 0;
  if (wake_fd_ >= 0) {
    // Nonblocking: EAGAIN when nothing landed since the last drain.
    [[maybe_unused]] const ssize_t r = read(wake_fd_, &n, sizeof(n));
  }
}

void CommitThread::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stop_ || has_task_; });
    if (!has_task_) return;  // stopping, nothing in flight
    std::packaged_task<CommitResult()> task = std::move(task_);
    has_task_ = false;
    l.unlock();
    task();
    l.lock();
  }
}

}  // namespace wizq
