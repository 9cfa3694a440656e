// The glue between the public API (include/wizq/) and the library: the
// bodies the FunctionExecutors run for handlers and for a PromptAnswerer,
// and the RunObserver that forwards to a wizq::Observer. Internal to
// embed/.
#ifndef WIZQ_EMBED_BRIDGE_H_
#define WIZQ_EMBED_BRIDGE_H_

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "orchestrator/observer.h"
#include "tasks/exec/function_executor.h"
#include "wizq/handler.h"
#include "wizq/observer.h"

namespace wizq {

// Handlers by name; shared with the attempt threads (which may outlive a
// run: see tasks/exec/function_executor.h).
using HandlerMap = std::map<std::string, Handler>;

// The body of Function attempts: looks up the action's handler in
// `handlers`, calls it with the attempt's TaskInfo and a token over the
// attempt's flag, and turns what it returns (or throws) into a result.
FunctionExecutor::Body HandlerBody(std::shared_ptr<const HandlerMap> handlers);

// The response text of `next` (an array of {"kind": STEP, "value": V}).
std::string ResponseOf(const std::vector<Spawn>& next);

// Prompt attempts answered by `answerer` (not owned), one question at a
// time. A task it gave up on is declined (not claimed again) by this
// executor for the rest of its life, so the run pauses.
std::unique_ptr<FunctionExecutor> NewAnswererExecutor(PromptAnswerer* answerer,
                                                      double grace_seconds);

// Forwards the run loop's events to `observer` (not owned, may be null).
class ObserverBridge : public RunObserver {
 public:
  explicit ObserverBridge(Observer* observer) : observer_(observer) {}
  void OnOpened(const std::string& run_id, const OpenReport& report,
                const Progress& p) override;
  void OnTaskStarted(const Task& task, int attempt, const Progress& p) override;
  void OnTaskFinished(const Task& task, const std::string& reason,
                      const std::string& message, bool will_retry, int spawned,
                      const Progress& p) override;
  void OnRunFinished(RunStatus status, const Progress& p) override;
  void OnNote(const std::string& message) override;
  void OnPaused(const std::vector<WaitingPrompt>& waiting,
                const Progress& p) override;

 private:
  Observer* observer_;
};

}  // namespace wizq

#endif  // WIZQ_EMBED_BRIDGE_H_
