// What the PostgreSQL store's own tests share (tests/pg/pg_store_test.cc,
// pg_store_race_test.cc): a fixture opening stores of one run on the
// test binary's cluster, store_tool processes, and small helpers.
#ifndef WIZQ_TESTS_PG_PG_STORE_FIXTURE_H_
#define WIZQ_TESTS_PG_PG_STORE_FIXTURE_H_

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fs/env.h"
#include "queue/host.h"
#include "queue/store.h"
#include "tests/pg/pg_test_util.h"
#include "tests/test_util.h"

extern char** environ;

namespace wizq::test {

inline NewTask MakeNew(const std::string& type, const std::string& inputs) {
  NewTask t;
  t.type = type;
  t.inputs = inputs;
  t.origin = Origin::kInitial;
  t.max_attempts = 3;
  return t;
}

class PgStoreTest : public PgTest {
 protected:
  StoreOptions Options(std::vector<NewTask> roots = {}) {
    StoreOptions o;
    o.location = cluster_->Location();
    o.schema = schema_;
    o.install_dir = dir_.path();
    o.env = Env::Posix();
    o.run_id = "r1";
    o.workflow_json = "{}";
    o.wizq_version = "test";
    o.initial_tasks = std::move(roots);
    return o;
  }
  std::unique_ptr<Store> OpenOk(const StoreOptions& o) {
    std::unique_ptr<Store> s;
    const Status st = Store::Open(o, &s, nullptr);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return s;
  }
  std::vector<EventRecord> Events(Store* s) {
    std::vector<EventRecord> events;
    EXPECT_OK(s->ReadEvents(0, SIZE_MAX, &events));
    return events;
  }

  // Starts store_tool with `args` (after the run's location), its stdout
  // into `out`; returns its pid.
  pid_t Tool(std::vector<std::string> args, const std::string& out) {
    const StoreOptions o = Options();
    const std::string tool = BuildDir() + "/store_tool";
    std::vector<std::string> all = {tool,     "--location",  o.location,
                                    "--dir",  o.install_dir, "--run-id",
                                    o.run_id, "--schema",    o.schema};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = 0;
    EXPECT_EQ(
        posix_spawn(&pid, tool.c_str(), &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
  }
  static int Reap(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // Ends the liveness session of worker `s` on the server (its renewals
  // stop; its claims lapse with their leases).
  Status EndLiveness(Store* s) {
    PgResult r;
    WIZQ_RETURN_IF_ERROR(admin_->Exec(
        "SELECT backend_pid FROM " + schema_ + ".workers WHERE worker_id = $1",
        {s->worker_id()}, &r));
    if (r.rows() != 1) return Status::NotFound("no liveness session");
    return cluster_->TerminateBackend(
        static_cast<int>(r.GetInt(0, "backend_pid")));
  }

  // Claims by `f` on `s` and marks what it claimed started, in one
  // transaction (a worker whose attempts began).
  static Status ClaimStarted(Store* s, const ClaimFilter& f,
                             std::vector<wizq::Task>* got) {
    return s->Transact([&](StoreTxn& txn) {
      WIZQ_RETURN_IF_ERROR(txn.Claim(f, got));
      std::vector<int64_t> ids;
      for (const wizq::Task& t : *got) ids.push_back(t.id);
      return ids.empty() ? Status::OK() : txn.MarkStarted(ids);
    });
  }

  ScratchDir dir_;
};

inline HostId Host(const std::string& boot) {
  HostId h;
  h.boot_id = boot;
  h.pid_ns = 4026531836;
  h.workspace_dev = 2049;
  h.workspace_ino = 7;
  return h;
}

// Counts the events of `kind` ("task_claimed") among `events`.
inline int CountKind(const std::vector<EventRecord>& events,
                     const std::string& kind) {
  int n = 0;
  for (const EventRecord& e : events) {
    n += e.line.find("\"event\":\"" + kind + "\"") != std::string::npos;
  }
  return n;
}

// Whether worker `id` shows alive in `s`, waiting up to `wait_ms` for it.
inline bool AliveWithin(Store* s, const std::string& id, int wait_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  do {
    std::vector<WorkerInfo> workers;
    if (s->Workers(&workers).ok()) {
      for (const WorkerInfo& w : workers) {
        if (w.id == id && w.alive) return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

}  // namespace wizq::test

#endif  // WIZQ_TESTS_PG_PG_STORE_FIXTURE_H_
