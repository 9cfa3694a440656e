// `wizq answer [--dir DIR] TASK=VALUE...` (SPEC §10): records answers for a
// run's human gates without running anything; a live run picks them up.
#ifndef WIZQ_CLI_ANSWER_H_
#define WIZQ_CLI_ANSWER_H_

#include <string>
#include <vector>

#include "queue/run_place.h"

namespace CLI {
class App;
}  // namespace CLI

namespace wizq {

class StoreReads;

struct AnswerArgs {
  RunPlace place;                    // --dir, --store, --schema, --run-id
  std::vector<std::string> answers;  // TASK=VALUE
};

// Adds the `answer` subcommand to `app`, filling *args when it is parsed.
CLI::App* AddAnswerCommand(CLI::App& app, AnswerArgs* args,
                           const std::string& version);

// Checks every answer (read-only), then records them all in one durable
// batch. Exit 0, 2 (a bad answer or no run: nothing written) or 3.
int DoAnswer(const AnswerArgs& args);

}  // namespace wizq

#endif  // WIZQ_CLI_ANSWER_H_
