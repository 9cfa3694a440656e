// Crash and I/O-error tests of the queue store (SPEC §6.1, 6.2, 6.6, 6.7).
//
// A scripted run (open, claim, complete with children including a
// duplicate, fail and retry, finally hooks, finish, close) is driven one
// call at a time through a FaultInjectionEnv. For every k, the k-th file
// operation crashes (a process crash, or a power loss that also drops
// what was not synced); for every n, the n-th write, sync or rename fails
// with ENOSPC or EIO. Each time the test checks what was recovered against
// what the calls that returned OK promised: every one of them is there,
// the failed one is there entirely or not at all, and the run can go on to
// the end.
//
// The crashes while archiving and while setting a torn tail aside are in
// queue_crash_archive_test.cc; views of a state in queue_crash_util.h.
#include <errno.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "audit/log.h"
#include "fs/fault_env.h"
#include "queue/dir/queue.h"
#include "queue/dir/snapshot.h"
#include "queue/dir/state.h"
#include "tests/queue_crash_util.h"
#include "tests/queue_test_util.h"
#include "tests/test_util.h"

namespace wizq::queue_crash_test {
namespace {

namespace fs = std::filesystem;
using test::MakeTask;
using test::NoSyncEnv;
using test::ReadAll;
using test::ScratchDir;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// --- the scripted run --------------------------------------------------------

// Drives the run one call at a time, deciding each call from the state
// alone, so that after a crash it carries on from whatever was recovered:
//   open (fresh: one Root with a finally hook)
//   claim Root; complete it with Child{x:1}, Child{x:2}, Child{x:1.0} (a
//   duplicate of the first); claim Child 2; fail it (retry); claim it again;
//   complete it; claim Child 3; complete it with a Leaf; claim and complete
//   the Leaf; Root's hook is due: submit it; claim and complete it; finish
//   the run; close.
class Driver {
 public:
  Driver(Env* env, const std::string& install_dir) {
    options_.env = env;
    options_.install_dir = install_dir;
    options_.run_id = "crash-run";
    options_.workflow_json = "{\"steps\":[\"Root\",\"Child\",\"Leaf\"]}";
    options_.checkpoint_min_bytes = 512;  // checkpoints mid-run too
    options_.initial_tasks.push_back(
        MakeTask("Root", "{\"n\":0}", 0, 3, Origin::kInitial, true));
  }

  // Makes the next call; records its name and result.
  Status Step() {
    std::string name;
    Status s = Next(&name);
    calls_.push_back(name + ": " + (s.ok() ? "OK" : s.ToString()));
    return s;
  }

  // Calls Step() until the script is done or a call fails.
  Status RunToEnd(int max_steps = 100) {
    for (int i = 0; i < max_steps && !done_; i++) {
      WIZQ_RETURN_IF_ERROR(Step());
    }
    return done_ ? Status::OK() : Status::Corruption("the script did not end");
  }

  // Like a crash: the Queue goes away without Close.
  void Abandon() { q_.reset(); }
  Queue* queue() { return q_.get(); }
  bool done() const { return done_; }
  std::string Calls() const {
    std::string out;
    for (const std::string& c : calls_) out += "  " + c + "\n";
    return out;
  }

 private:
  Status Transact(const std::function<Status(Txn&)>& fn) {
    return q_->Transact(fn);
  }

