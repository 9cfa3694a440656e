// Fuzz target: a whole `.wizard/` directory as Queue::Open finds it
// (queue/dir/queue.h), held in memory (fuzz/mem_env.h).
//
// The input is queue.json, audit.jsonl, or both:
//   <queue.json bytes>#audit\n<audit.jsonl bytes>       log as is
//   <queue.json bytes>#audit+crc\n<audit.jsonl bytes>   every log line's crc
//                                                       recomputed
// ("#audit" must start a line; either part may be empty = no such file).
// Without a marker the input is audit.jsonl if it starts with {"seq", else
// queue.json.
//
// Properties:
//  1. Queue::Open read_only returns a state or an error; never crashes or
//     changes a file. An accepted state keeps QueueState's invariants and
//     survives a checkpoint (fuzz_util.h).
//  2. A worker then opens the directory for writing (resuming the run found,
//     or archiving it and starting afresh), claims, completes (spawning
//     children, some deduplicated), fails and retries tasks, submits finally
//     hooks, and dies without Close. A reader then sees exactly the state
//     the worker had: the snapshot plus the log after it is the run.
//  3. A second worker resumes that run (it must be able to), works on,
//     closes; a reader again sees exactly its state.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "fuzz/mem_env.h"
#include "queue/dir/queue.h"

namespace {

using namespace wizq;

// Where the input's files are put. The worker then works on the
// install_dir the run recorded, if it is a plain absolute path (the files
// are moved there), so that it resumes the run rather than archiving it.
const char kInstallDir[] = "/fz";
const char kWizard[] = "/fz/.wizard";

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool PlainPath(const std::string& p) {
  if (p.size() < 2 || p.size() > 200 || p[0] != '/' || p.back() == '/') {
    return false;
  }
  for (char c : p) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '/' && c != '.' &&
        c != '_' && c != '-') {
      return false;
    }
  }
  return p.find("//") == std::string::npos &&
         p.find("/./") == std::string::npos &&
         p.find("/../") == std::string::npos && !EndsWith(p, "/.") &&
         !EndsWith(p, "/..") && p != kInstallDir && p.rfind("/fz/", 0) != 0;
}

// Moves kInstallDir to `to` (creating its parents).
void MoveInstallDir(fuzz::MemEnv& env, const std::string& to) {
  for (size_t i = to.find('/', 1); i != std::string::npos;
       i = to.find('/', i + 1)) {
    env.AddDir(to.substr(0, i));
  }
  Status s = env.RenameFile(kInstallDir, to);
  FUZZ_CHECK(s.ok(), s.ToString());
}

void Split(std::string_view in, std::string* snapshot, std::string* log) {
  for (std::string_view marker : {"#audit\n", "#audit+crc\n"}) {
    size_t at = in.find(marker);
    while (at != std::string_view::npos && at != 0 && in[at - 1] != '\n') {
      at = in.find(marker, at + 1);
    }
    if (at == std::string_view::npos) continue;
    *snapshot = std::string(in.substr(0, at));
    std::string_view rest = in.substr(at + marker.size());
    *log = marker.size() > 7 ? fuzz::Rechecksum(rest) : std::string(rest);
    return;
  }
  if (in.substr(0, 7) == "{\"seq\":") {
    *log = std::string(in);
  } else {
    *snapshot = std::string(in);
  }
}

std::map<std::string, std::string> FilesWithoutLocks(
    fuzz::MemEnv& env, const std::string& install_dir) {
  std::map<std::string, std::string> out = env.files();
  out.erase(install_dir + "/.wizard/lock");
  return out;
}

