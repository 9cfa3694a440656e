// queue_bench: the cost of the queue store's durable transitions
// (`make bench`; docs/BENCHMARKS.md explains the figures).
//
//   queue_bench [--dir DIR] [--slice TASKS] [--no-sqlite-100k] [--open-only]
//
// 1. Drain: a queue of N pending tasks (seeded untimed, then checkpointed)
//    is drained by one worker in one process. Each task is claimed durably
//    before it would run and completed durably after; a task's completion
//    and the next claim share one Transact (one commit, one fdatasync), so
//    a drain of N tasks is N + 1 commits. Reported per task (= one
//    claim+complete pair) for N = 1k, 10k, 100k.
// 2. The same protocol on SQLite (WAL, synchronous=FULL, one transaction
//    per commit: UPDATE complete + SELECT next + UPDATE claim).
// 3. Open (recovery) of a 100k-task run whose snapshot lags the log by 10k
//    events, as a fresh process would (median of 5).
//
// Storage latency on shared machines drifts by 2x within seconds, so the
// drains are interleaved: every configuration (store x N) is drained in
// slices of --slice tasks, round-robin, and a configuration whose queue is
// empty gets a fresh one (seeded untimed) until the 100k queues are empty.
// So the 1k queue is drained ~100 times and the 100k one once, in the same
// minute, under the same conditions.
//
// Checkpoints: a drain starts right after a checkpoint and is shorter than
// the checkpoint interval (queue/dir/queue_run.cc writes one when the log has
// grown by max(snapshot size, checkpoint_min_bytes)), so the snapshot
// rewrites a long-running queue pays are measured apart (Checkpoint() timed
// at each N) and added back amortised over that interval.
//
// The MACHINE line (bench/machine.h: fdatasync latency, load, cores) is
// printed after the title and again after the measurements. The last line
// is `RESULT per_transition_100k_over_1k=.. vs_sqlite=.. open_100k_ms=..`
// (none with --open-only or --claim-only).
#include "bench/queue_bench.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/machine.h"
#include "fs/env.h"
#include "queue/dir/queue.h"

namespace wizq {
namespace bench {
namespace {

// --- the stores
// ----------------------------------------------------------------

// One queue being drained. Start() makes a fresh store holding n pending
// tasks (untimed); each Commit() is one durable commit: complete the task
// held (if any) and claim the next (if any). The drain is over when a
// commit leaves nothing held.
class Drainer {
 public:
  virtual ~Drainer() = default;
  virtual void Start(int64_t n) = 0;
  // Returns true if it completed a task.
  virtual bool Commit() = 0;
  virtual bool held() const = 0;
  virtual void Finish() = 0;  // untimed teardown
};

class WizqDrainer : public Drainer {
 public:
  explicit WizqDrainer(const BenchOptions& opt) : opt_(opt) {}

  void Start(int64_t n) override {
    dir_ = std::make_unique<TempDir>(opt_.base_dir, "wizq");
    options_ = WizqOptions(dir_->path());
    OpenReport report;
    Check("open", Queue::Open(options_, &q_, &report));
    SeedWizq(q_.get(), n);
    Check("checkpoint", q_->Checkpoint());
    log_path_ = q_->wizard_dir() + "/audit.jsonl";
    log_start_ = LogicalLogSize(log_path_);
    tasks_ = n;
    held_ = 0;
  }

  bool Commit() override {
    int64_t next = 0;
    const int64_t done = held_;
    Check("drain", q_->Transact([&](Txn& txn) {
      if (done != 0) {
        WIZQ_RETURN_IF_ERROR(txn.Complete(done, no_children_, nullptr));
      }
      return txn.ClaimNextOfSteps(nullptr, nullptr, &next);
    }));
    held_ = next;
    return done != 0;
  }

  bool held() const override { return held_ != 0; }

  void Finish() override {
    if (q_->state().count(TaskState::kDone) != tasks_)
      Die("wizq drain lost tasks");
    log_bytes_per_task_ =
        static_cast<double>(LogicalLogSize(log_path_) - log_start_) / tasks_;
    // A checkpoint at this size (all done; as large as with all pending).
    const double t0 = NowUs();
    Check("checkpoint", q_->Checkpoint());
    checkpoint_ms_ = (NowUs() - t0) / 1000;
    snapshot_bytes_ = FileSize(q_->wizard_dir() + "/queue.json");
    Check("close", q_->Close());
    q_.reset();
    Graveyard().push_back(std::move(dir_));
  }

