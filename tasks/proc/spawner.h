// The spawner: one small process per CommandRunner that starts every
// attempt's `/bin/sh -c <script>` and records how it ended, so that an
// attempt can finish, and its exit status be kept, when the wizq that
// started it is gone (tasks/proc/orphans_record.h, docs/PROTOCOL.md "Orphans
// after a crash").
//
// It is forked from wizq once, on the first spawn, and then runs only
// async-signal-safe code (wizq has other threads): its own process group,
// /dev/null as stdio, every inherited descriptor closed, SIGINT, SIGTERM,
// SIGHUP, SIGQUIT, SIGPIPE and the terminal stop signals blocked (its
// shells get them unblocked, and wizq's descriptor limit: the spawner
// raises its own). Each attempt costs
// it one vfork+exec, instead of the full fork of wizq per attempt of
// earlier versions (the per-attempt supervisor; docs/BENCHMARKS.md).
//
// The protocol, over a SOCK_SEQPACKET socket pair (one message each):
//
//   wizq -> spawner  kSpawn    header + plan (up to kInlinePlanMax bytes
//                              after the header, else a memfd as a fifth
//                              descriptor), descriptors stdin, stdout
//                              (flocked: the attempt's lock), stderr, the
//                              run's journal
//                    kRelease  leaders that may be reaped now (any
//                              message carries such a list too)
//                    kCancel   drop the attempt if it has not started
//                    kLimit    how many shells may run at once
//                    kDeadline the local deadline moved (below)
//   spawner -> wizq  kStarted  the shell runs: its pid (= its group)
//                    kEnded    how it ended (exit, signal, or spawn errno,
//                              ECANCELED for a cancelled one); the
//                              journal's end line is written by then
//
// The local deadline (SPEC §14): on a store that several machines share, a
// worker's claims lapse on the store's clock unless it renews them, and
// another host may then run the task. Every message carries wizq's
// deadline, a CLOCK_MONOTONIC time (0: none): past it the spawner kills
// the process group of every shell that runs (its kEnded says
// past_deadline) and starts nothing more until a later deadline comes, so
// a worker cut off from the store — or frozen itself, or dead — ends its
// attempts before their claims can be given to another host. The spawner
// keeps enforcing it after wizq is gone.
//
// Attempts beyond the limit wait in the spawner, first come first: when a
// shell ends, the spawner starts the next one at once, without a round
// trip through wizq (what xargs does; docs/BENCHMARKS.md). When wizq is
// gone, what waits is dropped: those attempts never began. While more
// attempts wait than may run at once, the spawner holds its kStarted and
// kEnded events back (at most kHoldMs, 64 of them), so that wizq wakes
// once per few attempts, not twice per attempt; events carry their time.
//
// The shell leads its own process group. In the vfork child, before the
// exec, it appends the journal's start line (tasks/exec/attempt_journal.h); the
// spawner appends the end line once the shell has exited, and keeps the
// shell's zombie unreaped until then (a zombie leader tells a prober that
// the end line is coming: tasks/proc/orphans.cc) and further until wizq sends
// kRelease, so that the group id cannot be reused while wizq may still
// signal it (wizq kills what the shell left in its group first). Once the
// shell runs, the spawner holds no copy of the attempt's lock: whatever
// holds a lock may be killed by ReapOrphans, never the spawner. When wizq is
// gone (the socket reads EOF, or the spawner's parent changed), the spawner
// syncs the stdout file's filesystem, appends the end line with synced=1,
// fdatasyncs the journal, reaps at once, and exits when its last shell has
// ended.
//
// Internal to tasks/: used by command_runner.cc.
#ifndef WIZQ_TASKS_SPAWNER_H_
#define WIZQ_TASKS_SPAWNER_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "util/status.h"