  Status Next(std::string* name) {
    if (!q_) {
      *name = "open";
      OpenReport report;
      return Queue::Open(options_, &q_, &report);
    }
    const QueueState& st = q_->state();
    for (int64_t id : st.in_progress()) {
      const Task& t = *st.Find(id);
      if (t.claimed_by != q_->worker_id()) continue;
      *name = "finish task " + std::to_string(id);
      if (t.type == "Root") {
        return Transact([&](Txn& txn) {
          return txn.Complete(
              id,
              {MakeTask("Child", "{\"x\":1}", id, 3, Origin::kSpawned),
               MakeTask("Child", "{\"x\":2}", id, 3, Origin::kSpawned),
               MakeTask("Child", "{\"x\":1.0}", id, 3, Origin::kSpawned)},
              nullptr);
        });
      }
      if (t.type == "Child" && t.inputs == "{\"x\":1}" && t.attempts == 1) {
        *name = "fail task " + std::to_string(id);
        return Transact([&](Txn& txn) {
          bool retry = false;
          return txn.Fail(id, kReasonExitCode, "exit 1", true, 0, &retry);
        });
      }
      std::vector<NewTask> children;
      if (t.type == "Child" && t.inputs == "{\"x\":2}") {
        children.push_back(
            MakeTask("Leaf", "{\"y\":[1,2]}", id, 2, Origin::kSpawned));
      }
      return Transact(
          [&](Txn& txn) { return txn.Complete(id, children, nullptr); });
    }
    if (!st.hooks_due().empty()) {
      const Task owner = *st.Find(*st.hooks_due().begin());
      *name = "submit hook of " + std::to_string(owner.id);
      return Transact([&](Txn& txn) {
        int64_t id = 0;
        bool dup = false;
        return txn.Submit(MakeTask("Hook", owner.inputs, owner.parent_id, 2,
                                   Origin::kFinally, false, owner.id),
                          &id, &dup);
      });
    }
    if (!st.pending().empty()) {
      *name = "claim";
      return Transact([&](Txn& txn) {
        int64_t id = 0;
        WIZQ_RETURN_IF_ERROR(txn.ClaimNextOfSteps(nullptr, nullptr, &id));
        return id != 0 ? Status::OK() : Status::Corruption("nothing to claim");
      });
    }
    if (st.run().status == RunStatus::kRunning && st.AllSettled()) {
      *name = "finish run";
      return Transact(
          [&](Txn& txn) { return txn.FinishRun(RunStatus::kCompleted, 10); });
    }
    if (st.run().status == RunStatus::kCompleted) {
      *name = "close";
      Status s = q_->Close();
      if (s.ok()) done_ = true;
      return s;
    }
    *name = "stuck";
    return Status::Corruption("the script is stuck:\n" + ToString(ViewOf(st)));
  }

