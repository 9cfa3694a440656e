#include "cli/answer.h"

#include <limits.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/store_flags.h"
#include "orchestrator/run.h"
#include "queue/store.h"
#include "tasks/exec/prompt.h"
#include "tasks/workflow/prompt_answers.h"
#include "tasks/workflow/workflow.h"
#include "util/crash_point.h"
#include "util/exit_code.h"

namespace wizq {
namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "wizq answer: %s\n", s.message().c_str());
  return ExitCodeOfOpen(s);
}

// The run's frozen workflow, parsed.
Status ThawWorkflow(const RunInfo& run, std::unique_ptr<Workflow>* wf) {
  Status s = Workflow::Parse(run.workflow, "the run's workflow", wf);
  return s.ok() ? s : Status::Corruption(s.message());
}

// The answers checked against the run as `reads` sees it.
Status Resolve(StoreReads& reads, const std::vector<std::string>& args,
               std::vector<FlagAnswer>* out) {
  RunInfo run;
  WIZQ_RETURN_IF_ERROR(reads.GetRun(&run));
  std::unique_ptr<Workflow> wf;
  WIZQ_RETURN_IF_ERROR(ThawWorkflow(run, &wf));
  return ResolveAnswers(*wf, &reads, args, /*allow_unbound=*/false, out);
}

}  // namespace

CLI::App* AddAnswerCommand(CLI::App& app, AnswerArgs* args,
                           const std::string& version) {
  CLI::App* cmd = app.add_subcommand(
      "answer", "Answer a run's human gates (Prompt steps) without running");
  cmd->set_version_flag("--version", version);
  AddRunPlaceOptions(cmd, &args->place);
  cmd->add_option("TASK=VALUE", args->answers,
                  "A task id or step name, and the answer (JSON, or text)")
      ->required();
  return cmd;
}

int DoAnswer(const AnswerArgs& args) {
  StoreOptions so;
  // First a look only: a bad answer writes nothing at all.
  so.mode = OpenMode::kReadOnly;
  std::unique_ptr<Store> store;
  Status s = args.place.Open(so, &store);
  RunInfo run;
  if (s.ok()) s = store->GetRun(&run);
  if (s.ok() && run.run_id.empty()) {
    s = Status::NotFound("no wizq run " + args.place.Describe());
  }
  std::vector<FlagAnswer> answers;
  if (s.ok()) s = Resolve(*store, args.answers, &answers);
  if (!s.ok()) return Fail(s);
  store.reset();
  if (answers.empty()) {
    std::fprintf(stderr, "wizq answer: already recorded; nothing to do\n");
    return kExitCompleted;
  }
  // Then as one more worker of the run: checked again in the transaction,
  // all recorded in one batch or none.
  so.mode = OpenMode::kAttach;
  // A dead run's Command attempts are the next `wizq run`'s to adopt.
  so.reclaim_worker_claims = false;
  OpenReport report;
  RunPlace same = args.place;  // the run just read, even if another started
  same.run_id = run.run_id;
  s = same.Open(so, &store, &report);
  if (s.ok() && report.action == OpenAction::kFinished) {
    s = Status::InvalidArgument("the run has finished; nothing waits");
  }
  if (s.ok()) {
    s = store->Transact([&](StoreTxn& txn) {
      WIZQ_RETURN_IF_ERROR(Resolve(txn, args.answers, &answers));
      for (const FlagAnswer& a : answers) {
        WIZQ_RETURN_IF_ERROR(txn.Answer(a.id, a.answer_json, "flag"));
      }
      return Status::OK();
    });
  }
  if (s.ok()) CrashPoint("answer.after_commit");
  Status c = store ? store->Close() : Status::OK();
  if (!s.ok()) return Fail(s);
  if (!c.ok()) return Fail(c);
  for (const FlagAnswer& a : answers) {
    std::fprintf(stderr, "wizq answer: task %lld answered %s\n",
                 static_cast<long long>(a.id), a.answer_json.c_str());
  }
  return kExitCompleted;
}

}  // namespace wizq