  // The checkpoint cost per task, amortised: one checkpoint each time the
  // log grows by max(snapshot size, checkpoint_min_bytes).
  double AmortisedCheckpointUs() const {
    if (log_bytes_per_task_ <= 0) return 0;
    const double interval =
        std::max<double>(static_cast<double>(snapshot_bytes_),
                         static_cast<double>(options_.checkpoint_min_bytes));
    return checkpoint_ms_ * 1000 / (interval / log_bytes_per_task_);
  }
  double checkpoint_ms() const { return checkpoint_ms_; }
  uint64_t snapshot_bytes() const { return snapshot_bytes_; }
  double log_bytes_per_task() const { return log_bytes_per_task_; }

 private:
  const BenchOptions& opt_;
  std::unique_ptr<TempDir> dir_;
  QueueOptions options_;
  std::unique_ptr<Queue> q_;
  const std::vector<NewTask> no_children_;
  std::string log_path_;
  uint64_t log_start_ = 0;
  int64_t tasks_ = 0;
  int64_t held_ = 0;
  double log_bytes_per_task_ = 0, checkpoint_ms_ = 0;
  uint64_t snapshot_bytes_ = 0;
};

void SqlCheck(sqlite3* db, int rc, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    Die(std::string("sqlite ") + what + ": " + sqlite3_errmsg(db));
  }
}

void Exec(sqlite3* db, const char* sql) {
  SqlCheck(db, sqlite3_exec(db, sql, nullptr, nullptr, nullptr), sql);
}

sqlite3_stmt* Prepare(sqlite3* db, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  SqlCheck(db, sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr), sql);
  return stmt;
}

void Step(sqlite3* db, sqlite3_stmt* stmt, const char* what) {
  SqlCheck(db, sqlite3_step(stmt), what);
  sqlite3_reset(stmt);
}

// The same protocol on SQLite: WAL, synchronous=FULL, one transaction per
// commit. `with_events` also INSERTs one audit row per transition, as wizq
// appends one audit line per transition (informational, not in RESULT).
class SqliteDrainer : public Drainer {
 public:
  SqliteDrainer(const BenchOptions& opt, bool with_events)
      : opt_(opt), with_events_(with_events) {}
  ~SqliteDrainer() override {
    if (db_) Finish();
  }

  void Start(int64_t n) override {
    dir_ = std::make_unique<TempDir>(opt_.base_dir, "sqlite");
    const std::string path = dir_->path() + "/queue.db";
    SqlCheck(
        db_,
        sqlite3_open_v2(path.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr),
        "open");
    Exec(db_, "PRAGMA journal_mode=WAL");
    Exec(db_, "PRAGMA synchronous=FULL");
    Exec(db_,
         "CREATE TABLE tasks(id INTEGER PRIMARY KEY, type TEXT NOT NULL, "
         "inputs TEXT NOT NULL, state TEXT NOT NULL, attempts INT NOT NULL, "
         "max_attempts INT NOT NULL, parent_id INT, origin TEXT NOT NULL, "
         "claimed_by TEXT, created_ms INT NOT NULL, updated_ms INT NOT NULL)");
    Exec(db_, "CREATE INDEX tasks_state ON tasks(state, id)");
    Exec(db_,
         "CREATE TABLE events(seq INTEGER PRIMARY KEY, ts INT NOT NULL, "
         "event TEXT NOT NULL, task_id INT, worker TEXT)");
    Exec(db_, "BEGIN");
    sqlite3_stmt* insert = Prepare(
        db_,
        "INSERT INTO tasks(id, type, inputs, state, attempts, max_attempts, "
        "parent_id, origin, claimed_by, created_ms, updated_ms) VALUES(?1, "
        "'Work', ?2, 'pending', 0, 3, NULL, 'Initial', NULL, ?3, ?3)");
    for (int64_t k = 1; k <= n; k++) {
      const std::string inputs = TaskInputs(k);
      sqlite3_bind_int64(insert, 1, k);
      sqlite3_bind_text(insert, 2, inputs.data(),
                        static_cast<int>(inputs.size()), SQLITE_TRANSIENT);
      sqlite3_bind_int64(insert, 3, WallMs());
      Step(db_, insert, "insert");
    }
    sqlite3_finalize(insert);
    Exec(db_, "COMMIT");
    Exec(db_, "PRAGMA wal_checkpoint(TRUNCATE)");
    begin_ = Prepare(db_, "BEGIN IMMEDIATE");
    commit_ = Prepare(db_, "COMMIT");
    complete_ =
        Prepare(db_,
                "UPDATE tasks SET state='done', updated_ms=?2 "
                "WHERE id=?1 AND state='in_progress' AND claimed_by=?3");
    next_ = Prepare(
        db_, "SELECT id FROM tasks WHERE state='pending' ORDER BY id LIMIT 1");
    claim_ = Prepare(db_,
                     "UPDATE tasks SET state='in_progress', "
                     "attempts=attempts+1, claimed_by=?3, updated_ms=?2 "
                     "WHERE id=?1 AND state='pending'");
    event_ = Prepare(db_,
                     "INSERT INTO events(ts, event, task_id, worker) "
                     "VALUES(?1, ?2, ?3, ?4)");
    tasks_ = n;
    completed_ = 0;
    held_ = 0;
  }

