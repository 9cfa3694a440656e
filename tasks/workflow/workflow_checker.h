// The workflow checker: walks a workflow's JSON document, checks every
// field against SPEC §2 (names what is wrong, with the JSON path and the
// closest allowed name) and fills the parsed steps. Workflow::Parse
// (tasks/workflow/workflow.cc) parses the text and calls it. Internal to
// tasks/.
#ifndef WIZQ_TASKS_WORKFLOW_CHECKER_H_
#define WIZQ_TASKS_WORKFLOW_CHECKER_H_

#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fs/env.h"
#include "tasks/workflow/workflow.h"

namespace wizq::internal {

// What Parse builds.
struct WorkflowData {
  std::string entrypoint;
  std::vector<Step> steps;
  std::map<std::string, size_t, std::less<>> index;
  StepOptions default_options;
  std::string frozen_json;
  std::string base_dir;
};

// Checks `root` and fills `wf` (its steps, index and options); what is
// wrong goes to *findings (nothing is filled reliably then). Linked
// instructions are read through `env` (nullptr: Env::Posix(), relative to
// wf->base_dir); *links gets each one's JSON path and the text read, for
// Parse to freeze in its place.
void CheckWorkflow(const nlohmann::json& root, Env* env, WorkflowData* wf,
                   std::vector<Finding>* findings,
                   std::vector<std::pair<std::string, std::string>>* links);

}  // namespace wizq::internal

#endif  // WIZQ_TASKS_WORKFLOW_CHECKER_H_
