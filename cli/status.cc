#include "cli/status.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <set>

#include "agent/run_status.h"
#include "cli/answer.h"
#include "cli/json_events.h"
#include "cli/status_view.h"
#include "cli/view_util.h"
#include "fs/env.h"
#include "queue/dir/dir_store.h"  // StateReads, until status holds a Store
#include "queue/queue.h"
#include "tasks/attempt_files.h"
#include "tasks/function_executor.h"
#include "tasks/orphans_record.h"
#include "tasks/prompt.h"
#include "tasks/workflow.h"
#include "util/exit_code.h"

namespace wizq {
namespace {

const char* const kStates[] = {"pending", "in_progress", "done", "failed"};

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

void PrintTree(const QueueState& s, const Task& t, int depth, int64_t now,
               const DeadHolders* dead) {
  PrintTaskLine(t, depth, now, dead);
  for (int64_t c : t.children) PrintTree(s, *s.Find(c), depth + 1, now, dead);
}

void PrintWorkers(const RunStatusExtras& x, const std::string& archive) {
  if (!archive.empty()) return;  // an archived run has no workers
  std::string alive;
  int n = 0;
  for (const WorkerInfo& w : x.workers) {
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

void PrintLeased(const QueueState& st, int64_t now) {
  bool first = true;
  for (int64_t id : st.in_progress()) {
    const Task& t = *st.Find(id);
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

// The live run: its workers as the registry says, and whether it is
// interrupted.
RunStatusExtras LiveExtras(const QueueState& st, const std::string& dir) {
  RunStatusExtras x;
  const std::string wizard = WizardDir(dir);
  ProbeDirWorkers(Env::Posix(), wizard, &x.workers)
      .IgnoreError();  // an unreadable registry shows as no workers
  bool live = false;
  for (const WorkerInfo& w : x.workers) live = live || w.alive;
  const int64_t unfinished =
      st.count(TaskState::kPending) + st.count(TaskState::kInProgress);
  x.interrupted =
      !live && st.run().status == RunStatus::kRunning && unfinished > 0;
  std::unique_ptr<Workflow> wf;
  if (Workflow::Parse(st.run().workflow, "workflow", &wf).ok()) {
    for (int64_t id : st.pending()) {
      if (WaitsForAnswer(*wf, *st.Find(id))) x.waiting_prompts.push_back(id);
    }
    x.embedded = !FunctionHandlerNames(*wf).empty();
  }
  // `wizq run` has no handlers for Function steps: only the program that
  // embeds wizq resumes such a run.
  if (x.interrupted && !x.embedded) {
    x.resume_command = "wizq run WORKFLOW --dir " + ShellQuote(dir) +
                       " --input " + ShellQuote(st.run().entry_input) +
                       " --run-id " + ShellQuote(st.run().run_id);
  }
  uint64_t bytes = 0;
  if (TaskFilesBytes(Env::Posix(), wizard, &bytes).ok()) {
    x.task_output_bytes = static_cast<int64_t>(bytes);
  }
  return x;
}

bool Filtered(const StatusArgs& a) {
  return a.failed || !a.state.empty() || !a.step.empty();
}

bool SelectTasks(const QueueState& st, const StatusArgs& a,
                 std::vector<int64_t>* ids, std::string* error) {
  if (!a.step.empty()) {
    bool known = false;
    std::string steps;
    for (const Task& t : st.tasks()) {
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
  for (const Task& t : st.tasks()) {
    if (a.failed && t.state != TaskState::kFailed) continue;
    if (!a.state.empty() && TaskStateName(t.state) != a.state) continue;
    if (!a.step.empty() && t.type != a.step) continue;
    ids->push_back(t.id);
  }
  return true;
}

void PrintHumanStatus(const QueueState& st, const RunStatusExtras& x,
                      const StatusArgs& args,
                      const std::vector<int64_t>& selected,
                      const std::string& archive) {
  const RunInfo& r = st.run();
  const int64_t now = WallNowMs();
  const char* shown = LiveStatus(r, x);
  // The summary line first: a script or a glance needs only it.
  int64_t leased = 0;
  for (int64_t id : st.in_progress())
    leased += !st.Find(id)->lease_token.empty();
  std::printf(
      "%s: %lld total, %lld done, %lld failed, %lld in progress%s, %lld "
      "pending (run %s)\n",
      shown, static_cast<long long>(st.total()),
      static_cast<long long>(st.count(TaskState::kDone)),
      static_cast<long long>(st.count(TaskState::kFailed)),
      static_cast<long long>(st.count(TaskState::kInProgress)),
      leased > 0 ? (" (" + std::to_string(leased) + " leased)").c_str() : "",
      static_cast<long long>(st.count(TaskState::kPending)), r.run_id.c_str());
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
  std::printf("install dir %s\nstarted %s, resumed %d time(s)",
              r.install_dir.c_str(), FormatTime(r.started_ms).c_str(),
              r.resumes);
  if (r.finished_ms > 0) {
    std::printf(", finished %s after %s", FormatTime(r.finished_ms).c_str(),
                FormatDuration(r.finished_ms - r.started_ms).c_str());
  }
  std::printf("\n");
  if (x.task_output_bytes >= 0) {
    std::printf(
        "task files: %s under .wizard/tasks%s\n",
        FormatBytes(static_cast<uint64_t>(x.task_output_bytes)).c_str(),
        r.status == RunStatus::kCompleted || r.status == RunStatus::kFailed
            ? " (wizq prune removes those of finished tasks)"
            : "");
  }
  if (st.reused() > 0) {
    std::printf("reused: %lld task(s) completed from the previous run (%s)\n",
                static_cast<long long>(st.reused()), r.previous_run.c_str());
  }
  PrintLeased(st, now);
  StateReads reads(st);
  if (archive.empty()) PrintWaitingPrompts(reads, args.dir);  // cli/answer.cc
  std::printf("\n");
  // A holder is dead when the registry does not show it alive (the live
  // run only: an archived run's holders are all gone).
  DeadHolders dead_set;
  const DeadHolders* dead = nullptr;
  if (archive.empty()) {
    std::set<std::string> alive;
    for (const WorkerInfo& w : x.workers) {
      if (w.alive) alive.insert(w.id);
    }
    const std::string wizard = WizardDir(args.dir);
    for (int64_t id : st.in_progress()) {
      const Task& t = *st.Find(id);
      if (t.lease_token.empty() && !alive.count(t.claimed_by)) {
        dead_set.workers.insert(t.claimed_by);
        if (!internal::AttemptBegan(Env::Posix(),
                                    AttemptFiles::TaskDir(wizard, t.id),
                                    t.attempts)) {
          dead_set.unstarted.insert(t.id);
        }
      }
    }
    dead = &dead_set;
  }
  if (Filtered(args)) {
    std::printf("%zu task(s) selected:\n", selected.size());
    for (int64_t id : selected) PrintTaskLine(*st.Find(id), 0, now, dead);
    return;
  }
  for (const Task& t : st.tasks()) {
    if (t.parent_id == 0) PrintTree(st, t, 0, now, dead);
  }
}

CLI::App* AddStatusCommand(CLI::App& app, StatusArgs* a,
                           const std::string& version) {
  CLI::App* cmd = app.add_subcommand(
      "status", "Show a run's summary, its workers and its task tree");
  cmd->set_version_flag("--version", version);
  cmd->add_option("--dir", a->dir, "Install directory (default: .)");
  cmd->add_flag("--json", a->json, "JSON output");
  cmd->add_flag("--failed", a->failed, "Only failed tasks");
  cmd->add_option("--state", a->state, "Only tasks in this state")
      ->check(CLI::IsMember({kStates[0], kStates[1], kStates[2], kStates[3]}));
  cmd->add_option("--step", a->step, "Only tasks of this step");
  cmd->add_option("--archived", a->archived_name,
                  "List the runs set aside in .wizard/archive/, or show the "
                  "one named")
      ->expected(0, 1);
  cmd->callback([cmd, a] { a->archived = cmd->count("--archived") > 0; });
  return cmd;
}

int DoStatus(const StatusArgs& args) {
  if (args.archived) {
    return args.archived_name.empty() ? ListArchived(args) : ShowArchived(args);
  }
  QueueOptions o;
  o.install_dir = args.dir;
  o.mode = OpenMode::kReadOnly;
  std::unique_ptr<Queue> q;
  Status s = Queue::Open(o, &q, nullptr);
  if (!s.ok()) {
    return ReportCommandError("status",
                              s.IsNotFound() ? kExitInvalid : kExitEnvironment,
                              s.message(), "", args.json);
  }
  const QueueState& st = q->state();
  std::vector<int64_t> selected;
  std::string error;
  if (!SelectTasks(st, args, &selected, &error)) {
    return ReportCommandError("status", kExitInvalid, error, "", args.json);
  }
  RunStatusExtras x = LiveExtras(st, args.dir);
  if (Filtered(args)) x.only_tasks = &selected;
  if (args.json) {
    StateReads reads(st);
    std::string json;
    s = RunStatusJson(reads, WallNowMs(), x, &json);
    if (!s.ok()) {
      return ReportCommandError("status", kExitEnvironment, s.message(), "",
                                args.json);
    }
    std::printf("%s\n", json.c_str());
    return kExitCompleted;
  }
  PrintHumanStatus(st, x, args, selected, "");
  return kExitCompleted;
}

}  // namespace wizq