// Opens read-only; on success returns the state as Describe() prints it.
bool ReadState(fuzz::MemEnv& env, const std::string& install_dir,
               std::string* described, Status* status, RunInfo* run = nullptr) {
  QueueOptions options;
  options.env = &env;
  options.install_dir = install_dir;
  options.mode = OpenMode::kReadOnly;
  std::unique_ptr<Queue> q;
  OpenReport report;
  const auto before = FilesWithoutLocks(env, install_dir);
  *status = Queue::Open(options, &q, &report);
  FUZZ_CHECK(FilesWithoutLocks(env, install_dir) == before,
             "a read-only open changed the files");
  if (!status->ok()) {
    FUZZ_CHECK(!status->IsIOError() && !status->IsBusy(), status->ToString());
    return false;
  }
  FUZZ_CHECK(report.action == OpenAction::kReadOnly, "action");
  fuzz::CheckStateInvariants(q->state());
  *described = fuzz::Describe(q->state());
  if (run) *run = q->state().run();
  return true;
}

// Claims and settles up to `steps` tasks; false if a transaction failed.
bool Work(Queue* q, int steps, int* counter) {
  for (int i = 0; i < steps; i++) {
    Status s = q->Transact([&](Txn& txn) -> Status {
      // A finally hook that is due, as the run loop submits it.
      if (!txn.state().hooks_due().empty()) {
        const Task* owner = txn.state().Find(*txn.state().hooks_due().begin());
        NewTask hook;
        hook.type = owner->type;
        hook.inputs = owner->inputs;
        hook.parent_id = owner->parent_id;
        hook.origin = Origin::kFinally;
        hook.finally_for = owner->id;
        hook.max_attempts = 2;
        int64_t id = 0;
        bool dup = false;
        WIZQ_RETURN_IF_ERROR(txn.Submit(hook, &id, &dup));
      }
      int64_t id = 0;
      WIZQ_RETURN_IF_ERROR(txn.ClaimNextOfSteps(nullptr, nullptr, &id));
      if (id == 0) return Status::OK();
      const int n = (*counter)++;
      if (n % 3 == 2) {
        bool will_retry = false;
        return txn.Fail(id, "exit_code", "exit code 1", /*retryable=*/true,
                        /*retry_delay_ms=*/0, &will_retry);
      }
      std::vector<NewTask> children;
      if (n % 3 == 0) {
        const std::string type = txn.state().Find(id)->type;
        for (int k = 0; k < 2; k++) {
          NewTask c;
          c.type = type;
          c.inputs = "{\"n\":" + std::to_string((n + k) % 5) + "}";
          c.parent_id = id;
          c.max_attempts = 2;
          c.has_finally = (n + k) % 4 == 0;
          children.push_back(c);
        }
      }
      std::vector<int64_t> ids;
      return txn.Complete(id, children, &ids);
    });
    if (!s.ok()) {
      fuzz::Debug("transaction: " + s.ToString());
      return false;
    }
  }
  if (q->state().AllSettled() &&
      q->state().run().status == RunStatus::kRunning) {
    const bool failed = q->state().count(TaskState::kFailed) > 0;
    Status s = q->Transact([&](Txn& txn) {
      return txn.FinishRun(failed ? RunStatus::kFailed : RunStatus::kCompleted,
                           1);
    });
    if (!s.ok()) {
      fuzz::Debug("finishing: " + s.ToString());
      return false;
    }
  }
  return true;
}

