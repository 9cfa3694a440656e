#include "interop/barnum_config.h"

#include <cmath>

namespace wizq {

using Json = nlohmann::json;

namespace {

Status Field(const std::string& field, const std::string& what) {
  return Status::InvalidArgument(field + ": " + what);
}

// A v2 action {"kind", "params": {...}} flattened to the workflow form.
Json FlatAction(const Json& action, Json* step_options) {
  if (!action.is_object() || !action.contains("params") ||
      !action["params"].is_object()) {
    return action;
  }
  Json out = {{"kind", action.value("kind", Json())}};
  for (const auto& [key, value] : action["params"].items()) {
    if (key == "pool" || key == "root") continue;  // troupe settings
    if (key == "timeout") {  // a Pool action's own timeout
      if (!value.is_null() && step_options->is_object() &&
          !step_options->contains("timeout")) {
        (*step_options)["timeout"] = value;
      }
      continue;
    }
    out[key] = value;
  }
  return out;
}

Status MapStep(const Json& in, const std::string& field, Json* out) {
  if (!in.is_object()) {
    *out = in;  // Workflow::Parse says what is wrong
    return Status::OK();
  }
  Json options = in.value("options", Json::object());
  *out = Json::object();
  for (const auto& [key, value] : in.items()) {
    if (key == "options") continue;
    if (key == "pre" || key == "post") {
      if (value.is_null()) continue;
      return Field(field + "." + key,
                   "a Barnum " + key +
                       " hook cannot be carried across: wizq runs no "
                       "pre/post hooks (docs/INTEROP.md)");
    }
    if (key == "value_schema" && value.is_null()) continue;
    if (key == "finally") {
      if (value.is_string()) {
        (*out)["finally"] = {{"kind", "Command"}, {"script", value}};
      } else if (!value.is_null()) {
        (*out)["finally"] = value;
      }
      continue;
    }
    (*out)[key] = key == "action" ? FlatAction(value, &options) : value;
  }
  if (!options.is_object() || !options.empty()) (*out)["options"] = options;
  return Status::OK();
}

}  // namespace

Status BarnumConfigToWorkflow(const Json& config, const std::string& entrypoint,
                              std::string* workflow_json) {
  Json out = Json::object();
  Json options = config.value("options", Json::object());
  for (const auto& [key, value] : config.items()) {
    if (key == "$schema" || key == "options") continue;
    if (key == "max_concurrency") {  // the resolved form's only global
      if (!value.is_null() && options.is_object()) {
        options["max_concurrency"] = value;
      }
      continue;
    }
    if (key == "steps" && value.is_array()) {
      Json steps = Json::array();
      for (size_t i = 0; i < value.size(); i++) {
        Json step;
        WIZQ_RETURN_IF_ERROR(MapStep(
            value[i], "config.steps[" + std::to_string(i) + "]", &step));
        steps.push_back(std::move(step));
      }
      out["steps"] = std::move(steps);
      continue;
    }
    out[key] = value;
  }
  if (!options.is_object() || !options.empty()) out["options"] = options;
  if ((!out.contains("entrypoint") || out["entrypoint"].is_null()) &&
      !entrypoint.empty()) {
    out["entrypoint"] = entrypoint;
  }
  *workflow_json = out.dump();
  return Status::OK();
}

Json WorkflowToBarnumConfig(const Workflow& workflow, BarnumFormat format) {
  const bool v2 = format == BarnumFormat::kV2;
  Json config = Json::object();
  const int jobs = workflow.default_options().max_concurrency;
  if (jobs != StepOptions::kUnlimited) config["max_concurrency"] = jobs;
  Json steps = Json::array();
  Json frozen;  // the workflow as frozen, for actions Barnum has no kind for
  for (const Step& s : workflow.steps()) {
    Json step = {{"name", s.name}};
    if (!s.value_schema_json.empty()) {
      step["value_schema"] = Json::parse(s.value_schema_json);
    }
    Json params = Json::object();
    std::string kind = "Command";
    if (s.action.kind == Action::Kind::kPool) {
      kind = "Pool";
      params["instructions"] = s.action.instructions;
    } else if (s.action.kind == Action::Kind::kCommand) {
      params["script"] = s.action.script;
    } else {
      // Prompt, Function: wizq's own fields, which the import reads back
      // (Barnum itself cannot run such a step).
      if (frozen.is_null()) frozen = Json::parse(workflow.frozen_json());
      for (const Json& f : frozen["steps"]) {
        if (f["name"] != s.name) continue;
        params = f["action"];
        kind = params["kind"].get<std::string>();
        params.erase("kind");
      }
    }
    if (v2) {
      step["action"] = {{"kind", kind}, {"params", params}};
    } else {
      step["action"] = params;
      step["action"]["kind"] = kind;
    }
    step["next"] = s.next;
    if (s.finally_hook) step["finally"] = s.finally_hook->script;
    Json options = {
        {"max_retries", s.options.max_retries},
        {"retry_on_timeout", s.options.retry_on_timeout},
        {"retry_on_invalid_response", s.options.retry_on_invalid_response}};
    if (s.options.timeout_seconds) {
      options["timeout"] =
          static_cast<uint64_t>(std::ceil(*s.options.timeout_seconds));
    }
    step["options"] = options;
    steps.push_back(std::move(step));
  }
  config["steps"] = std::move(steps);
  return config;
}

}  // namespace wizq
