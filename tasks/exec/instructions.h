// The Markdown instructions an agent receives with a Pool task (SPEC §9),
// generated exactly as Barnum generates them (barnum-circus/barnum,
// crates/barnum_config/src/docs.rs, generate_step_docs): the isolation
// preamble, `# Current Step: <name>`, the step's instructions text, then
// either `## Valid Responses` with one `### <next>` section per next step in
// order (its value_schema pretty-printed with sorted keys and an example,
// or "Accepts any JSON value.") or `## Terminal Step`.
#ifndef WIZQ_TASKS_INSTRUCTIONS_H_
#define WIZQ_TASKS_INSTRUCTIONS_H_

#include <cstdint>
#include <string>

#include "queue/task.h"
#include "tasks/workflow/workflow.h"

namespace wizq {

// The instructions for a task of `step`, a step of `wf`.
std::string StepInstructions(const Workflow& wf, const Step& step);

// What identifies one Pool attempt to its agent.
struct PayloadInfo {
  std::string run_id;
  std::string idempotency_key;
  std::string lease;  // empty: no lease fields (an agent `wizq run` started)
  double lease_seconds = 0;
  std::string install_dir;  // absolute: where the run's files are
};

// The payload of SPEC §9 as one JSON object (no newline): Barnum's
// {"task", "instructions", "timeout_seconds"} then wizq's task_id, attempt,
// lease, lease_seconds, run_id, idempotency_key and install_dir.
// timeout_seconds is the step's timeout (a Pool params.timeout included),
// or null.
std::string PoolPayload(const Workflow& wf, const Step& step, const Task& task,
                        const PayloadInfo& info);

}  // namespace wizq

#endif  // WIZQ_TASKS_INSTRUCTIONS_H_
