// Answers given on the command line (`wizq run --answer TASK=VALUE`,
// `wizq answer TASK=VALUE...`), checked before anything is written
// (SPEC §10): TASK is a task id, or a step name; VALUE is JSON when it
// parses, else a string.
#ifndef WIZQ_TASKS_PROMPT_ANSWERS_H_
#define WIZQ_TASKS_PROMPT_ANSWERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace wizq {

class StoreReads;
class Workflow;

struct FlagAnswer {
  int64_t id = 0;           // the task answered; 0 while bound to a step
  std::string step;         // by step name, not bound to a task yet
  std::string arg;          // TASK=VALUE as given, for messages
  std::string answer_json;  // canonical, fits the prompt
  // The task already has this very answer (a command re-run after a
  // crash): nothing to record. id and step are then 0 and empty.
  bool recorded = false;
};

// Checks `args` (each TASK=VALUE) against `workflow` and the run (nullptr: no
// run yet) and fills *out. An id must name a task that waits
// for an answer (a pending Prompt task with none recorded); a step name must
// name a Prompt step, and binds to its one waiting task. When
// `allow_unbound`, a step name with no task waiting yet (and none answered
// before) stays bound to the step, for the first of its tasks that reaches
// the gate. Identical answers for one task (or step) are one. Everything
// else is InvalidArgument naming the argument: a value that does not fit
// the prompt, an id that does not wait, a task answered before with
// another answer (the same answer again is `recorded`, a no-op, so the
// same command can be re-run after a crash), a name that matches several
// waiting tasks, two different answers for one task.
Status ResolveAnswers(const Workflow& workflow, StoreReads* run,
                      const std::vector<std::string>& args, bool allow_unbound,
                      std::vector<FlagAnswer>* out);

}  // namespace wizq

#endif  // WIZQ_TASKS_PROMPT_ANSWERS_H_
