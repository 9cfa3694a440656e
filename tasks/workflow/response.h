// Responses: what a task prints on stdout, checked against the workflow
// (SPEC §3).
//
// A response is a JSON array of next tasks, `[{"kind": <step>, "value":
// <json>}, ...]`; `[]` ends the chain. It is valid when every element is an
// object with exactly the fields "kind" (a string) and "value" (any JSON,
// required, as in Barnum), every kind may follow the task's step, and every
// value matches the value_schema of the step it names. Anything else (empty
// output, non-JSON, invalid UTF-8, nesting deeper than kMaxJsonDepth) is an
// `invalid_response`, and the Status message, which says exactly what was
// wrong and where (element index, kind, schema violation with its JSON
// path), is the failure reason recorded for the attempt.
//
// Deliberate differences from Barnum: the text must be strict JSON (Barnum
// accepts JSON5), and unknown fields in an element are rejected rather than
// ignored, so a misspelt field is caught at once.
//
// All functions are thread-safe.
#ifndef WIZQ_TASKS_RESPONSE_H_
#define WIZQ_TASKS_RESPONSE_H_

#include <string>
#include <string_view>
#include <vector>

#include "queue/task.h"
#include "tasks/workflow/workflow.h"
#include "util/status.h"

namespace wizq {

struct NextTask {
  std::string kind;        // a step of the workflow
  std::string value_json;  // the value as minified JSON (keys sorted)
};

// Parses the stdout of a task of step `from` (a step of `wf`): each kind
// must be in from.next. On success *out holds the tasks in order; on
// failure InvalidArgument and *out is empty.
Status ParseResponse(const Workflow& wf, const Step& from,
                     std::string_view stdout_text, std::vector<NextTask>* out);

// The same for the stdout of a `finally` hook, whose tasks may name any step
// of the workflow (SPEC §2); they attach to the parent of the hook's task.
Status ParseHookResponse(const Workflow& wf, std::string_view stdout_text,
                         std::vector<NextTask>* out);

// --- Response -> children --------------------------------------------------
//
// The one place that turns a response into the tasks to submit, shared by
// the run loop (a Command's stdout), agents (`wizq agent done` validates a
// response exactly as a Command's stdout) and the reuse of earlier results.

// Validates `response`, the response of `task` (its stdout, an agent's
// answer, ...), as ParseResponse does for a task of a step, or as
// ParseHookResponse for a finally hook's task, and builds the children to
// submit with its completion. InvalidArgument (and *children empty) when
// the response is invalid or the task's step is not in `wf`.
Status ChildrenOf(const Workflow& wf, const Task& task,
                  std::string_view response, std::vector<NewTask>* children);

// The children of `task` for an already parsed response: a task's children
// attach to it, a finally hook's to the parent of the hook's owner
// (SPEC §2). Each kind must be a step of `wf` (as ParseResponse ensures).
std::vector<NewTask> ChildrenOf(const Workflow& wf, const Task& task,
                                std::vector<NextTask> next);

// The first task of a run: the entrypoint with the run's input.
NewTask RootTask(const Workflow& wf, std::string input_json);

// The finally hook of `owner`, due once its subtree has settled: same step
// and value, attached to the owner's parent.
NewTask FinallyHookOf(const Workflow& wf, const Task& owner);

// Checks the --input value of a run: JSON text that must match the
// entrypoint's value_schema. InvalidArgument says what is wrong.
Status ValidateEntryInput(const Workflow& wf, std::string_view input_json);

}  // namespace wizq

#endif  // WIZQ_TASKS_RESPONSE_H_
