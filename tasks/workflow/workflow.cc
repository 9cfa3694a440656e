#include "tasks/workflow/workflow.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "fs/env.h"
#include "fs/path.h"
#include "tasks/workflow/json_messages.h"
#include "tasks/workflow/jsonc.h"
#include "tasks/workflow/prompt_parse.h"
#include "tasks/workflow/value_schema.h"
#include "tasks/workflow/workflow_checker.h"

namespace wizq {

namespace {

using Json = nlohmann::json;

// ---------------------------------------------------------------------------
// JSON parsing with duplicate-key detection

// A nlohmann parser callback that tracks where the parser is and reports
// keys that appear twice in one object (nlohmann would keep the last).
class DuplicateKeyFinder {
 public:
  explicit DuplicateKeyFinder(std::vector<Finding>* findings)
      : findings_(findings) {}

  bool OnEvent(Json::parse_event_t event, const Json& parsed) {
    using E = Json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        PushFrame(event == E::array_start);
        break;
      case E::key:
        OnKey(parsed.get<std::string>());
        break;
      case E::object_end:
      case E::array_end:
        stack_.pop_back();
        AfterValue();
        break;
      case E::value:
        AfterValue();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_array = false;
    std::string path;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };

  void PushFrame(bool is_array) {
    Frame frame;
    frame.is_array = is_array;
    frame.path = ChildPath();
    stack_.push_back(std::move(frame));
  }

  std::string ChildPath() const {
    if (stack_.empty()) return "$";
    const Frame& top = stack_.back();
    return top.is_array ? IndexPath(top.path, top.index)
                        : KeyPath(top.path, top.key);
  }

  void OnKey(const std::string& key) {
    Frame& top = stack_.back();
    top.key = key;
    if (!top.keys.insert(key).second) {
      findings_->push_back(
          {KeyPath(top.path, key),
           "duplicate key " + Quote(key) +
               " in one object; keep only one (JSON parsers would silently "
               "use the last)"});
    }
  }

  void AfterValue() {
    if (!stack_.empty() && stack_.back().is_array) ++stack_.back().index;
  }

  std::vector<Finding>* findings_;
  std::vector<Frame> stack_;
};

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, ..."
// without the id, made safe for any bytes it quotes from the input.
std::string ParseErrorMessage(const Json::exception& e) {
  std::string what = e.what();
  size_t bracket = what.find("] ");
  if (bracket != std::string::npos) what = what.substr(bracket + 2);
  return Excerpt(what, 500);
}

// Strips comments and parses `text`. Problems become findings at "$" (or at
// the duplicate key's path).
bool ParseJsonc(std::string_view text, Json* root,
                std::vector<Finding>* findings) {
  std::string json;
  Status s = StripJsonc(text, &json);
  if (s.ok()) s = CheckJsonDepth(json);
  if (!s.ok()) {
    findings->push_back({"$", s.message()});
    return false;
  }
  DuplicateKeyFinder dups(findings);
  try {
    *root = Json::parse(json,
                        [&dups](int, Json::parse_event_t event, Json& parsed) {
                          return dups.OnEvent(event, parsed);
                        });
  } catch (const Json::exception& e) {
    findings->push_back({"$", "not valid JSON: " + ParseErrorMessage(e)});
    return false;
  }
  return true;  // duplicate keys aside, the document is usable
}

std::string FormatFindings(const std::string& source,
                           const std::vector<Finding>& findings) {
  std::string msg = source + ": " + std::to_string(findings.size()) +
                    (findings.size() == 1 ? " problem:" : " problems:");
  for (const Finding& f : findings) msg += "\n  " + f.path + ": " + f.message;
  return msg;
}

}  // namespace

struct Workflow::Impl : internal::WorkflowData {};

Workflow::Workflow(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Workflow::~Workflow() = default;

namespace {

// "$.steps[2].action.params.instructions" -> "/steps/2/action/params/...".
Json::json_pointer PointerOf(const std::string& path) {
  std::string p;
  for (size_t i = 1; i < path.size(); i++) {
    const char c = path[i];
    if (c == '.' || c == '[') {
      p.push_back('/');
    } else if (c != ']') {
      p.push_back(c);
    }
  }
  return Json::json_pointer(p);
}

}  // namespace

Status Workflow::Parse(std::string_view text, const std::string& source,
                       std::unique_ptr<Workflow>* out,
                       std::vector<Finding>* findings) {
  return ParseIn(text, source, "", nullptr, out, findings);
}

Status Workflow::ParseIn(std::string_view text, const std::string& source,
                         const std::string& base_dir, Env* env,
                         std::unique_ptr<Workflow>* out,
                         std::vector<Finding>* findings) {
  std::vector<Finding> found;
  auto impl = std::make_unique<Impl>();
  impl->base_dir = base_dir;
  Json root;
  std::vector<std::pair<std::string, std::string>> links;
  if (ParseJsonc(text, &root, &found)) {
    internal::CheckWorkflow(root, env, impl.get(), &found, &links);
  }
  if (findings) *findings = found;
  if (!found.empty()) {
    return Status::InvalidArgument(FormatFindings(source, found));
  }
  // Linked instructions are frozen as the text that was read.
  for (const auto& [path, text_read] : links) {
    root[PointerOf(path)] = Json{{"kind", "Inline"}, {"value", text_read}};
  }
  impl->frozen_json = root.dump();
  impl->base_dir.clear();
  out->reset(new Workflow(std::move(impl)));
  return Status::OK();
}

Status Workflow::Load(const std::string& path, std::unique_ptr<Workflow>* out,
                      std::vector<Finding>* findings, Env* env) {
  if (findings) findings->clear();
  if (env == nullptr) env = Env::Posix();
  std::string text;
  WIZQ_RETURN_IF_ERROR(env->ReadFile(path, &text));
  std::string dir = DirName(path);
  std::string base_dir;
  WIZQ_RETURN_IF_ERROR(RealPath(dir, &base_dir));
  std::unique_ptr<Workflow> wf;
  WIZQ_RETURN_IF_ERROR(ParseIn(text, path, base_dir, env, &wf, findings));
  wf->set_base_dir(std::move(base_dir));
  *out = std::move(wf);
  return Status::OK();
}

const std::string& Workflow::entrypoint() const { return impl_->entrypoint; }
const std::vector<Step>& Workflow::steps() const { return impl_->steps; }

const Step* Workflow::FindStep(std::string_view name) const {
  auto it = impl_->index.find(name);
  return it == impl_->index.end() ? nullptr : &impl_->steps[it->second];
}

const StepOptions& Workflow::default_options() const {
  return impl_->default_options;
}
const std::string& Workflow::frozen_json() const { return impl_->frozen_json; }
const std::string& Workflow::base_dir() const { return impl_->base_dir; }
void Workflow::set_base_dir(std::string dir) {
  impl_->base_dir = std::move(dir);
}

Status Workflow::ValidateValue(std::string_view step,
                               std::string_view value_json) const {
  const Step* found = FindStep(step);
  if (!found) return Status::InvalidArgument("unknown step " + Quote(step));
  WIZQ_RETURN_IF_ERROR(CheckJsonDepth(value_json));
  Json value;
  try {
    value = Json::parse(value_json);
  } catch (const Json::exception& e) {
    return Status::InvalidArgument("value is not valid JSON: " +
                                   ParseErrorMessage(e));
  }
  return ValidateStepValue(*found, value);
}

}  // namespace wizq
