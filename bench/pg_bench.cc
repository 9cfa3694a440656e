// pg_bench: the per-task cost of claim + complete on the PostgreSQL store
// (issue 23, docs/BENCHMARKS.md "PostgreSQL store"), against a baseline run
// in the same invocation on the same throwaway cluster (fsync=on,
// synchronous_commit=on, printed):
//
//   baseline  a bare SKIP LOCKED queue through libpq with prepared
//             statements: one table (id, state), a partial index on the
//             pending ones; each transaction marks the previous batch done
//             and claims the next (UPDATE ... WHERE id IN (SELECT ... FOR
//             UPDATE SKIP LOCKED LIMIT b) RETURNING id). No events, no
//             dedup, no leases.
//   wizq-pg   the same loop through the store contract (Store::Transact:
//             Complete of the previous batch, Claim of the next): events
//             with a gap-free seq, dedup keys, leases, counters, fences.
//   wizq-dir  the same loop on the directory store (its own directory).
//
// W worker processes (one per worker, forked, each with its own sessions)
// drain N no-op tasks; the figure is wall time / N, from when every worker
// is connected (a pipe barrier) to when the last one exits. Then 16 runs
// at once (one worker each, N/16 tasks each) against one run of 16 workers:
// runs must not contend.
//
//   pg_bench [--tasks N] [--workers 1,4,16] [--batch B] [--rounds R]
//            [--profile] [--no-extras] [--no-analyze]
//
// Each worker count runs R rounds (default 3) of baseline, wizq-pg and
// wizq-dir in turn; the figures are the medians, the ratio is of the
// medians, and the range is of the rounds' own ratios (the machines are
// shared and noisy: one invocation's baseline moved 66-147 us a task).
//
// Each run's tasks are analyzed once submitted (the baseline's table
// too), as autovacuum leaves a store's tables within about a minute;
// --no-analyze leaves them as a new schema's are at first (PostgreSQL then
// plans from the table's size alone, and the claim keeps its generic
// plan: docs/BENCHMARKS.md, "PostgreSQL store").
//
// --no-extras: only the rounds (not the unbatched 16 workers, not the 16
// runs at once), e.g. to profile one worker count alone.
//
// --profile: after each wizq-pg figure, the statements of that run by
// server time (pg_stat_statements, reset before the run), to see where a
// transaction's time goes; the figures themselves are then not comparable
// (the extension costs a little on every statement).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/machine.h"
#include "queue/pg/pg_conn.h"
#include "queue/pg/pg_result.h"
#include "queue/pg/pg_work.h"  // PgIntArray
#include "queue/store.h"
#include "tests/pg/pg_cluster.h"