  bool Commit() override {
    const int64_t now = WallMs();
    const int64_t done = held_;
    Step(db_, begin_, "begin");
    if (done != 0) {
      sqlite3_bind_int64(complete_, 1, done);
      sqlite3_bind_int64(complete_, 2, now);
      sqlite3_bind_text(complete_, 3, kWorker, -1, SQLITE_STATIC);
      Step(db_, complete_, "complete");
      if (sqlite3_changes(db_) != 1) Die("sqlite completion lost");
      LogEvent("task_completed", done, now);
      completed_++;
    }
    int64_t id = 0;
    if (sqlite3_step(next_) == SQLITE_ROW) id = sqlite3_column_int64(next_, 0);
    sqlite3_reset(next_);
    if (id != 0) {
      sqlite3_bind_int64(claim_, 1, id);
      sqlite3_bind_int64(claim_, 2, now);
      sqlite3_bind_text(claim_, 3, kWorker, -1, SQLITE_STATIC);
      Step(db_, claim_, "claim");
      LogEvent("task_claimed", id, now);
    }
    Step(db_, commit_, "commit");
    held_ = id;
    return done != 0;
  }

  bool held() const override { return held_ != 0; }

  void Finish() override {
    if (completed_ != tasks_) Die("sqlite drain lost tasks");
    for (sqlite3_stmt* s :
         {begin_, commit_, complete_, next_, claim_, event_}) {
      sqlite3_finalize(s);
    }
    sqlite3_close(db_);
    db_ = nullptr;
    Graveyard().push_back(std::move(dir_));
  }

 private:
  static constexpr const char* kWorker = "w1-bench";

  void LogEvent(const char* name, int64_t id, int64_t now) {
    if (!with_events_) return;
    sqlite3_bind_int64(event_, 1, now);
    sqlite3_bind_text(event_, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(event_, 3, id);
    sqlite3_bind_text(event_, 4, kWorker, -1, SQLITE_STATIC);
    Step(db_, event_, "event");
  }

  const BenchOptions& opt_;
  const bool with_events_;
  std::unique_ptr<TempDir> dir_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt *begin_ = nullptr, *commit_ = nullptr, *complete_ = nullptr,
               *next_ = nullptr, *claim_ = nullptr, *event_ = nullptr;
  int64_t tasks_ = 0, completed_ = 0, held_ = 0;
};

// --- interleaved drains ------------------------------------------------------

// One configuration (store x N) and what its drains cost.
struct Series {
  std::string store;
  int64_t n = 0;
  std::unique_ptr<Drainer> drainer;
  bool active = false;  // a queue is being drained
  int drains = 0;       // queues drained to the end
  int64_t tasks = 0;    // tasks completed in finished drains
  double wall_us = 0, cpu_us = 0;
  std::vector<double> commit_us;
  uint64_t disk_writes = 0, disk_flushes = 0;  // during the timed commits