QueueOptions WriterOptions(fuzz::MemEnv* env, const std::string& install_dir,
                           const std::string& run_id) {
  QueueOptions options;
  options.env = env;
  options.install_dir = install_dir;
  options.run_id = run_id.empty() ? "rfuzz" : run_id;
  options.workflow_json = "{\"steps\":[]}";
  options.entry_input = "{}";
  NewTask root;
  root.type = "Root";
  root.inputs = "{}";
  root.origin = Origin::kInitial;
  root.max_attempts = 2;
  root.has_finally = true;
  options.initial_tasks.push_back(root);
  options.wizq_version = "0.1.0";
  options.checkpoint_min_bytes = 512;  // checkpoint often
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string snapshot, log;
  Split(fuzz::AsText(data, size), &snapshot, &log);
  fuzz::MemEnv env;
  for (const char* dir : {"/", kInstallDir, kWizard, "/fz/.wizard/workers",
                          "/fz/.wizard/tasks"}) {
    env.AddDir(dir);
  }
  if (!snapshot.empty())
    env.files()[std::string(kWizard) + "/queue.json"] = snapshot;
  if (!log.empty()) env.files()[std::string(kWizard) + "/audit.jsonl"] = log;

  // 1. A reader.
  std::string described;
  RunInfo run;
  Status s;
  if (!ReadState(env, kInstallDir, &described, &s, &run)) {
    fuzz::Debug("read-only open: " + s.ToString());
    return 0;
  }
  if (env.files().count(std::string(kWizard) + "/queue.json")) {
    // The snapshot alone (as decoded) survives a checkpoint too.
    SnapshotHeader header;
    QueueState state;
    if (DecodeSnapshot("queue.json", snapshot, &header, &state).ok() &&
        header.version == kSnapshotVersion) {
      fuzz::CheckSnapshotRoundTrip(state, header.audit_offset);
    }
  }

  std::string install_dir = kInstallDir;
  if (PlainPath(run.install_dir)) {
    install_dir = run.install_dir;
    MoveInstallDir(env, install_dir);
  }
  std::string run_id = run.run_id;

  // 2. A worker that dies.
  int counter = 0;
  std::string expected;
  {
    std::unique_ptr<Queue> q;
    OpenReport report;
    QueueOptions options = WriterOptions(&env, install_dir, run_id);
    s = Queue::Open(options, &q, &report);
    if (s.ok() && report.action == OpenAction::kFinished) {
      // A finished run: start over (--fresh), which archives it.
      q.reset();
      options.mode = OpenMode::kFresh;
      s = Queue::Open(options, &q, &report);
      FUZZ_CHECK(!s.ok() || report.action == OpenAction::kStartedFresh,
                 "--fresh did not start a fresh run");
    }
    if (!s.ok()) {
      FUZZ_CHECK(!s.IsIOError() && !s.IsBusy(), s.ToString());
      fuzz::Debug("open for writing: " + s.ToString());
      return 0;
    }
    fuzz::Debug("opened " + install_dir + ": action " +
                std::to_string(static_cast<int>(report.action)) +
                (report.archived_to.empty()
                     ? std::string()
                     : ", archived (" + report.archive_reason + ")"));
    fuzz::CheckStateInvariants(q->state());
    if (!Work(q.get(), 6, &counter)) return 0;
    fuzz::Debug("worked: " + std::to_string(counter) + " claims");
    fuzz::CheckStateInvariants(q->state());
    expected = fuzz::Describe(q->state());
    run_id = q->state().run().run_id;
  }  // no Close: a crash
  std::string seen;
  FUZZ_CHECK(ReadState(env, install_dir, &seen, &s),
             "a run the worker left cannot be read: " + s.ToString());
  FUZZ_CHECK(seen == expected,
             "after a crash the reader sees another "
             "state:\n--- worker\n" +
                 expected + "--- reader\n" + seen);

  // 3. A worker that resumes the run and closes.
  {
    std::unique_ptr<Queue> q;
    OpenReport report;
    s = Queue::Open(WriterOptions(&env, install_dir, run_id), &q, &report);
    FUZZ_CHECK(s.ok(), "cannot resume the run: " + s.ToString());
    FUZZ_CHECK(report.archived_to.empty(), "the run was archived on resume");
    if (report.action == OpenAction::kFinished) {
      fuzz::Debug("finished by the first worker");
      return 0;
    }
    FUZZ_CHECK(report.action == OpenAction::kResumed, "not resumed");
    if (!Work(q.get(), 6, &counter)) return 0;
    fuzz::Debug("resumed, worked: " + std::to_string(counter) + " claims");
    s = q->Close();
    FUZZ_CHECK(s.ok(), "Close: " + s.ToString());
    expected = fuzz::Describe(q->state());
  }
  FUZZ_CHECK(ReadState(env, install_dir, &seen, &s),
             "a closed run cannot be read: " + s.ToString());
  FUZZ_CHECK(seen == expected,
             "after Close the reader sees another "
             "state:\n--- worker\n" +
                 expected + "--- reader\n" + seen);
  FUZZ_CHECK(env.files().count(install_dir + "/.wizard/queue.json"),
             "no snapshot after Close");
  return 0;
}
