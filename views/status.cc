#include "views/status.h"

#include <cstdio>
#include <set>

#include "agent/run_status.h"
#include "fs/env.h"
#include "queue/store.h"
#include "tasks/exec/attempt_files.h"
#include "tasks/exec/function_executor.h"
#include "tasks/exec/prompt.h"
#include "tasks/proc/orphans_record.h"
#include "tasks/workflow/workflow.h"
#include "util/exit_code.h"
#include "views/json_events.h"
#include "views/status_view.h"
#include "views/view_util.h"

namespace wizq {
namespace {

// The holders of in_progress tasks known dead, and of their tasks those
// whose attempt never began (claimed ahead, or queued in the spawner).
struct DeadHolders {
  std::set<std::string> workers;
  std::set<int64_t> unstarted;
};

// `dead`: null when unknown.
void PrintTaskLine(const Task& t, int depth, int64_t now_ms,
                   const DeadHolders* dead) {
  std::string line(static_cast<size_t>(depth) * 2, ' ');
  line += "#" + std::to_string(t.id) + " " + t.type;
  if (t.inputs != "{}" && t.inputs != "null")
    line += " " + ShortenMiddle(t.inputs, 40);
  line += HookLabel(t);
  line += std::string("  ") + TaskStateName(t.state);
  if (t.reused_from != 0) {
    line += " (reused: task " + std::to_string(t.reused_from) +
            " of the previous run)";
  }
  line += "  attempts " + std::to_string(t.attempts) + "/" +
          std::to_string(t.max_attempts);
  if (t.state == TaskState::kInProgress && !t.lease_token.empty()) {
    const int64_t left = t.lease_expires_ms - now_ms;
    line +=
        "  leased by " + (t.agent.empty() ? "an agent" : t.agent) +
        (left >= 0 ? ", lapses in " + std::to_string((left + 999) / 1000) + "s"
                   : ", lapsed " + std::to_string(-left / 1000) +
                         "s ago (put back at the next transaction)");
  } else if (t.state == TaskState::kInProgress) {
    line += "  held by " + t.claimed_by;
    if (dead != nullptr && dead->unstarted.count(t.id)) {
      line +=
          " (dead; its attempt never started: given back, not charged, "
          "when the run resumes)";
    } else if (dead != nullptr && dead->workers.count(t.claimed_by)) {
      line += " (dead: put back when the run resumes)";
    }
  }
  if (!t.error_reason.empty()) {
    line += "  last error: " + t.error_reason + ": " +
            Shorten(t.error_message, 200);
  }
  if (!t.answer.empty())
    line += "  answer " + t.answer + " (" + t.answer_source + ")";
  std::printf("%s\n", line.c_str());
}

void PrintTree(const RunView& v, const Task& t, int depth, int64_t now,
               const DeadHolders* dead) {
  PrintTaskLine(t, depth, now, dead);
  for (int64_t c : t.children) PrintTree(v, v.Find(c), depth + 1, now, dead);
}

void PrintWorkers(const RunStatusExtras& x, const std::string& archive) {
  if (!archive.empty()) return;  // an archived run has no workers
  std::string alive;
  int n = 0;
  for (const auto& w : x.workers) {
    if (!w.alive) continue;
    n++;
    alive += std::string(alive.empty() ? "" : "; ") + "pid " +
             std::to_string(w.pid) + " (" + w.id +
             (w.started_ms > 0 ? ", since " + FormatTime(w.started_ms) : "") +
             ")";
  }
  if (n == 0) {
    std::printf("workers: none alive\n");
  } else {
    std::printf("workers: %d alive: %s\n", n, alive.c_str());
  }
}

void PrintLeased(const RunView& v, int64_t now) {
  bool first = true;
  for (const Task* task : v.InState(TaskState::kInProgress)) {
    const Task& t = *task;
    const int64_t id = t.id;
    if (t.lease_token.empty()) continue;
    if (first) std::printf("\nleased to agents:\n");
    first = false;
    const int64_t left = t.lease_expires_ms - now;
    std::printf("  #%lld %s  by %s, %s\n", static_cast<long long>(id),
                t.type.c_str(), t.agent.empty() ? "an agent" : t.agent.c_str(),
                left >= 0 ? ("lapses in " + FormatDuration(left)).c_str()
                          : "lapsed (put back at the next transaction)");
  }
}

}  // namespace

std::vector<const Task*> RunView::InState(TaskState state) const {
  std::vector<const Task*> out;
  for (const Task& t : tasks) {
    if (t.state == state) out.push_back(&t);
  }
  return out;
}

Status LoadRunView(Store& store, RunView* v) {
  WIZQ_RETURN_IF_ERROR(store.GetRun(&v->run));
  WIZQ_RETURN_IF_ERROR(store.Counts(&v->counts));
  WIZQ_RETURN_IF_ERROR(store.ListTasks(TaskFilter(), &v->tasks));
  v->store = &store;
  return Status::OK();
}

std::string TaskFilesDir(const RunPlace& place, const RunRef& run) {
  if (!place.database()) {
    return run.archived ? run.key : LocalWorkspace(place.dir);
  }
  return LocalWorkspaceOf(Env::Posix(), place.dir, place.store, run.run_id,
                          run.started_ms);
}

// The current run's TaskFilesDir.
static std::string Workspace(const RunPlace& place, const RunInfo& run) {
  RunRef ref;
  ref.run_id = run.run_id;
  ref.started_ms = run.started_ms;
  return TaskFilesDir(place, ref);
}

// The live run: its workers as the registry says, and whether it is
// interrupted.
RunStatusExtras LiveExtras(const RunView& v, Store& store,
                           const RunPlace& place) {
  RunStatusExtras x;
  std::vector<WorkerInfo> workers;
  if (store.Workers(&workers).ok()) {  // unreadable: shown as no workers
    x.workers = std::move(workers);
  }
  bool live = false;
  for (const auto& w : x.workers) live = live || w.alive;
  const int64_t unfinished =
      v.counts.of(TaskState::kPending) + v.counts.of(TaskState::kInProgress);
  x.interrupted =
      !live && v.run.status == RunStatus::kRunning && unfinished > 0;
  std::unique_ptr<Workflow> wf;
  if (Workflow::Parse(v.run.workflow, "workflow", &wf).ok()) {
    for (const Task* t : v.InState(TaskState::kPending)) {
      if (WaitsForAnswer(*wf, *t)) x.waiting_prompts.push_back(t->id);
    }
    x.embedded = !FunctionHandlerNames(*wf).empty();
  }
  // `wizq run` has no handlers for Function steps: only the program that
  // embeds wizq resumes such a run.
  if (x.interrupted && !x.embedded) {
    x.resume_command =
        "wizq run WORKFLOW --dir " + ShellQuote(place.dir) + " --input " +
        ShellQuote(v.run.entry_input) +
        (place.database() ? place.CommandOptions(v.run.run_id)
                          : " --run-id " + ShellQuote(v.run.run_id));
  }
  uint64_t bytes = 0;
  const std::string workspace = Workspace(place, v.run);
  if (!workspace.empty() &&
      TaskFilesBytes(Env::Posix(), workspace, &bytes).ok()) {
    x.task_output_bytes = static_cast<int64_t>(bytes);
  }
  return x;
}

bool Filtered(const StatusArgs& a) {
  return a.failed || !a.state.empty() || !a.step.empty();
}

bool SelectTasks(const RunView& v, const StatusArgs& a,
                 std::vector<int64_t>* ids, std::string* error) {
  if (!a.step.empty()) {
    bool known = false;
    std::string steps;
    for (const Task& t : v.tasks) {
      known = known || t.type == a.step;
      if (steps.find(" " + t.type + ",") == std::string::npos) {
        steps += " " + t.type + ",";
      }
    }
    if (!known) {
      if (!steps.empty()) steps.pop_back();
      *error = "--step " + a.step + ": no task of that step in the run" +
               (steps.empty() ? "" : " (its steps:" + steps + ")");
      return false;
    }
  }
  for (const Task& t : v.tasks) {
    if (a.failed && t.state != TaskState::kFailed) continue;
    if (!a.state.empty() && TaskStateName(t.state) != a.state) continue;
    if (!a.step.empty() && t.type != a.step) continue;
    ids->push_back(t.id);
  }
  return true;
}

void PrintHumanStatus(const RunView& v, const RunStatusExtras& x,
                      const StatusArgs& args,
                      const std::vector<int64_t>& selected,
                      const std::string& archive) {
  const RunInfo& r = v.run;
  const RunCounts& c = v.counts;
  const int64_t now = WallNowMs();
  const char* shown = LiveStatus(r, x);
  // The summary line first: a script or a glance needs only it.
  const int64_t leased = c.leased;
  std::printf(
      "%s: %lld total, %lld done, %lld failed, %lld in progress%s, %lld "
      "pending (run %s)\n",
      shown, static_cast<long long>(c.total),
      static_cast<long long>(c.of(TaskState::kDone)),
      static_cast<long long>(c.of(TaskState::kFailed)),
      static_cast<long long>(c.of(TaskState::kInProgress)),
      leased > 0 ? (" (" + std::to_string(leased) + " leased)").c_str() : "",
      static_cast<long long>(c.of(TaskState::kPending)), r.run_id.c_str());
  if (!archive.empty()) std::printf("archived in %s\n", archive.c_str());
  PrintWorkers(x, archive);
  if (x.interrupted && x.embedded) {
    std::printf(
        "interrupted: no process runs it; its unfinished tasks wait. Its "
        "workflow has Function steps, so only the program that embeds wizq "
        "and registers their handlers can resume it: run that program again "
        "(wizq run cannot)\n");
  } else if (x.interrupted) {
    std::printf(
        "interrupted: no wizq process runs it; its unfinished tasks wait. "
        "Resume it with\n  %s\n(WORKFLOW: the workflow file it was started "
        "with)\n",
        x.resume_command.c_str());
  }
  // On a store, the directory of the worker that started the run (each
  // worker has its own; this machine's files are named below).
  std::printf("install dir %s%s\nstarted %s, resumed %d time(s)",
              r.install_dir.c_str(),
              args.place.database() ? " (of the worker that started it)" : "",
              FormatTime(r.started_ms).c_str(), r.resumes);
  if (r.finished_ms > 0) {
    std::printf(", finished %s after %s", FormatTime(r.finished_ms).c_str(),
                FormatDuration(r.finished_ms - r.started_ms).c_str());
  }
  std::printf("\n");
  if (x.task_output_bytes >= 0) {
    std::printf(
        "task files: %s under %s/tasks%s\n",
        FormatBytes(static_cast<uint64_t>(x.task_output_bytes)).c_str(),
        args.place.database() ? Workspace(args.place, r).c_str() : ".wizard",
        r.status == RunStatus::kCompleted || r.status == RunStatus::kFailed
            ? " (wizq prune removes those of finished tasks)"
            : "");
  }
  if (c.reused > 0) {
    std::printf("reused: %lld task(s) completed from the previous run (%s)\n",
                static_cast<long long>(c.reused), r.previous_run.c_str());
  }
  PrintLeased(v, now);
  if (archive.empty()) PrintWaitingPrompts(*v.store, args.place);
  std::printf("\n");
  // A holder is dead when the registry does not show it alive (the live
  // run only: an archived run's holders are all gone).
  DeadHolders dead_set;
  const DeadHolders* dead = nullptr;
  if (archive.empty()) {
    std::set<std::string> alive;
    for (const auto& w : x.workers) {
      if (w.alive) alive.insert(w.id);
    }
    const std::string workspace = Workspace(args.place, v.run);
    for (const Task* task : v.InState(TaskState::kInProgress)) {
      const Task& t = *task;
      if (t.lease_token.empty() && !alive.count(t.claimed_by)) {
        dead_set.workers.insert(t.claimed_by);
        const bool began =
            t.started ||
            (!workspace.empty() &&
             internal::AttemptBegan(Env::Posix(),
                                    AttemptFiles::TaskDir(workspace, t.id),
                                    t.attempts));
        if (!began) {
          dead_set.unstarted.insert(t.id);
        }
      }
    }
    dead = &dead_set;
  }
  if (Filtered(args)) {
    std::printf("%zu task(s) selected:\n", selected.size());
    for (int64_t id : selected) PrintTaskLine(v.Find(id), 0, now, dead);
    return;
  }
  if (!v.bounded) {
    for (const Task& t : v.tasks) {
      if (t.parent_id == 0) PrintTree(v, t, 0, now, dead);
    }
    return;
  }
  for (const auto& [id, depth] : v.lines) {
    PrintTaskLine(v.Find(id), depth, now, dead);
  }
  const int64_t more = c.total - static_cast<int64_t>(v.lines.size());
  if (more <= 0) return;
  std::printf("... and %lld more task(s): wizq status --all\n",
              static_cast<long long>(more));
  if (v.failed.empty()) return;
  std::printf("\nfailed%s:\n",
              c.of(TaskState::kFailed) > static_cast<int64_t>(v.failed.size())
                  ? " (the first; all: wizq status --failed)"
                  : "");
  for (int64_t id : v.failed) PrintTaskLine(v.Find(id), 1, now, dead);
}

int DoStatus(const StatusArgs& args) {
  if (args.archived) {
    return args.archived_name.empty() ? ListArchived(args) : ShowArchived(args);
  }
  StoreOptions o;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Store> store;
  RunView v;
  Status s = args.place.Open(o, &store);
  const bool bounded = !args.all && !args.json && !Filtered(args);
  if (s.ok()) {
    s = bounded ? LoadBoundedRunView(*store, kTreeLines, &v)
                : LoadRunView(*store, &v);
  }
  if (!s.ok()) {
    return ReportCommandError("status", ExitCodeOfOpen(s), s.message(), "",
                              args.json);
  }
  std::vector<int64_t> selected;
  std::string error;
  if (!SelectTasks(v, args, &selected, &error)) {
    return ReportCommandError("status", kExitInvalid, error, "", args.json);
  }
  RunStatusExtras x = LiveExtras(v, *store, args.place);
  if (Filtered(args)) x.only_tasks = &selected;
  if (args.json) {
    std::string json;
    s = RunStatusJson(*store, WallNowMs(), x, &json);
    if (!s.ok()) {
      return ReportCommandError("status", kExitEnvironment, s.message(), "",
                                args.json);
    }
    std::printf("%s\n", json.c_str());
    return kExitCompleted;
  }
  PrintHumanStatus(v, x, args, selected, "");
  return kExitCompleted;
}

}  // namespace wizq
