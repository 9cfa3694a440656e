// An agent's response as agents write it (SPEC §9), made into the text
// that `done` validates exactly as a Command's stdout
// (tasks/workflow/response.h).
//
// Barnum's docs have the agent write its response "as a JSON array
// string", and LLM agents often wrap the array in Markdown or prose. So:
//  - a JSON string whose content is the response is unwrapped (once);
//  - an array inside a Markdown fence, or with text around it, is refused
//    with a message that says exactly that (the array is not guessed at:
//    an agent that adds prose may have meant something else);
//  - anything else is passed on as it is, for the validator to judge.
#ifndef WIZQ_AGENT_AGENT_RESPONSE_H_
#define WIZQ_AGENT_AGENT_RESPONSE_H_

#include <string>
#include <string_view>

#include "util/status.h"

namespace wizq {

// Sets *text to the response to validate; InvalidArgument (with what to
// do) when `raw` holds a JSON array inside a fence or with text around it.
Status AgentResponseText(std::string_view raw, std::string* text);

}  // namespace wizq

#endif  // WIZQ_AGENT_AGENT_RESPONSE_H_
