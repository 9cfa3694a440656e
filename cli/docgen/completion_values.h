// The values that completion reads from files: the steps of a workflow and
// the tasks of a run that wait for an answer (cli/docgen/completion.h).
#ifndef WIZQ_CLI_DOCGEN_COMPLETION_VALUES_H_
#define WIZQ_CLI_DOCGEN_COMPLETION_VALUES_H_

#include <string>
#include <vector>

namespace wizq::docgen {

struct Candidate {
  std::string value;
  std::string description;
};

// What the words before the one being completed said.
struct CompletionContext {
  std::string dir = ".";  // --dir
  std::string workflow;   // the WORKFLOW positional, if given
};

// The step names of ctx.workflow, or when none was given, of the workflow
// of the run in ctx.dir; each described by its action's kind. Empty when
// the file or the run cannot be read or is not valid.
std::vector<Candidate> StepNames(const CompletionContext& ctx);

// "ID=" for each task of the run in ctx.dir that waits for an answer,
// described as "STEP: message". The run is opened read-only, as `wizq
// status` opens it: no worker joins and nothing is written. Empty when
// there is no run or it cannot be read.
std::vector<Candidate> WaitingTasks(const CompletionContext& ctx);

// From now on, the process ends (SIGALRM, nothing printed) if it is still
// running after `ms` milliseconds; Disarm cancels it.
void ArmDeadline(int ms);
void DisarmDeadline();

}  // namespace wizq::docgen

#endif  // WIZQ_CLI_DOCGEN_COMPLETION_VALUES_H_