namespace wizq::bench {
namespace {

using Clock = std::chrono::steady_clock;
using test::PgCluster;
using test::PgClusterOptions;

[[noreturn]] void Die(const std::string& what, const Status& s) {
  std::fprintf(stderr, "pg_bench: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  std::exit(1);
}
void Check(const std::string& what, const Status& s) {
  if (!s.ok()) Die(what, s);
}

// Runs body(k) in `n` forked processes; every one is ready (connected)
// before the clock starts. Returns the seconds from the start to the last
// exit. A child's body returns its exit status.
double Timed(int n, const std::function<std::function<int()>(int)>& prepare) {
  int ready[2], go[2];
  if (pipe(ready) != 0 || pipe(go) != 0) Die("pipe", Status::IOError("pipe"));
  std::vector<pid_t> kids;
  for (int k = 0; k < n; k++) {
    const pid_t pid = fork();
    if (pid == 0) {
      std::function<int()> body = prepare(k);  // connects
      char c = 0;
      if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(3);
      _exit(body());
    }
    kids.push_back(pid);
  }
  char c;
  for (int k = 0; k < n; k++) {
    if (read(ready[0], &c, 1) != 1) Die("a worker", Status::IOError("died"));
  }
  const Clock::time_point t0 = Clock::now();
  const std::string all(static_cast<size_t>(n), 'g');
  if (write(go[1], all.data(), all.size()) != n) Die("go", Status::IOError(""));
  bool ok = true;
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int fd : {ready[0], ready[1], go[0], go[1]}) close(fd);
  if (!ok) Die("a worker failed", Status::IOError("see above"));
  return s;
}

// --- baseline -------------------------------------------------------------

double Baseline(const PgCluster& db, int workers, int64_t tasks, int batch) {
  std::unique_ptr<PgConn> admin;
  Check("connect", db.Connect(&admin));
  Check("baseline schema",
        admin->ExecScript(
            "DROP SCHEMA IF EXISTS bare CASCADE; CREATE SCHEMA bare; "
            "CREATE TABLE bare.q (id bigint PRIMARY KEY, state smallint NOT "
            "NULL DEFAULT 0); CREATE INDEX q_ready ON bare.q (id) WHERE "
            "state = 0;"));
  Check("baseline rows",
        admin->Exec("INSERT INTO bare.q (id) SELECT generate_series(1, $1)",
                    {tasks}));
  Check("analyze", admin->Exec("ANALYZE bare.q"));
  admin.reset();
  return Timed(workers, [&](int) -> std::function<int()> {
    auto c = std::make_shared<std::unique_ptr<PgConn>>();
    Check("connect", PgConn::Open(db.Location(), PgConnOptions(), c.get()));
    PgConn* conn = c->get();
    Check("prepare", conn->Prepare("done",
                                   "UPDATE bare.q SET state = 2 "
                                   "WHERE id = ANY($1::bigint[])"));
    Check("prepare",
          conn->Prepare("claim",
                        "UPDATE bare.q SET state = 1 WHERE id IN (SELECT id "
                        "FROM bare.q WHERE state = 0 ORDER BY id LIMIT $1 "
                        "FOR UPDATE SKIP LOCKED) RETURNING id"));
    return [c, conn, batch] {
      std::vector<int64_t> held;
      while (true) {
        Check("begin", conn->Begin());
        if (!held.empty()) {
          Check("done", conn->ExecPrepared("done", {PgIntArray(held)}));
        }
        PgResult r;
        Check("claim", conn->ExecPrepared("claim", {int64_t{batch}}, &r));
        Check("commit", conn->Commit());
        held.clear();
        for (int i = 0; i < r.rows(); i++) held.push_back(r.GetInt(i, "id"));
        if (held.empty()) return 0;
      }
    };
  });
}

// --- wizq, through the store contract -----------------------------------

StoreOptions RunOptions(const std::string& location, const std::string& dir,
                        const std::string& run_id) {
  StoreOptions o;
  o.location = location;
  o.schema = "bench";
  o.install_dir = dir;
  o.run_id = run_id;
  o.workflow_json = R"({"entrypoint":"Work","steps":[]})";
  return o;
}

bool g_analyze = true;  // --no-analyze clears it

void Seed(const StoreOptions& o, int64_t tasks) {
  std::unique_ptr<Store> store;
  Check("open", Store::Open(o, &store, nullptr));
  for (int64_t done = 0; done < tasks;) {
    Check("submit", store->Transact([&](StoreTxn& txn) {
      for (int i = 0; i < 1000 && done < tasks; i++, done++) {
        NewTask t;
        t.type = "Work";
        t.inputs = "{\"i\":" + std::to_string(done) + "}";
        t.origin = Origin::kInitial;
        int64_t id = 0;
        bool dup = false;
        WIZQ_RETURN_IF_ERROR(txn.Submit(t, &id, &dup));
      }
      return Status::OK();
    }));
  }
  Check("close", store->Close());
  // As the baseline's table is, and as autovacuum leaves a store's tables
  // within about a minute: the plans are then made with statistics.
  if (g_analyze && !o.location.empty()) {
    std::unique_ptr<PgConn> c;
    Check("connect", PgConn::Open(o.location, PgConnOptions(), &c));
    Check("analyze", c->Exec("ANALYZE " + o.schema + ".tasks"));
  }
}

std::function<int()> Worker(const StoreOptions& o, int batch) {
  auto store = std::make_shared<std::unique_ptr<Store>>();
  Check("join", Store::Open(o, store.get(), nullptr));
  return [store, batch] {
    std::vector<Task> held;
    while (true) {
      std::vector<Task> next;
      Check("transact", (*store)->Transact([&](StoreTxn& txn) {
        next.clear();
        for (const Task& t : held) {
          WIZQ_RETURN_IF_ERROR(txn.Complete(t.id, Completion(), nullptr));
        }
        ClaimFilter f;
        f.steps = {"Work"};
        f.max = batch;
        return txn.Claim(f, &next);
      }));
      held.swap(next);
      if (held.empty()) break;
    }
    Check("close", (*store)->Close());
    return 0;
  };
}

// `runs` runs of tasks/runs tasks each, `workers` workers on each.
double Wizq(const std::string& location, const std::string& tag, int runs,
            int workers, int64_t tasks, int batch) {
  char tmpl[] = "/tmp/wizq-pgbench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("mkdtemp", Status::IOError(tmpl));
  std::vector<StoreOptions> opts;
  for (int k = 0; k < runs; k++) {
    const std::string dir = std::string(tmpl) + "/" + std::to_string(k);
    std::system(("mkdir -p " + dir).c_str());
    opts.push_back(RunOptions(location, dir, tag + "-" + std::to_string(k)));
    Seed(opts.back(), tasks / runs);
  }
  const double s = Timed(runs * workers, [&](int k) {
    return Worker(opts[static_cast<size_t>(k / workers)], batch);
  });
  std::system((std::string("rm -rf ") + tmpl).c_str());
  return s;
}

// The statements since the last reset, by server time: calls, total ms,
// mean us, and the sum over all (to set against the wall time).
void PrintProfile(const PgCluster& db, double wall_s) {
  std::unique_ptr<PgConn> c;
  Check("connect", db.Connect(&c));
  PgResult r;
  Check("pg_stat_statements",
        c->Exec("SELECT calls, plans, total_exec_time AS ms, "
                "total_plan_time AS pms, regexp_replace(query, '\\s+', ' ', "
                "'g') AS q "
                "FROM pg_stat_statements WHERE query NOT LIKE "
                "'%pg_stat_statements%' ORDER BY total_exec_time DESC",
                {}, &r));
  double sum = 0, plan = 0;
  for (int i = 0; i < r.rows(); i++) {
    sum += std::stod(std::string(r.Get(i, "ms")));
    plan += std::stod(std::string(r.Get(i, "pms")));
  }
  std::printf(
      "  server time %.0f ms executing, %.0f ms planning, of %.0f ms wall; "
      "top statements (calls, plans, ms executing, us a call, us planning "
      "a call):\n",
      sum, plan, wall_s * 1e3);
  for (int i = 0; i < r.rows() && i < 14; i++) {
    const double ms = std::stod(std::string(r.Get(i, "ms")));
    const int64_t calls = r.GetInt(i, "calls"), plans = r.GetInt(i, "plans");
    const double pms = std::stod(std::string(r.Get(i, "pms")));
    // Its start and its end: two statements often differ only in one.
    std::string q(r.Get(i, "q"));
    if (q.size() > 120) q = q.substr(0, 55) + " ... " + q.substr(q.size() - 60);
    std::printf("  %7lld %7lld %7.0f %7.1f %7.1f  %s\n",
                static_cast<long long>(calls), static_cast<long long>(plans),
                ms, ms * 1e3 / static_cast<double>(calls),
                pms * 1e3 / static_cast<double>(calls), q.c_str());
  }
}

void ResetProfile(const PgCluster& db) {
  std::unique_ptr<PgConn> c;
  Check("connect", db.Connect(&c));
  Check("reset", c->Exec("SELECT pg_stat_statements_reset()"));
}

std::vector<int> IntList(const char* text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string x; std::getline(in, x, ',');) out.push_back(std::stoi(x));
  return out;
}

void Extras(const PgCluster& db, int64_t tasks, int batch);

int Main(int argc, char** argv) {
  int64_t tasks = 4000;
  int batch = 8;
  int rounds = 3;
  std::vector<int> workers = {1, 4, 16};
  bool profile = false, extras = true;
  for (int i = 1; i < argc; i++) {
    const bool value = i + 1 < argc;
    if (!strcmp(argv[i], "--profile")) {
      profile = true;
    } else if (!strcmp(argv[i], "--no-extras")) {
      extras = false;
    } else if (!strcmp(argv[i], "--no-analyze")) {
      g_analyze = false;
    } else if (value && !strcmp(argv[i], "--tasks")) {
      tasks = std::atoll(argv[++i]);
    } else if (value && !strcmp(argv[i], "--rounds")) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (value && !strcmp(argv[i], "--batch")) {
      batch = std::atoi(argv[++i]);
    } else if (value && !strcmp(argv[i], "--workers")) {
      workers = IntList(argv[++i]);
    } else {
      std::fprintf(stderr, "pg_bench: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  std::printf("%s\n", MachineLine("/tmp").c_str());
  PgClusterOptions co;
  co.fsync = true;
  co.settings = {"synchronous_commit = on", "max_connections = 200"};
  if (profile) {
    co.settings.push_back("shared_preload_libraries = 'pg_stat_statements'");
    co.settings.push_back("pg_stat_statements.track = all");
    co.settings.push_back("pg_stat_statements.track_planning = on");
  }
  PgCluster db(co);
  Check("start PostgreSQL", db.Start());
  {
    std::unique_ptr<PgConn> c;
    Check("connect", db.Connect(&c));
    if (profile) {
      Check("extension",
            c->Exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"));
    }
    PgResult r;
    Check("settings", c->Exec("SELECT current_setting('fsync') AS f, "
                              "current_setting('synchronous_commit') AS s",
                              {}, &r));
    std::printf(
        "PostgreSQL 15: fsync=%s synchronous_commit=%s; %lld no-op "
        "tasks, batch %d; tasks %s\n",
        std::string(r.Get(0, "f")).c_str(), std::string(r.Get(0, "s")).c_str(),
        static_cast<long long>(tasks), batch,
        g_analyze ? "analyzed once submitted" : "not analyzed");
  }
  std::printf("%8s %14s %14s %8s %14s %8s %15s\n", "workers", "baseline us",
              "wizq-pg us", "ratio", "wizq-dir us", "ratio", "pg ratio range");
  const double us = 1e6 / static_cast<double>(tasks);
  for (int w : workers) {
    // Rounds alternate the three, so that a slow spell of the machine
    // falls on all of them; the medians and the ratio of the medians.
    std::vector<double> base, pg, dir, ratio;
    for (int k = 0; k < rounds; k++) {
      base.push_back(Baseline(db, w, tasks, batch) * us);
      if (profile) ResetProfile(db);
      const std::string tag = "w" + std::to_string(w) + "r" + std::to_string(k);
      pg.push_back(Wizq(db.Location(), tag, 1, w, tasks, batch) * us);
      if (profile)
        PrintProfile(db, pg.back() * static_cast<double>(tasks) / 1e6);
      dir.push_back(Wizq("", "d", 1, w, tasks, batch) * us);
      ratio.push_back(pg.back() / base.back());
    }
    const double b = Median(base), p = Median(pg), d = Median(dir);
    std::printf("%8d %14.1f %14.1f %8.2f %14.1f %8.2f %7.2f-%-7.2f\n", w, b, p,
                p / b, d, d / b, *std::min_element(ratio.begin(), ratio.end()),
                *std::max_element(ratio.begin(), ratio.end()));
    std::fflush(stdout);
  }
  if (extras) Extras(db, tasks, batch);
  std::printf("%s\n", MachineLine("/tmp").c_str());
  return 0;
}

// One run of 16 workers unbatched; 16 runs at once against one run.
void Extras(const PgCluster& db, int64_t tasks, int batch) {
  const double us = 1e6 / static_cast<double>(tasks);
  const double one = Wizq(db.Location(), "one", 1, 16, tasks, 1) * us;
  const double base1 = Baseline(db, 16, tasks, 1) * us;
  std::printf(
      "unbatched, 16 workers: baseline %.1f us, wizq-pg %.1f us "
      "(ratio %.2f); one run's ceiling %.0f tasks/s\n",
      base1, one, one / base1, 1e6 / one);
  const double many = Wizq(db.Location(), "many", 16, 1, tasks, batch) * us;
  const double single = Wizq(db.Location(), "single", 1, 16, tasks, batch) * us;
  std::printf(
      "16 runs at once (1 worker each): %.1f us/task; one run of 16 "
      "workers: %.1f us/task (ratio %.2f)\n",
      many, single, many / single);
}

}  // namespace
}  // namespace wizq::bench

int main(int argc, char** argv) { return wizq::bench::Main(argc, argv); }