  double us_per_task() const { return wall_us / tasks; }
  double cpu_per_task() const { return cpu_us / tasks; }
};

// Drains up to `slice` tasks of the series' queue (a fresh one if none).
void RunSlice(Series* s, int64_t slice, const std::string& dir) {
  if (!s->active) {
    s->drainer->Start(s->n);
    s->active = true;
    ::sync();  // settle the seeding's writes before the timed commits
  }
  double wall = 0;
  int64_t completed = 0;
  bool over = false;
  const DiskCounters disk0 = ReadDiskCounters(dir);
  const double cpu0 = CpuUs();
  while (completed < slice) {
    const double t0 = NowUs();
    completed += s->drainer->Commit();
    const double dt = NowUs() - t0;
    wall += dt;
    s->commit_us.push_back(dt);
    if (!s->drainer->held()) {
      over = true;
      break;
    }
  }
  s->cpu_us += CpuUs() - cpu0;
  const DiskCounters disk1 = ReadDiskCounters(dir);
  s->disk_writes += disk1.writes - disk0.writes;
  s->disk_flushes += disk1.flushes - disk0.flushes;
  s->wall_us += wall;
  s->tasks += completed;
  if (over) {
    s->drainer->Finish();
    s->active = false;
    s->drains++;
  }
}

void PrintSeries(Series* s) {
  const double p50 = Percentile(&s->commit_us, 0.5);
  const double p99 = Percentile(&s->commit_us, 0.99);
  const double max = Percentile(&s->commit_us, 1.0);
  std::printf(
      "  %-13s N=%-7lld %3d drains %6.1f us/task (cpu %4.1f) %6.0f tasks/s  "
      "commit p50 %5.1f p99 %6.1f max %7.1f us  device writes %.2f "
      "flushes %.2f /commit\n",
      s->store.c_str(), static_cast<long long>(s->n), s->drains,
      s->us_per_task(), s->cpu_per_task(), 1e6 / s->us_per_task(), p50, p99,
      max, static_cast<double>(s->disk_writes) / s->commit_us.size(),
      static_cast<double>(s->disk_flushes) / s->commit_us.size());
}

// --- main -------------------------------------------------------------------

int Main(int argc, char** argv) {
  BenchOptions opt;
  const char* tmp = getenv("TMPDIR");
  opt.base_dir = tmp && *tmp ? tmp : "/tmp";
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) {
      opt.base_dir = argv[++i];
    } else if (a == "--slice" && i + 1 < argc) {
      opt.slice = std::max(1, atoi(argv[++i]));
    } else if (a == "--no-sqlite-100k") {
      opt.sqlite_100k = false;
    } else if (a == "--open-once" && i + 1 < argc) {
      return OpenOnce(argv[++i]);
    } else if (a == "--open-only") {
      opt.open_only = true;
    } else if (a == "--claim-only") {
      opt.claim_only = true;
    } else {
      std::fprintf(stderr,
                   "usage: queue_bench [--dir DIR] [--slice TASKS] "
                   "[--no-sqlite-100k] [--open-only] [--claim-only]\n");
      return 2;
    }
  }
  std::printf("queue_bench: dir %s, %ld CPUs, SQLite %s\n",
              opt.base_dir.c_str(), sysconf(_SC_NPROCESSORS_ONLN),
              sqlite3_libversion());
  std::printf("%s\n", MachineLine(opt.base_dir).c_str());
  const double fsync_before = MeasureFdatasyncUs(opt.base_dir);
  std::printf("  append(300 B) + fdatasync: %.1f us\n", fsync_before);
  std::printf(
      "  first touch of fresh memory, per 4 KiB: %.2f us in 4 KiB pages, "
      "%.2f us in 2 MiB pages\n",
      MeasureFirstTouchUs(false), MeasureFirstTouchUs(true));
  std::printf("  cpu probe (1e8 xorshift steps): %.1f ms\n", MeasureCpuMs());
  std::fflush(stdout);
  if (opt.open_only) {
    BenchAndPrintOpen(opt);
    std::printf("%s\n", MachineLine(opt.base_dir).c_str());
    return 0;
  }
  if (opt.claim_only) {
    BenchAndPrintClaim(opt);
    std::printf("%s\n", MachineLine(opt.base_dir).c_str());
    return 0;
  }