  QueueOptions options_;
  std::unique_ptr<Queue> q_;
  std::vector<std::string> calls_;
  bool done_ = false;
};

// The fault-free run: the view after each call, and the operation counts.
struct Reference {
  std::vector<View> views;  // views[i]: after call i returned OK
  int64_t ops = 0;
  int64_t writes = 0, syncs = 0, renames = 0;
  std::string final_shape;
};

const Reference& GetReference() {
  static const Reference* ref = [] {
    auto* r = new Reference;
    ScratchDir dir;
    NoSyncEnv counting;
    FaultInjectionEnv env(&counting);  // no faults
    Driver d(&env, fs::canonical(dir.path()).string());
    while (!d.done()) {
      Status s = d.Step();
      EXPECT_TRUE(s.ok()) << s.ToString() << "\n" << d.Calls();
      if (!s.ok() || r->views.size() > 100) break;
      r->views.push_back(ViewOf(d.queue()->state()));
    }
    r->ops = env.op_count();
    r->writes = counting.count(FaultInjectionEnv::kWrite);
    r->syncs = counting.count(FaultInjectionEnv::kSync);
    r->renames = counting.count(FaultInjectionEnv::kRename);
    r->final_shape = ToString(r->views.back(), false);
    return r;
  }();
  return *ref;
}

TEST(QueueCrashTest, ReferenceRunDoesWhatTheScriptSays) {
  const Reference& ref = GetReference();
  ASSERT_FALSE(ref.views.empty());
  const View& last = ref.views.back();
  EXPECT_EQ(last.status, RunStatus::kCompleted);
  // Root, three children of which one was a duplicate, a leaf, the hook.
  EXPECT_EQ(ToString(last, true),
            "status completed\n"
            "1 Root {\"n\":0} done p=0 Initial fin=1/0/5 children=2,3, "
            "a=1/3 err=\n"
            "2 Child {\"x\":1} done p=1 Spawned fin=0/0/0 children= "
            "a=2/3 err=exit_code\n"
            "3 Child {\"x\":2} done p=1 Spawned fin=0/0/0 children=4, "
            "a=1/3 err=\n"
            "4 Leaf {\"y\":[1,2]} done p=3 Spawned fin=0/0/0 children= "
            "a=1/2 err=\n"
            "5 Hook {\"n\":0} done p=0 Finally fin=0/1/0 children= "
            "a=1/2 err=\n");
  EXPECT_GT(ref.renames, 2);  // mid-run checkpoints happened
  RecordProperty("ops", static_cast<int>(ref.ops));
}

// What a recovery must give after call `failed` (an index into the
// reference's calls) did not return OK: the state after the call before
// it, or after the failed call itself, with the dead worker's claims put
// back — never anything else.
void ExpectRecovered(const Reference& ref, size_t failed, const View& got,
                     const std::string& context, bool only_before = false) {
  const std::string actual = ToString(got);
  std::vector<std::string> allowed;
  if (failed > 0)
    allowed.push_back(ToString(AfterWorkerDeath(ref.views[failed - 1])));
  // (With `only_before`, the failed call's effect must be absent; when it
  // was the first call, the open that starts the run, the reopen starts it.)
  if (failed < ref.views.size() && (!only_before || failed == 0)) {
    allowed.push_back(ToString(AfterWorkerDeath(ref.views[failed])));
  }
  bool match = false;
  for (const std::string& a : allowed) match = match || a == actual;
  if (!match) {
    std::string msg = "recovered:\n" + actual + "allowed:\n";
    for (const std::string& a : allowed) msg += a + "--\n";
    ADD_FAILURE() << context << msg;
  }
}

// Checks the files a crash left (before anything repairs them).
void ExpectFilesReadable(const std::string& wizard,
                         const std::string& context) {
  const std::string snapshot = wizard + "/queue.json";
  if (fs::exists(snapshot)) {
    SnapshotHeader header;
    QueueState state;
    Status s = DecodeSnapshot(snapshot, ReadAll(snapshot), &header, &state);
    EXPECT_TRUE(s.ok()) << context << s.ToString();
    EXPECT_EQ(header.version, kSnapshotVersion) << context;
    const std::string log = wizard + "/audit.jsonl";
    EXPECT_LE(header.audit_offset, fs::exists(log) ? fs::file_size(log) : 0)
        << context;
  }
  const std::string log = wizard + "/audit.jsonl";
  if (fs::exists(log)) {
    LogParseResult parsed;
    Status s = ParseLog(log, ReadAll(log), 0, 1, &parsed);
    EXPECT_TRUE(s.ok()) << context << s.ToString();  // torn at worst
  }
}

// Reopens after a failure and checks the recovered state, then runs the
// script to its end and checks the end.
void RecoverAndFinish(const Reference& ref, Driver* d, size_t failed,
                      const std::string& wizard, const std::string& context,
                      bool only_before = false) {
  // The reopen is the driver's next call.
  Status s = d->Step();
  ASSERT_TRUE(s.ok()) << context << s.ToString() << "\n" << d->Calls();
  ExpectRecovered(ref, failed, ViewOf(d->queue()->state()), context,
                  only_before);
  s = d->RunToEnd();
  ASSERT_TRUE(s.ok()) << context << s.ToString() << "\n" << d->Calls();
  EXPECT_EQ(ToString(ViewOf(d->queue()->state()), false), ref.final_shape)
      << context;
  // At rest, the snapshot is exact and agrees with the whole log.
  const std::string from_snapshot = ViewFromDisk(wizard, true);
  EXPECT_EQ(from_snapshot, ToString(ViewOf(d->queue()->state()))) << context;
  EXPECT_EQ(ViewFromDisk(wizard, false), from_snapshot) << context;
}

// Runs the script with a crash at op k. Returns the index of the call that
// failed (the crash), or views.size() if none did.
size_t RunUntilCrash(const Reference& ref, Driver* d,
                     const std::string& context) {
  size_t i = 0;
  for (; !d->done(); i++) {
    Status s = d->Step();
    if (!s.ok()) break;
    EXPECT_LT(i, ref.views.size()) << context;
    if (i >= ref.views.size()) break;
    // Up to the crash, the run is the reference run.
    EXPECT_EQ(ToString(ViewOf(d->queue()->state())), ToString(ref.views[i]))
        << context;
  }
  return i;
}

void CrashAtEveryOp(bool power_loss, bool partial = false) {
  const Reference& ref = GetReference();
  ASSERT_GT(ref.ops, 10);
  for (int64_t k = 1; k <= ref.ops; k++) {
    const std::string context = CrashContext(power_loss, k);
    ScratchDir dir;
    const std::string install = fs::canonical(dir.path()).string();
    NoSyncEnv no_sync;
    FaultInjectionEnv env(&no_sync);
    env.SetTornWrites(true);
    env.SetPartialPowerLoss(partial);
    env.CrashAtOp(k);
    Driver d(&env, install);
    const size_t failed = RunUntilCrash(ref, &d, context);
    ASSERT_TRUE(env.crashed()) << context << "never crashed\n" << d.Calls();
    ASSERT_LT(failed, ref.views.size()) << context;
    d.Abandon();  // the process is gone: no Close
    Status s = AfterCrash(&env, power_loss);
    ASSERT_TRUE(s.ok()) << context << s.ToString();
    ExpectFilesReadable(install + "/.wizard", context);
    RecoverAndFinish(ref, &d, failed, install + "/.wizard",
                     context + "\n" + d.Calls());
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(QueueCrashTest, ProcessCrashAtEveryOpLosesNoReturnedTransition) {
  CrashAtEveryOp(/*power_loss=*/false);
}

TEST(QueueCrashTest, PowerLossAtEveryOpLosesNoReturnedTransition) {
  CrashAtEveryOp(/*power_loss=*/true);
}

// The disk keeps a random subset of the unsynced sectors (an overwritten
// sector may come back old or new; a file extension may keep zeros): the
// batch in flight may be half there, which recovery must take for torn.
TEST(QueueCrashTest, PartialPowerLossAtEveryOpLosesNoReturnedTransition) {
  CrashAtEveryOp(/*power_loss=*/true, /*partial=*/true);
}

// --- I/O errors --------------------------------------------------------------

const char* KindName(FaultInjectionEnv::OpKind kind) {
  switch (kind) {
    case FaultInjectionEnv::kWrite:
      return "write";
    case FaultInjectionEnv::kSync:
      return "sync";
    case FaultInjectionEnv::kRename:
      return "rename";
    default:
      return "any";
  }
}

void IoErrorAtEveryOp(FaultInjectionEnv::OpKind kind) {
  const Reference& ref = GetReference();
  const int64_t count = kind == FaultInjectionEnv::kWrite  ? ref.writes
                        : kind == FaultInjectionEnv::kSync ? ref.syncs
                                                           : ref.renames;
  ASSERT_GT(count, 0);
  for (int err : {ENOSPC, EIO}) {
    for (bool persistent : {false, true}) {
      for (int64_t n = 1;; n++) {
        const std::string context = std::string(KindName(kind)) + " #" +
                                    std::to_string(n) + " fails " +
                                    (persistent ? "for good" : "once") +
                                    " with " + strerror(err) + ": ";
        ScratchDir dir;
        const std::string install = fs::canonical(dir.path()).string();
        NoSyncEnv no_sync;
        FaultInjectionEnv env(&no_sync);
        env.SetTornWrites(true);
        env.FailOp(kind, n, err, persistent);
        Driver d(&env, install);
        size_t failed = 0;
        Status first_error;
        for (; !d.done(); failed++) {
          first_error = d.Step();
          if (!first_error.ok()) break;
        }
        if (d.done()) {
          // The script ran out of operations of this kind: every one of
          // them must have failed a call before this n.
          EXPECT_EQ(n, count + 1) << context << "the fault was not reported";
          break;
        }
        ASSERT_LE(n, count) << context << "more faults than operations";
        ASSERT_LT(failed, ref.views.size()) << context;
        // The failing call says what failed, and on which file.
        EXPECT_TRUE(first_error.IsIOError())
            << context << first_error.ToString();
        EXPECT_TRUE(Contains(first_error.message(), strerror(err)))
            << context << first_error.ToString();
        EXPECT_TRUE(Contains(first_error.message(), install + "/.wizard/"))
            << context << first_error.ToString();
        // The queue stops: later calls fail too, even if the fault is gone.
        if (d.queue() != nullptr) {
          env.ClearFaults();
          Status again = d.queue()->Transact([](Txn&) { return Status::OK(); });
          EXPECT_FALSE(again.ok()) << context << "the queue was not stopped";
          int64_t id = 0;
          again = d.queue()->Transact([&](Txn& txn) {
            return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
          });
          EXPECT_FALSE(again.ok()) << context << "the queue was not stopped";
          EXPECT_FALSE(d.queue()->Checkpoint().ok()) << context;
        }
        d.Abandon();
        env.ClearFaults();
        ExpectFilesReadable(install + "/.wizard", context);
        // A commit whose write or sync of the log failed was cut back off
        // the log: no reader ever sees it, even with no power lost (after a
        // failed fsync the page cache may hold data the disk does not).
        const bool log_failed =
            kind != FaultInjectionEnv::kRename &&
            Contains(first_error.message(), "/.wizard/audit.jsonl");
        RecoverAndFinish(ref, &d, failed, install + "/.wizard",
                         context + "\n" + d.Calls(), log_failed);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(QueueCrashTest, WriteErrorsStopTheRunAndLeaveTheLastDurableState) {
  IoErrorAtEveryOp(FaultInjectionEnv::kWrite);
}

TEST(QueueCrashTest, SyncErrorsStopTheRunAndLeaveTheLastDurableState) {
  IoErrorAtEveryOp(FaultInjectionEnv::kSync);
}

TEST(QueueCrashTest, RenameErrorsStopTheRunAndLeaveTheLastDurableState) {
  IoErrorAtEveryOp(FaultInjectionEnv::kRename);
}
}  // namespace
}  // namespace wizq::queue_crash_test
