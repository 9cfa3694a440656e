// The human gate (SPEC §10): a Prompt step asks a person a question and
// turns the answer into the step's response.
//
//   { "kind": "Prompt", "mode": "confirm" | "input" | "choice",
//     "message": "Install into /opt/app?",
//     "choices": ["minimal", "full"],   // choice only, required there
//     "default": true,                  // optional; must fit the mode
//     "answer_schema": { ... } }        // input only, optional JSON Schema
//
// A confirm answer is a boolean, an input answer a string (checked against
// answer_schema when given), a choice answer one of `choices`. The answer
// becomes the response `[{"kind": next[0], "value": {"answer": A, "value":
// V}}]` (V: the prompt task's own value), or `[]` for a terminal step; a
// Prompt step has at most one step in `next`.
//
// This header holds what both the run and `wizq answer` need: the parsed
// prompt (PromptSpec), reading an answer from a --answer flag or a terminal
// reply, checking one, and building the response.
#ifndef WIZQ_TASKS_PROMPT_H_
#define WIZQ_TASKS_PROMPT_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace wizq {

class ValueSchema;
struct Step;
struct Task;
class Workflow;

struct PromptSpec {
  enum class Mode { kConfirm, kInput, kChoice };
  Mode mode = Mode::kConfirm;
  std::string message;
  std::vector<std::string> choices;                  // kChoice
  std::optional<std::string> default_json;           // canonical JSON, if any
  std::string answer_schema_json;                    // kInput; empty if none
  std::shared_ptr<const ValueSchema> answer_schema;  // null if none
};

const char* PromptModeName(PromptSpec::Mode mode);

// The prompt of `task`'s action in `workflow`, or nullptr when the task is
// not a Prompt task (a finally hook never is).
const PromptSpec* PromptOf(const Workflow& workflow, const Task& task);

// Whether `task` waits for an answer: a pending Prompt task with none
// recorded.
bool WaitsForAnswer(const Workflow& workflow, const Task& task);

// OK when `answer_json` (canonical JSON) fits the prompt: a boolean for
// confirm, a string matching answer_schema for input, one of the choices
// for choice. InvalidArgument otherwise, saying what would fit.
Status CheckAnswer(const PromptSpec& prompt, const std::string& answer_json);

// The answer given as VALUE in `--answer TASK=VALUE` / `wizq answer`: JSON
// when it parses, else the text as a string; for confirm also y/yes/n/no in
// any case. *answer_json is canonical and checked (CheckAnswer).
Status AnswerFromFlag(const PromptSpec& prompt, std::string_view text,
                      std::string* answer_json);

// A reply typed on a terminal (one line, without its newline). confirm:
// y/yes/true or n/no/false in any case, an empty line = no; input: the text
// (an empty line takes the default, if any); choice: a choice or its number
// from 1 (an empty line takes the default, if any). InvalidArgument (with
// what to type) for a reply that cannot be read.
Status AnswerFromReply(const PromptSpec& prompt, std::string_view line,
                       std::string* answer_json);

// The question as shown on a terminal, ending in the reply hint, e.g.
// "Install into /opt/app? [y/N] " (choices are listed on lines above).
std::string PromptQuestion(const PromptSpec& prompt);

// The response a Prompt task gives for `answer_json` (SPEC §10).
std::string PromptResponse(const Step& step, const std::string& answer_json,
                           const std::string& value_json);

}  // namespace wizq

#endif  // WIZQ_TASKS_PROMPT_H_
