// The human gate's answers and responses (tasks/exec/prompt.h).
#include "tasks/exec/prompt.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "queue/task.h"
#include "tasks/workflow/json_messages.h"
#include "tasks/workflow/value_schema.h"
#include "tasks/workflow/workflow.h"
#include "util/canonical_json.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

using Json = nlohmann::json;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) b++;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) e--;
  return std::string(s.substr(b, e - b));
}

std::string JsonString(std::string_view s) {
  std::string out;
  JsonWriter(&out).String(s);
  return out;
}

std::string ChoiceList(const PromptSpec& p) {
  std::string out;
  for (const std::string& c : p.choices) {
    if (!out.empty()) out += ", ";
    out += Quote(c);
  }
  return out;
}

// y/yes/true -> "true", n/no/false -> "false", else "".
std::string YesNo(std::string_view text) {
  const std::string t = Lower(Trim(text));
  if (t == "y" || t == "yes" || t == "true") return "true";
  if (t == "n" || t == "no" || t == "false") return "false";
  return "";
}

}  // namespace

const char* PromptModeName(PromptSpec::Mode mode) {
  switch (mode) {
    case PromptSpec::Mode::kConfirm:
      return "confirm";
    case PromptSpec::Mode::kInput:
      return "input";
    case PromptSpec::Mode::kChoice:
      return "choice";
  }
  return "?";
}

const PromptSpec* PromptOf(const Workflow& workflow, const Task& task) {
  if (task.origin == Origin::kFinally) return nullptr;
  const Step* step = workflow.FindStep(task.type);
  if (step == nullptr || step->action.kind != Action::Kind::kPrompt) {
    return nullptr;
  }
  return step->action.prompt.get();
}

bool WaitsForAnswer(const Workflow& workflow, const Task& task) {
  return task.state == TaskState::kPending && task.answer.empty() &&
         PromptOf(workflow, task) != nullptr;
}

Status CheckAnswer(const PromptSpec& prompt, const std::string& answer_json) {
  Json a;
  try {
    a = Json::parse(answer_json);
  } catch (const Json::exception&) {
    return Status::InvalidArgument("the answer is not JSON");
  }
  switch (prompt.mode) {
    case PromptSpec::Mode::kConfirm:
      if (!a.is_boolean()) {
        return Status::InvalidArgument(
            "a confirm prompt takes true or false (or y, yes, n, no), " +
            Got(a));
      }
      return Status::OK();
    case PromptSpec::Mode::kInput:
      if (!a.is_string()) {
        return Status::InvalidArgument("an input prompt takes a string, " +
                                       Got(a));
      }
      if (prompt.answer_schema) {
        Status s = prompt.answer_schema->Validate(a);
        if (!s.ok()) {
          return Status::InvalidArgument(
              "the answer does not match the answer_schema: " + s.message());
        }
      }
      return Status::OK();
    case PromptSpec::Mode::kChoice:
      if (!a.is_string() ||
          std::find(prompt.choices.begin(), prompt.choices.end(),
                    a.get<std::string>()) == prompt.choices.end()) {
        return Status::InvalidArgument("the answer must be one of " +
                                       ChoiceList(prompt) + ", " + Got(a));
      }
      return Status::OK();
  }
  return Status::InvalidArgument("unknown prompt mode");
}

Status AnswerFromFlag(const PromptSpec& prompt, std::string_view text,
                      std::string* answer_json) {
  std::string canonical;
  if (prompt.mode == PromptSpec::Mode::kConfirm && !YesNo(text).empty()) {
    canonical = YesNo(text);
  } else if (!IsValidJson(text) || !CanonicalizeJson(text, &canonical).ok()) {
    canonical = JsonString(text);
  }
  WIZQ_RETURN_IF_ERROR(CheckAnswer(prompt, canonical));
  *answer_json = canonical;
  return Status::OK();
}

Status AnswerFromReply(const PromptSpec& prompt, std::string_view line,
                       std::string* answer_json) {
  const std::string reply = Trim(line);
  std::string candidate;
  switch (prompt.mode) {
    case PromptSpec::Mode::kConfirm:
      candidate = reply.empty() ? "false" : YesNo(reply);
      if (candidate.empty()) {
        return Status::InvalidArgument("please answer y or n");
      }
      break;
    case PromptSpec::Mode::kInput:
      candidate = reply.empty() && prompt.default_json ? *prompt.default_json
                                                       : JsonString(reply);
      break;
    case PromptSpec::Mode::kChoice:
      if (reply.empty() && prompt.default_json) {
        candidate = *prompt.default_json;
      } else if (!reply.empty() &&
                 std::all_of(reply.begin(), reply.end(), ::isdigit) &&
                 reply.size() < 6 && std::stoul(reply) >= 1 &&
                 std::stoul(reply) <= prompt.choices.size()) {
        candidate = JsonString(prompt.choices[std::stoul(reply) - 1]);
      } else {
        candidate = JsonString(reply);
      }
      break;
  }
  Status s = CheckAnswer(prompt, candidate);
  if (!s.ok()) {
    if (prompt.mode == PromptSpec::Mode::kChoice) {
      return Status::InvalidArgument(
          "please type one of " + ChoiceList(prompt) + " or its number (1-" +
          std::to_string(prompt.choices.size()) + ")");
    }
    return s;
  }
  *answer_json = candidate;
  return Status::OK();
}

std::string PromptQuestion(const PromptSpec& prompt) {
  switch (prompt.mode) {
    case PromptSpec::Mode::kConfirm:
      return prompt.message + " [y/N] ";
    case PromptSpec::Mode::kInput: {
      std::string d;
      if (prompt.default_json) {
        d = " [" + Json::parse(*prompt.default_json).get<std::string>() + "]";
      }
      return prompt.message + d + " ";
    }
    case PromptSpec::Mode::kChoice: {
      std::string out = prompt.message + "\n";
      for (size_t i = 0; i < prompt.choices.size(); i++) {
        out += "  " + std::to_string(i + 1) + ") " + prompt.choices[i] + "\n";
      }
      out += "choose 1-" + std::to_string(prompt.choices.size());
      if (prompt.default_json) {
        out +=
            " [" + Json::parse(*prompt.default_json).get<std::string>() + "]";
      }
      return out + ": ";
    }
  }
  return prompt.message + " ";
}

std::string PromptResponse(const Step& step, const std::string& answer_json,
                           const std::string& value_json) {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  if (!step.next.empty()) {
    w.BeginObject().Field("kind", step.next[0]);
    w.Key("value").BeginObject();
    w.Key("answer").RawValue(answer_json);
    w.Key("value").RawValue(value_json);
    w.EndObject().EndObject();
  }
  w.EndArray();
  return out;
}

}  // namespace wizq
