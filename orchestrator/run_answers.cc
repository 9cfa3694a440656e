// --answer arguments, checked against the run before it is opened for
// writing (SPEC §10: a bad answer is exit 2 with nothing recorded).
#include "fs/env.h"
#include "orchestrator/run_loop.h"
#include "queue/import.h"

namespace wizq {

Status CheckFlagAnswers(const RunLoop::Config& config, const Workflow& workflow,
                        const std::vector<std::string>& args,
                        std::vector<FlagAnswer>* out) {
  Env* env = config.env ? config.env : Env::Posix();
  std::unique_ptr<Queue> queue;
  const QueueState* state = nullptr;
  std::unique_ptr<Workflow> frozen;
  const Workflow* use = &workflow;
  if (!config.fresh && env->FileExists(WizardDir(config.install_dir))) {
    QueueOptions qo;
    qo.env = config.env;
    qo.install_dir = config.install_dir;
    qo.mode = OpenMode::kReadOnly;
    OpenReport report;
    WIZQ_RETURN_IF_ERROR(Queue::Open(qo, &queue, &report));
    const QueueState& st = queue->state();
    // A run this one resumes; any other would be archived (no task of it
    // can be answered).
    if (st.started() && st.run().run_id == config.run_id &&
        st.run().install_dir == config.install_dir) {
      state = &st;
      const std::string& wf = st.run().workflow;
      if (!wf.empty() && wf != workflow.frozen_json()) {
        WIZQ_RETURN_IF_ERROR(
            Workflow::Parse(wf, "the run's frozen workflow", &frozen));
        use = frozen.get();
      }
    }
  }
  // A fresh run that starts as an import has its tasks from the start.
  QueueState imported;
  if (state == nullptr && config.import != nullptr) {
    WIZQ_RETURN_IF_ERROR(ImportedState(*config.import, &imported));
    state = &imported;
  }
  return ResolveAnswers(*use, state, args, /*allow_unbound=*/true, out);
}

}  // namespace wizq
