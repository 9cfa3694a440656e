#include "cli/answer.h"

#include <limits.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "orchestrator/run.h"
#include "queue/queue.h"
#include "tasks/prompt.h"
#include "tasks/prompt_answers.h"
#include "tasks/workflow.h"
#include "util/crash_point.h"
#include "util/exit_code.h"

namespace wizq {
namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "wizq answer: %s\n", s.message().c_str());
  return s.IsInvalidArgument() || s.IsNotFound() ? kExitInvalid
                                                 : kExitEnvironment;
}

// The run's frozen workflow and the answers checked against `state`.
Status Resolve(const QueueState& state, const std::vector<std::string>& args,
               std::vector<FlagAnswer>* out) {
  std::unique_ptr<Workflow> wf;
  Status s = Workflow::Parse(state.run().workflow, "the run's workflow", &wf);
  if (!s.ok()) return Status::Corruption(s.message());
  return ResolveAnswers(*wf, &state, args, /*allow_unbound=*/false, out);
}

}  // namespace

void PrintWaitingPrompts(const QueueState& state, const std::string& dir) {
  std::unique_ptr<Workflow> wf;
  if (!Workflow::Parse(state.run().workflow, "workflow", &wf).ok()) return;
  bool first = true;
  for (int64_t id : state.pending()) {
    const Task* t = state.Find(id);
    if (!WaitsForAnswer(*wf, *t)) continue;
    const PromptSpec* p = PromptOf(*wf, *t);
    if (first) std::printf("\nwaiting for an answer:\n");
    first = false;
    std::printf(
        "  #%lld %s (%s): %s\n    answer: wizq answer --dir %s %lld=VALUE\n",
        static_cast<long long>(id), t->type.c_str(), PromptModeName(p->mode),
        p->message.c_str(), dir.c_str(), static_cast<long long>(id));
  }
}

CLI::App* AddAnswerCommand(CLI::App& app, AnswerArgs* args,
                           const std::string& version) {
  CLI::App* cmd = app.add_subcommand(
      "answer", "Answer a run's human gates (Prompt steps) without running");
  cmd->set_version_flag("--version", version);
  cmd->add_option("--dir", args->dir, "Install directory (default: .)");
  cmd->add_option("TASK=VALUE", args->answers,
                  "A task id or step name, and the answer (JSON, or text)")
      ->required();
  return cmd;
}

int DoAnswer(const AnswerArgs& args) {
  char buf[PATH_MAX];
  if (realpath(args.dir.c_str(), buf) == nullptr) {
    return Fail(Status::NotFound("no wizq run in " + args.dir +
                                 " (the directory does not exist)"));
  }
  QueueOptions qo;
  qo.install_dir = buf;
  // First a look only: a bad answer writes nothing at all.
  qo.mode = OpenMode::kReadOnly;
  std::unique_ptr<Queue> q;
  Status s = Queue::Open(qo, &q, nullptr);
  std::vector<FlagAnswer> answers;
  if (s.ok() && !q->state().started()) {
    s = Status::NotFound("no wizq run in " + args.dir);
  }
  if (s.ok()) s = Resolve(q->state(), args.answers, &answers);
  if (!s.ok()) return Fail(s);
  q.reset();
  if (answers.empty()) {
    std::fprintf(stderr, "wizq answer: already recorded; nothing to do\n");
    return kExitCompleted;
  }
  // Then as one more worker of the run: checked again under the lock, all
  // recorded in one batch or none.
  qo.mode = OpenMode::kAttach;
  // A dead run's Command attempts are the next `wizq run`'s to adopt.
  qo.reclaim_worker_claims = false;
  OpenReport report;
  s = Queue::Open(qo, &q, &report);
  if (s.ok() && report.action == OpenAction::kFinished) {
    s = Status::InvalidArgument("the run has finished; nothing waits");
  }
  if (s.ok()) {
    s = q->Transact([&](Txn& txn) {
      WIZQ_RETURN_IF_ERROR(Resolve(txn.state(), args.answers, &answers));
      for (const FlagAnswer& a : answers) {
        WIZQ_RETURN_IF_ERROR(txn.Answer(a.id, a.answer_json, "flag"));
      }
      return Status::OK();
    });
  }
  if (s.ok()) CrashPoint("answer.after_commit");
  Status c = q ? q->Close() : Status::OK();
  if (!s.ok()) return Fail(s);
  if (!c.ok()) return Fail(c);
  for (const FlagAnswer& a : answers) {
    std::fprintf(stderr, "wizq answer: task %lld answered %s\n",
                 static_cast<long long>(a.id), a.answer_json.c_str());
  }
  return kExitCompleted;
}

}  // namespace wizq
