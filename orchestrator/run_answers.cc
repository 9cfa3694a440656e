// --answer arguments, checked against the run before it is opened for
// writing (SPEC §10: a bad answer is exit 2 with nothing recorded).
#include "fs/env.h"
#include "orchestrator/run.h"
#include "orchestrator/run_loop.h"

namespace wizq {

Status CheckFlagAnswers(const RunOptions& options, const Workflow& workflow,
                        const std::string& install_dir,
                        const std::string& run_id,
                        std::vector<FlagAnswer>* out) {
  Env* env = options.env ? options.env : Env::Posix();
  std::unique_ptr<Queue> queue;
  const QueueState* state = nullptr;
  std::unique_ptr<Workflow> frozen;
  const Workflow* use = &workflow;
  if (!options.fresh && env->FileExists(WizardDir(install_dir))) {
    QueueOptions qo;
    qo.env = options.env;
    qo.install_dir = install_dir;
    qo.mode = OpenMode::kReadOnly;
    OpenReport report;
    WIZQ_RETURN_IF_ERROR(Queue::Open(qo, &queue, &report));
    const QueueState& st = queue->state();
    // A run this one resumes; any other would be archived (no task of it
    // can be answered).
    if (st.started() && st.run().run_id == run_id &&
        st.run().install_dir == install_dir) {
      state = &st;
      const std::string& wf = st.run().workflow;
      if (!wf.empty() && wf != workflow.frozen_json()) {
        WIZQ_RETURN_IF_ERROR(
            Workflow::Parse(wf, "the run's frozen workflow", &frozen));
        use = frozen.get();
      }
    }
  }
  return ResolveAnswers(*use, state, options.answers, /*allow_unbound=*/true,
                        out);
}

}  // namespace wizq
