// CommitThread: the run loop's one long-lived helper thread for commits
// (orchestrator/run_loop.h, "Pipelining"). A commit is launched as a
// function returning its CommitResult and harvested through the future;
// at most one is in flight. When one lands, the thread makes wake_fd()
// readable (while wake_wanted), so that the main thread, waiting for task
// processes, can poll it too and take the commit's claims at once instead
// of on a timer.
// Internal to orchestrator/.
//
// Thread-safety: Launch and the destructor from the run loop's thread only.
#ifndef WIZQ_ORCHESTRATOR_COMMIT_THREAD_H_
#define WIZQ_ORCHESTRATOR_COMMIT_THREAD_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace wizq {

struct CommitResult;

class CommitThread {
 public:
  CommitThread();
  // Finishes the commit in flight, if any, and joins the thread.
  ~CommitThread();
  CommitThread(const CommitThread&) = delete;
  CommitThread& operator=(const CommitThread&) = delete;

  // Runs `commit` on the thread (started on first use). REQUIRES: the
  // previous launch's future is ready.
  std::future<CommitResult> Launch(std::function<CommitResult()> commit);

  // An eventfd that becomes readable when a commit lands (-1 if eventfds
  // are unavailable; then the caller polls). Drain() resets it.
  int wake_fd() const { return wake_fd_; }
  void Drain();
  // Whether a landing commit makes wake_fd() readable (default: yes). The
  // caller turns it off while it has enough to do without the commit's
  // claims, and takes the commit at its next wake instead: one wake less,
  // and the results that arrive meanwhile go into one commit. A commit
  // that lands just as the wake is turned back on is seen by landed()
  // (both are sequentially consistent: one of the two sides notices).
  void set_wake_wanted(bool wanted) { wake_wanted_.store(wanted); }
  // Whether the commit in flight has finished (its future is ready, or
  // about to be).
  bool landed() const { return landed_.load(); }

 private:
  void Loop();

  int wake_fd_ = -1;
  std::atomic<bool> wake_wanted_{true};
  std::atomic<bool> landed_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::packaged_task<CommitResult()> task_;  // guarded by mu_
  bool has_task_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace wizq

#endif  // WIZQ_ORCHESTRATOR_COMMIT_THREAD_H_
