// Parsing of a Prompt action's fields, for the workflow checker
// (tasks/workflow/workflow.cc). Internal to tasks/.
#ifndef WIZQ_TASKS_PROMPT_PARSE_H_
#define WIZQ_TASKS_PROMPT_PARSE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tasks/workflow/workflow.h"

namespace wizq {

// Reads `v`, an action object whose kind is "Prompt" at JSON path `path`,
// into *out (kind kPrompt with its PromptSpec). Every problem is appended to
// *findings at its JSON path; returns whether there was none.
bool ParsePromptAction(const nlohmann::json& v, const std::string& path,
                       std::vector<Finding>* findings, Action* out);

// Checks what a Prompt step needs of the step around it: at most one step
// in `next` (the answer goes to next[0]). Appends findings at `path` (the
// step's path).
void CheckPromptStep(const Step& step, const std::string& path,
                     std::vector<Finding>* findings);

}  // namespace wizq

#endif  // WIZQ_TASKS_PROMPT_PARSE_H_
