// Barnum's Config entry <-> a wizq workflow (docs/INTEROP.md, "Config").
//
// A Barnum state log carries the config in Barnum's resolved form: every
// step with its merged `options`, no `entrypoint`, `finally` a shell
// script, and (v2) actions as {"kind", "params": {...}}. A config written
// in the workflow-file form (with `entrypoint` or top-level `options`, as
// the reference's examples suggest) is read too.
#ifndef WIZQ_INTEROP_BARNUM_CONFIG_H_
#define WIZQ_INTEROP_BARNUM_CONFIG_H_

#include <nlohmann/json.hpp>
#include <string>

#include "interop/barnum_log.h"
#include "tasks/workflow/workflow.h"
#include "util/status.h"

namespace wizq {

// Maps `config` to wizq workflow JSON (not yet validated: Workflow::Parse
// does that). `entrypoint` is used when the config names none. What wizq
// cannot run (pre/post hooks) is InvalidArgument naming the field, e.g.
// "config.steps[1].pre: ...".
Status BarnumConfigToWorkflow(const nlohmann::json& config,
                              const std::string& entrypoint,
                              std::string* workflow_json);

// The workflow in the resolved form `format` logs (kReference is written
// as kV1).
nlohmann::json WorkflowToBarnumConfig(const Workflow& workflow,
                                      BarnumFormat format);

}  // namespace wizq

#endif  // WIZQ_INTEROP_BARNUM_CONFIG_H_
