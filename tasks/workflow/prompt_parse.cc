// Parsing and checking Prompt actions (tasks/workflow/prompt_parse.h).
#include "tasks/workflow/prompt_parse.h"

#include <set>

#include "tasks/exec/prompt.h"
#include "tasks/workflow/json_messages.h"
#include "tasks/workflow/value_schema.h"
#include "util/canonical_json.h"

namespace wizq {
namespace {

using Json = nlohmann::json;

class PromptParser {
 public:
  PromptParser(const std::string& path, std::vector<Finding>* findings)
      : path_(path), findings_(findings) {}

  bool Parse(const Json& v, PromptSpec* spec) {
    const size_t before = findings_->size();
    for (const auto& [key, unused] : v.items()) {
      if (key != "kind" && key != "mode" && key != "message" &&
          key != "choices" && key != "default" && key != "answer_schema") {
        Add(key, "unknown field " + Quote(key) +
                     " in an action of kind Prompt (allowed: kind, mode, "
                     "message, choices, default, answer_schema)");
      }
    }
    if (ParseMode(v, spec)) {
      ParseMessage(v, spec);
      ParseChoices(v, spec);
      ParseSchema(v, spec);
      ParseDefault(v, spec);
    }
    return findings_->size() == before;
  }

 private:
  void Add(const std::string& key, std::string message) {
    findings_->push_back(
        {key.empty() ? path_ : KeyPath(path_, key), std::move(message)});
  }

  bool ParseMode(const Json& v, PromptSpec* spec) {
    auto it = v.find("mode");
    if (it == v.end()) {
      Add("",
          "missing required field \"mode\" (\"confirm\", \"input\" or "
          "\"choice\")");
      return false;
    }
    const std::string mode = it->is_string() ? it->get<std::string>() : "";
    if (mode == "confirm") {
      spec->mode = PromptSpec::Mode::kConfirm;
    } else if (mode == "input") {
      spec->mode = PromptSpec::Mode::kInput;
    } else if (mode == "choice") {
      spec->mode = PromptSpec::Mode::kChoice;
    } else {
      Add("mode", "must be \"confirm\", \"input\" or \"choice\", " + Got(*it));
      return false;
    }
    return true;
  }

  void ParseMessage(const Json& v, PromptSpec* spec) {
    auto it = v.find("message");
    if (it == v.end()) {
      Add("", "missing required field \"message\" (the question to ask)");
    } else if (!it->is_string() || it->get<std::string>().empty()) {
      Add("message", "must be a non-empty string (the question), " + Got(*it));
    } else {
      spec->message = it->get<std::string>();
    }
  }

  void ParseChoices(const Json& v, PromptSpec* spec) {
    auto it = v.find("choices");
    const bool choice = spec->mode == PromptSpec::Mode::kChoice;
    if (it == v.end()) {
      if (choice) {
        Add("",
            "missing required field \"choices\" (a mode \"choice\" "
            "prompt needs a non-empty array of strings)");
      }
      return;
    }
    if (!choice) {
      Add("choices", "is only for mode \"choice\"");
      return;
    }
    if (!it->is_array() || it->empty()) {
      Add("choices", "must be a non-empty array of strings, " + Got(*it));
      return;
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& c = (*it)[i];
      const std::string p = IndexPath(KeyPath(path_, "choices"), i);
      if (!c.is_string() || c.get<std::string>().empty()) {
        findings_->push_back({p, "must be a non-empty string, " + Got(c)});
      } else if (!seen.insert(c.get<std::string>()).second) {
        findings_->push_back(
            {p, "duplicate choice " + Quote(c.get<std::string>())});
      } else {
        spec->choices.push_back(c.get<std::string>());
      }
    }
  }

  void ParseSchema(const Json& v, PromptSpec* spec) {
    auto it = v.find("answer_schema");
    if (it == v.end() || it->is_null()) return;
    if (spec->mode != PromptSpec::Mode::kInput) {
      Add("answer_schema", "is only for mode \"input\"");
      return;
    }
    std::unique_ptr<ValueSchema> compiled;
    Status s = ValueSchema::Compile(*it, &compiled);
    if (!s.ok()) {
      Add("answer_schema", s.message());
      return;
    }
    spec->answer_schema_json = it->dump();
    spec->answer_schema = std::move(compiled);
  }

  void ParseDefault(const Json& v, PromptSpec* spec) {
    auto it = v.find("default");
    if (it == v.end() || it->is_null()) return;
    std::string canonical;
    Status s = CanonicalizeJson(it->dump(), &canonical);
    if (s.ok()) s = CheckAnswer(*spec, canonical);
    if (!s.ok()) {
      Add("default", "does not fit the prompt: " + s.message());
      return;
    }
    spec->default_json = canonical;
  }

  const std::string& path_;
  std::vector<Finding>* findings_;
};

}  // namespace

bool ParsePromptAction(const Json& v, const std::string& path,
                       std::vector<Finding>* findings, Action* out) {
  auto spec = std::make_shared<PromptSpec>();
  out->kind = Action::Kind::kPrompt;
  const bool ok = PromptParser(path, findings).Parse(v, spec.get());
  out->prompt = std::move(spec);
  return ok;
}

void CheckPromptStep(const Step& step, const std::string& path,
                     std::vector<Finding>* findings) {
  if (step.action.kind != Action::Kind::kPrompt || step.next.size() <= 1) {
    return;
  }
  findings->push_back(
      {KeyPath(path, "next"),
       "a Prompt step passes its answer to one step: \"next\" may name at "
       "most one step (the next step decides what the answer means)"});
}

}  // namespace wizq