namespace wizq::internal {

// Messages (both directions are fixed-size structs).
struct SpawnRequest {
  enum Kind : uint32_t {
    kSpawn = 1,
    kRelease = 2,
    kCancel = 3,
    kLimit = 4,
    kDeadline = 5
  };
  uint32_t kind = kSpawn;
  int32_t attempt = 0;
  uint64_t serial = 0;  // wizq's name for the attempt, echoed in events
  uint32_t argc = 0;    // argv strings in the plan, after its header ones
  uint32_t envc = 0;    // environment strings after them
  uint32_t plan_size = 0;
  uint32_t limit = kNoLimit;  // kSpawn, kLimit: shells at once
  static constexpr uint32_t kNoLimit = UINT32_MAX;
  // Any message: attempts whose leaders may be reaped now (kRelease's
  // job, carried by the next request instead of a message of its own).
  static constexpr uint32_t kMaxRelease = 16;
  uint32_t nrelease = 0;
  uint64_t release[kMaxRelease] = {};
  int64_t deadline_ns = 0;  // any message: the local deadline (0: none)
};
struct SpawnEvent {
  enum Kind : uint32_t { kStarted = 1, kEnded = 2 };
  uint32_t kind = 0;
  int32_t pid = 0;  // the shell; 0 when none was started
  uint64_t serial = 0;
  int32_t end = 0;    // kEnded: AttemptRecord::End (0 exit, 1 signal, 2 spawn)
  int32_t value = 0;  // exit code, signal number or errno
  int64_t at_ns = 0;  // when it happened, CLOCK_MONOTONIC
  int32_t past_deadline = 0;  // kEnded: killed at the local deadline
};

// What an attempt is started with. The descriptors stay wizq's: the
// spawner gets copies.
struct SpawnPlan {
  uint64_t serial = 0;
  int attempt = 1;
  std::string shell;  // "/bin/sh"
  std::string key;    // the task's key in the journal
  std::string boot_id;
  std::string cwd;                // empty: the spawner's (wizq's at fork)
  std::vector<std::string> argv;  // {"sh", "-c", script}
  std::vector<std::string> env;   // "NAME=value"
  int in = -1, out = -1, err = -1, journal = -1;
};

constexpr int kSpawnerHoldMs = 5;
constexpr size_t kInlinePlanMax = 60 * 1024;

// wizq's end of the spawner. Not thread-safe (one CommandRunner's).
class Spawner {
 public:
  Spawner() = default;
  // Closes the socket and waits for the spawner to exit (it does once its
  // shells have ended: end them first).
  ~Spawner();
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  // Asks for the attempt to be started, or queued while `limit` shells run
  // (SpawnRequest::kNoLimit: none); the spawner is forked first if none runs.
  // Its kStarted or kEnded event comes later.
  Status Spawn(const SpawnPlan& plan, uint32_t limit);
  // Drops attempt `serial` if it has not started (kEnded, ECANCELED).
  void Cancel(uint64_t serial);
  // Changes the limit of shells at once.
  void SetLimit(uint32_t limit);
  // Moves the local deadline (CLOCK_MONOTONIC ns; 0: none), told now when
  // a spawner runs, else with the first spawn.
  void SetDeadline(int64_t deadline_ns);
  // The leader of attempt `serial` (ended) may be reaped: told with the
  // next request, or now when many wait. Best effort.
  void Release(uint64_t serial);
  // Tells the releases now.
  void FlushReleases();
  // Readable when events are waiting (or the spawner died); -1 when no
  // spawner runs.
  int fd() const { return sock_; }
  // Appends the events that arrived, without blocking. *died: the spawner
  // is gone (EOF); it is reaped, and the next Spawn starts another.
  Status Read(std::vector<SpawnEvent>* events, bool* died);
  pid_t pid() const { return pid_; }
  // Whether the spawner is known to be gone (a send found its end closed);
  // the next Read reports it.
  bool dead() const { return died_; }

 private:
  Status Start();
  // A message without descriptors; best effort.
  void Tell(uint32_t kind, uint64_t serial, uint32_t limit);
  // Sends one message, reading events while the socket is full.
  Status Send(const void* msg, size_t size, const int* fds, int nfds);
  Status ReadSome(bool* died);
  void Stop();

  int sock_ = -1;
  pid_t pid_ = -1;
  // Moves up to kMaxRelease of releases_ into `req`, and the deadline.
  void AddReleases(SpawnRequest* req);
  int64_t deadline_ns_ = 0;

  std::deque<SpawnEvent> pending_;  // read while sending
  std::vector<uint64_t> releases_;  // not told yet
  bool died_ = false;
};

// The spawner's main loop (spawner_main.cc), in the forked child: `sock`
// is its end of the pair, `parent` wizq's pid.
[[noreturn]] void SpawnerMain(int sock, pid_t parent);

}  // namespace wizq::internal

#endif  // WIZQ_TASKS_SPAWNER_H_
