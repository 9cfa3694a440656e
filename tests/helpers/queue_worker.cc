// queue_worker: one worker process of the multi-process queue test
// (tests/queue_multiprocess_test.cc).
//
//   queue_worker --dir D --run-id R [--max-tasks N] [--hold-after-claim]
//                [--hold-count K] [--ledger F] [--go-file G]
//
// Opens the run in D (the test seeds it first, so this joins or resumes
// it), then loops: Transact{ClaimNextOfSteps} (each
// transaction first puts back the claims of dead workers); "does the work"
// by appending "<task_id> <pid>\n" to the ledger (D/ledger.txt unless
// --ledger) with O_APPEND and sleeping 0-2 ms; then Transact{Complete}.
// A task of type "Fan" spawns children (see FanChildren); a "Leaf" spawns
// nothing. Exits 0 (after Close) once nothing is pending or in progress, or
// after N completed tasks with --max-tasks.
//
// --go-file G: after opening the run (so its worker_joined is logged), waits
// until G exists before taking tasks, so that a test can start several
// workers at the same moment.
//
// --hold-after-claim: after N completed tasks (--max-tasks, default 0),
// claims up to K more (--hold-count, default 3), starts their work (writes
// their ledger lines) and then sleeps forever, holding the claims, so that
// the test can SIGKILL it.
//
// Exit codes: 0 done, 2 bad arguments, 3 a queue error (printed).
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "queue/dir/queue.h"

namespace wizq {
namespace {

struct Args {
  std::string dir;
  std::string run_id;
  std::string ledger;
  std::string go_file;
  long max_tasks = -1;
  bool hold = false;
  long hold_count = 3;
};

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; i++) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--dir" && has_value) {
      a->dir = argv[++i];
    } else if (arg == "--run-id" && has_value) {
      a->run_id = argv[++i];
    } else if (arg == "--ledger" && has_value) {
      a->ledger = argv[++i];
    } else if (arg == "--go-file" && has_value) {
      a->go_file = argv[++i];
    } else if (arg == "--max-tasks" && has_value) {
      a->max_tasks = std::strtol(argv[++i], nullptr, 10);
    } else if (arg == "--hold-count" && has_value) {
      a->hold_count = std::strtol(argv[++i], nullptr, 10);
    } else if (arg == "--hold-after-claim") {
      a->hold = true;
    } else {
      return false;
    }
  }
  return !a->dir.empty() && !a->run_id.empty();
}

int Fail(const char* what, const Status& s) {
  std::fprintf(stderr, "queue_worker[%d]: %s: %s\n", static_cast<int>(getpid()),
               what, s.ToString().c_str());
  return 3;
}

// The tasks a "Fan" task spawns. Its inputs carry {"level":L,...}: level 0
// spawns `fan` Fans of level 1, level 1 spawns `fan` Leaves. Inputs are
// deterministic (derived from the parent's inputs, not from ids), so a
// re-run after a kill would spawn the same children.
std::vector<NewTask> FanChildren(const Task& t) {
  std::vector<NewTask> out;
  if (t.type != "Fan") return out;
  // Inputs look like {"level":0,"fan":20,"i":0}: crude but exact parsing of
  // the three integers the test writes.
  auto field = [&](const char* name) {
    const std::string key = std::string("\"") + name + "\":";
    size_t p = t.inputs.find(key);
    return p == std::string::npos
               ? 0L
               : std::strtol(t.inputs.c_str() + p + key.size(), nullptr, 10);
  };
  const long level = field("level");
  const long fan = field("fan");
  const long index = field("i");
  for (long j = 0; j < fan; j++) {
    NewTask c;
    c.parent_id = t.id;
    c.origin = Origin::kSpawned;
    c.max_attempts = t.max_attempts;
    if (level == 0) {
      c.type = "Fan";
      c.inputs = "{\"level\":1,\"fan\":" + std::to_string(fan) +
                 ",\"i\":" + std::to_string(j) + "}";
    } else {
      c.type = "Leaf";
      c.inputs = "{\"fan_i\":" + std::to_string(index) +
                 ",\"j\":" + std::to_string(j) + "}";
    }
    out.push_back(std::move(c));
  }
  return out;
}

int Run(const Args& args) {
  char real[PATH_MAX];
  if (realpath(args.dir.c_str(), real) == nullptr) {
    std::perror(args.dir.c_str());
    return 2;
  }
  const std::string ledger_path =
      args.ledger.empty() ? std::string(real) + "/ledger.txt" : args.ledger;
  const int ledger = ::open(ledger_path.c_str(),
                            O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (ledger < 0) {
    std::perror(ledger_path.c_str());
    return 3;
  }
  QueueOptions options;
  options.install_dir = real;
  options.run_id = args.run_id;
  options.workflow_json = "{\"steps\":[]}";
  std::unique_ptr<Queue> queue;
  OpenReport report;
  Status s = Queue::Open(options, &queue, &report);
  if (!s.ok()) return Fail("open", s);
  while (!args.go_file.empty() && access(args.go_file.c_str(), F_OK) != 0) {
    usleep(1000);
  }

  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pause_us(0, 2000);
  const long quota = args.max_tasks < 0 ? LONG_MAX : args.max_tasks;
  long completed = 0;
  long held = 0;
  while (true) {
    const bool holding = args.hold && completed >= quota;
    if (!args.hold && completed >= quota) break;
    if (holding && held >= args.hold_count) {
      for (;;) pause();  // hold the claims until SIGKILL
    }
    int64_t id = 0;
    bool finished = false;
    s = queue->Transact([&](Txn& txn) {
      WIZQ_RETURN_IF_ERROR(txn.ClaimNextOfSteps(nullptr, nullptr, &id));
      finished = id == 0 && txn.state().pending().empty() &&
                 txn.state().in_progress().empty();
      return Status::OK();
    });
    if (!s.ok()) return Fail("claim", s);
    if (finished) break;
    if (id == 0) {
      if (holding && held > 0) {
        for (;;) pause();  // nothing more to take: hold what we have
      }
      usleep(5000);
      continue;
    }
    // "Do the work": one atomic O_APPEND write, then a short random pause.
    const std::string line =
        std::to_string(id) + " " + std::to_string(getpid()) + "\n";
    if (::write(ledger, line.data(), line.size()) !=
        static_cast<ssize_t>(line.size())) {
      std::perror("ledger write");
      return 3;
    }
    if (holding) {
      held++;
      continue;
    }
    usleep(pause_us(rng));
    s = queue->Transact([&](Txn& txn) {
      return txn.Complete(id, FanChildren(*txn.state().Find(id)), nullptr);
    });
    if (!s.ok()) return Fail("complete", s);
    completed++;
  }
  ::close(ledger);
  s = queue->Close();
  if (!s.ok()) return Fail("close", s);
  return 0;
}

}  // namespace
}  // namespace wizq

int main(int argc, char** argv) {
  wizq::Args args;
  if (!wizq::ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: queue_worker --dir D --run-id R [--max-tasks N] "
                 "[--hold-after-claim] [--hold-count K] [--ledger F] "
                 "[--go-file G]\n");
    return 2;
  }
  return wizq::Run(args);
}