  std::vector<Series> series;
  std::vector<WizqDrainer*> wizq;  // by size: 1k, 10k, 100k
  for (int64_t n : {1000, 10000, 100000}) {
    Series w;
    w.store = "wizq";
    w.n = n;
    auto d = std::make_unique<WizqDrainer>(opt);
    wizq.push_back(d.get());
    w.drainer = std::move(d);
    series.push_back(std::move(w));
  }
  for (int64_t n : {1000, 10000, 100000}) {
    if (n == 100000 && !opt.sqlite_100k) continue;
    Series s;
    s.store = "sqlite";
    s.n = n;
    s.drainer = std::make_unique<SqliteDrainer>(opt, false);
    series.push_back(std::move(s));
  }
  {
    Series s;
    s.store = "sqlite+events";
    s.n = 10000;
    s.drainer = std::make_unique<SqliteDrainer>(opt, true);
    series.push_back(std::move(s));
  }
  std::printf(
      "\ndrain, one worker, one commit per task (complete + next "
      "claim), interleaved in slices of %lld tasks:\n",
      static_cast<long long>(opt.slice));
  std::fflush(stdout);
  // Until every 100k queue has been drained once (and each smaller
  // configuration at least once).
  auto finished = [&] {
    for (const Series& s : series) {
      if (s.drains == 0 || (s.n == 100000 && s.active)) return false;
    }
    return true;
  };
  while (!finished()) {
    for (Series& s : series) {
      if (s.n == 100000 && s.drains > 0) continue;
      RunSlice(&s, opt.slice, opt.base_dir);
    }
  }
  for (Series& s : series) {
    if (s.active) {  // a partial drain: finish it untimed, do not count it
      while (s.drainer->held()) s.drainer->Commit();
      s.drainer->Finish();
    }
  }
  Graveyard().clear();
  for (Series& s : series) PrintSeries(&s);
  const double fsync_after = MeasureFdatasyncUs(opt.base_dir);
  std::printf("  append(300 B) + fdatasync after: %.1f us\n", fsync_after);

  std::printf(
      "\nwizq checkpoints (snapshot rewrite, amortised over the log "
      "growth between two):\n");
  std::vector<double> wizq_total;
  for (size_t i = 0; i < wizq.size(); i++) {
    const WizqDrainer* d = wizq[i];
    wizq_total.push_back(series[i].us_per_task() + d->AmortisedCheckpointUs());
    std::printf(
        "  N=%-7lld snapshot %5.1f MB in %6.1f ms; log %3.0f B/task -> "
        "%4.2f us/task; total %5.1f us/task\n",
        static_cast<long long>(series[i].n), d->snapshot_bytes() / 1e6,
        d->checkpoint_ms(), d->log_bytes_per_task(), d->AmortisedCheckpointUs(),
        wizq_total.back());
  }
  std::fflush(stdout);

  const double open_ms = BenchAndPrintOpen(opt);
  BenchAndPrintClaim(opt);

  const Series* sqlite_10k = nullptr;
  for (const Series& s : series) {
    if (s.store == "sqlite" && s.n == 10000) sqlite_10k = &s;
  }
  const double ratio = wizq_total[2] / wizq_total[0];
  const double vs_sqlite = sqlite_10k->us_per_task() / wizq_total[1];
  std::printf(
      "\nwizq per task incl. checkpoints: 1k %.1f us, 100k %.1f us; "
      "at 10k wizq %.0f tasks/s, sqlite %.0f tasks/s\n",
      wizq_total[0], wizq_total[2], 1e6 / wizq_total[1],
      1e6 / sqlite_10k->us_per_task());
  std::printf("%s\n", MachineLine(opt.base_dir).c_str());
  std::printf(
      "RESULT per_transition_100k_over_1k=%.3f vs_sqlite=%.3f "
      "open_100k_ms=%.1f\n",
      ratio, vs_sqlite, open_ms);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace wizq

int main(int argc, char** argv) { return wizq::bench::Main(argc, argv); }
