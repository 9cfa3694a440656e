// Measurement helpers of queue_bench (bench/queue_bench.h).
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "audit/log.h"
#include "bench/queue_bench.h"

namespace wizq {
namespace bench {

double NowUs() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch())
      .count();
}

// CPU time (user + system) of this process so far.
double CpuUs() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
         ru.ru_stime.tv_usec;
}

double Percentile(std::vector<double>* v, double p) {
  if (v->empty()) return 0;
  std::sort(v->begin(), v->end());
  return (*v)[std::min(v->size() - 1, static_cast<size_t>(p * v->size()))];
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "queue_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(const std::string& what, const Status& s) {
  if (!s.ok()) Die(what + ": " + s.ToString());
}

TempDir::TempDir(const std::string& base, const std::string& tag) {
  std::string tmpl = base + "/wizq-bench-" + tag + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp " + tmpl);
  char real[PATH_MAX];
  path_ = realpath(tmpl.c_str(), real) ? real : tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::unique_ptr<TempDir>>& Graveyard() {
  static auto* dirs = new std::vector<std::unique_ptr<TempDir>>();
  return *dirs;
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// The size of an audit.jsonl without the free space (padding) after its
// last line (FORMAT.md, "Free space").
uint64_t LogicalLogSize(const std::string& path) {
  std::string data;
  Check("read log", Env::Posix()->ReadFile(path, &data));
  const size_t last = data.find_last_not_of(std::string_view("\n\0", 2));
  return last == std::string::npos ? 0 : last + 2;
}

// Write requests and flushes the block device holding `dir` has completed
// (/sys/dev/block/<major>:<minor>/stat, fields 5 and 16), to count the
// device I/Os of a commit. Zeros if the counters cannot be read.
DiskCounters ReadDiskCounters(const std::string& dir) {
  DiskCounters c;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return c;
  std::string text;
  const std::string path = "/sys/dev/block/" +
                           std::to_string(major(st.st_dev)) + ":" +
                           std::to_string(minor(st.st_dev)) + "/stat";
  if (!Env::Posix()->ReadFile(path, &text).ok()) return c;
  std::istringstream in(text);
  std::vector<uint64_t> f;
  for (uint64_t v; in >> v;) f.push_back(v);
  if (f.size() >= 5) c.writes = f[4];
  if (f.size() >= 16) c.flushes = f[15];
  return c;
}

int64_t WallMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
      .count();
}

// The inputs of task k: what a typical fan-out step receives.
std::string TaskInputs(int64_t k) {
  char buf[96];
  std::snprintf(buf, sizeof(buf),
                "{\"file\":\"src/module_%06lld/file.cc\",\"index\":%lld}",
                static_cast<long long>(k), static_cast<long long>(k));
  return buf;
}

// One 300-byte O_APPEND write plus fdatasync, as a commit does.
double MeasureFdatasyncUs(const std::string& base) {
  TempDir dir(base, "fsync");
  const std::string path = dir.path() + "/f";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) Die("open " + path);
  const std::string line(300, 'x');
  const int n = 2000;
  double start = NowUs();
  for (int i = 0; i < n; i++) {
    if (write(fd, line.data(), line.size()) < 0 || fdatasync(fd) != 0) {
      Die("write/fdatasync " + path);
    }
  }
  double us = (NowUs() - start) / n;
  close(fd);
  return us;
}

// The cost of one page fault: first touch of 64 MiB of fresh anonymous
// memory, in 4 KiB pages (`huge` false) or in 2 MiB transparent huge pages
// (`huge` true), per 4 KiB. On a VM this is mostly the hypervisor's work and
// varies from machine to machine, and over time on one machine; loading a
// large run touches its whole state, so the open figure depends on it.
double MeasureFirstTouchUs(bool huge) {
  const size_t len = size_t{64} << 20;
  char* p = static_cast<char*>(mmap(nullptr, len, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) Die("mmap");
  madvise(p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  const double start = NowUs();
  for (size_t i = 0; i < len; i += 4096) p[i] = 1;
  const double us = (NowUs() - start) / (len / 4096);
  munmap(p, len);
  return us;
}

// A fixed amount of CPU work (a xorshift loop), in ms: the host's CPU speed
// varies too (the same binary took 1.7x as long within the hour).
double MeasureCpuMs() {
  const double start = NowUs();
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 100000000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  volatile uint64_t sink = x;
  (void)sink;
  return (NowUs() - start) / 1000;
}

QueueOptions WizqOptions(const std::string& dir) {
  QueueOptions o;
  o.install_dir = dir;
  o.run_id = "bench-run";
  o.workflow_json = "{\"entrypoint\":\"Work\",\"steps\":[]}";
  o.wizq_version = "bench";
  return o;
}

void SeedWizq(Queue* q, int64_t n) {
  const int64_t chunk = 5000;
  for (int64_t first = 1; first <= n; first += chunk) {
    Check("seed", q->Transact([&](Txn& txn) {
      for (int64_t k = first; k < std::min(n + 1, first + chunk); k++) {
        NewTask t;
        t.type = "Work";
        t.inputs = TaskInputs(k);
        t.origin = Origin::kInitial;
        t.max_attempts = 3;
        int64_t id = 0;
        bool dup = false;
        WIZQ_RETURN_IF_ERROR(txn.Submit(t, &id, &dup));
      }
      return Status::OK();
    }));
  }
}

}  // namespace bench
}  // namespace wizq
