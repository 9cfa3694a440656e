// queue_bench's recovery figure: opening a 100k-task run whose snapshot
// lags the log by 10k events, in fresh processes (bench/queue_bench.h).
#include <limits.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "audit/log.h"
#include "bench/queue_bench.h"
#include "fs/env.h"
#include "queue/dir/snapshot.h"
#include "queue/dir/state.h"

namespace wizq {
namespace bench {
namespace {

struct OpenResult {
  // Opens in fresh processes (what a user sees after a crash), in order.
  std::vector<double> fresh_ms;
  std::vector<int64_t> fresh_faults;  // page faults (minor) of each
  // Opens in this process, which has allocated and freed the memory before.
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int64_t tail_events = 0;
  uint64_t snapshot_bytes = 0, tail_bytes = 0;
  // Where the time goes (separately timed, same files).
  double read_ms = 0, decode_ms = 0, tail_ms = 0;
};

QueueOptions OpenBenchOptions(const std::string& dir) {
  QueueOptions options = WizqOptions(dir);
  options.checkpoint_min_bytes = uint64_t{1} << 62;  // no automatic snapshot
  return options;
}

int64_t MinorFaults() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

// Runs OpenOnce in a new process of this binary; returns its time.
double OpenInFreshProcess(const std::string& dir, int64_t* faults) {
  char self[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) Die("readlink /proc/self/exe");
  self[len] = '\0';
  const std::string cmd =
      std::string("'") + self + "' --open-once '" + dir + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) Die("popen " + cmd);
  double ms = -1;
  long long f = 0;
  const int got = std::fscanf(p, "%lf %lld", &ms, &f);
  if (pclose(p) != 0 || got != 2) Die("failed: " + cmd);
  *faults = f;
  return ms;
}

OpenResult BenchOpen(const BenchOptions& opt, int64_t n, int64_t pairs) {
  TempDir dir(opt.base_dir, "open");
  const QueueOptions options = OpenBenchOptions(dir.path());
  {
    std::unique_ptr<Queue> q;
    OpenReport report;
    Check("open", Queue::Open(options, &q, &report));
    SeedWizq(q.get(), n);
    Check("checkpoint", q->Checkpoint());
    int64_t held = 0;
    for (int64_t i = 0; i <= pairs; i++) {
      int64_t next = 0;
      Check("tail", q->Transact([&](Txn& txn) {
        if (held != 0) {
          WIZQ_RETURN_IF_ERROR(txn.Complete(held, {}, nullptr));
        }
        if (i < pairs)
          WIZQ_RETURN_IF_ERROR(txn.ClaimNextOfSteps(nullptr, nullptr, &next));
        return Status::OK();
      }));
      held = next;
    }
    // Destroyed without Close: no snapshot at rest, like a crash.
  }
  const std::string wizard = dir.path() + "/.wizard";
  OpenResult r;
  for (int i = 0; i < 5; i++) {
    int64_t faults = 0;
    r.fresh_ms.push_back(OpenInFreshProcess(dir.path(), &faults));
    r.fresh_faults.push_back(faults);
  }
  std::vector<double> ms;
  for (int i = 0; i < 5; i++) {
    std::unique_ptr<Queue> q;
    OpenReport report;
    const double t0 = NowUs();
    Check("reopen", Queue::Open(options, &q, &report));
    ms.push_back((NowUs() - t0) / 1000);
    if (report.action != OpenAction::kResumed || q->state().total() != n) {
      std::fprintf(stderr, "queue_bench: reopen did not resume the run\n");
      std::exit(1);
    }
    if (i == 0) {
      // Events after the snapshot, as this Open found them.
      std::string text;
      Check("read", Env::Posix()->ReadFile(wizard + "/queue.json", &text));
      SnapshotHeader header;
      QueueState state;
      Check("decode",
            DecodeSnapshot(wizard + "/queue.json", text, &header, &state));
      r.tail_events = q->state().last_seq() - header.seq - 2;  // - its own 2
    }
  }
  r.median_ms = Median(ms);
  r.min_ms = *std::min_element(ms.begin(), ms.end());
  r.max_ms = *std::max_element(ms.begin(), ms.end());

  // Breakdown: read the snapshot, decode it, parse + apply the log tail.
  std::string text, tail;
  double t0 = NowUs();
  Check("read", Env::Posix()->ReadFile(wizard + "/queue.json", &text));
  double t1 = NowUs();
  SnapshotHeader header;
  QueueState state;
  Check("decode",
        DecodeSnapshot(wizard + "/queue.json", text, &header, &state));
  double t2 = NowUs();
  Check("read tail", Env::Posix()->ReadFileFrom(wizard + "/audit.jsonl",
                                                header.audit_offset, &tail));
  LogParseResult parsed;
  Check("parse tail", ParseLog(wizard + "/audit.jsonl", tail,
                               header.audit_offset, header.seq + 1, &parsed));
  for (const LogRecord& rec : parsed.records) {
    Check("apply", state.ApplyEvent(rec.line));
  }
  double t3 = NowUs();
  r.read_ms = (t1 - t0) / 1000;
  r.decode_ms = (t2 - t1) / 1000;
  r.tail_ms = (t3 - t2) / 1000;
  r.snapshot_bytes = text.size();
  r.tail_bytes = tail.size();
  return r;
}

}  // namespace

// `queue_bench --open-once DIR`, run by BenchOpen in a fresh process:
// opens (resumes) the run in DIR once, prints "<ms> <page faults>" and
// exits without closing (the run stays as a crash left it).
int OpenOnce(const std::string& dir) {
  std::unique_ptr<Queue> q;
  OpenReport report;
  const int64_t faults = MinorFaults();
  const double t0 = NowUs();
  Check("reopen", Queue::Open(OpenBenchOptions(dir), &q, &report));
  const double ms = (NowUs() - t0) / 1000;
  if (report.action != OpenAction::kResumed) Die("did not resume " + dir);
  std::printf("%.3f %lld\n", ms,
              static_cast<long long>(MinorFaults() - faults));
  std::fflush(stdout);
  _exit(0);
}

double BenchAndPrintOpen(const BenchOptions& opt) {
  const OpenResult open = BenchOpen(opt, 100000, 5000);
  std::printf(
      "\nopen (recover) 100k tasks + %lld-event log tail, in a fresh "
      "process: median %.1f ms\n  each:",
      static_cast<long long>(open.tail_events), Median(open.fresh_ms));
  for (size_t i = 0; i < open.fresh_ms.size(); i++) {
    std::printf(" %.1f ms (%lld page faults)", open.fresh_ms[i],
                static_cast<long long>(open.fresh_faults[i]));
  }
  std::printf(
      "\n  again in one process: median %.1f ms (min %.1f, max %.1f, 5 "
      "opens)\n"
      "  breakdown: read snapshot (%.1f MB) %.1f ms, decode + index %.1f ms, "
      "read + parse + apply tail (%.1f MB) %.1f ms\n",
      open.median_ms, open.min_ms, open.max_ms, open.snapshot_bytes / 1e6,
      open.read_ms, open.decode_ms, open.tail_bytes / 1e6, open.tail_ms);
  return Median(open.fresh_ms);
}

}  // namespace bench
}  // namespace wizq
