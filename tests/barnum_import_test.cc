// Reading Barnum state logs and Barnum's reconstruction (SPEC §12,
// docs/INTEROP.md): the three log shapes, every reconstruction case, bad
// logs, and the queue's import of the result (crash at every operation
// included). The real binary is exercised in tests/barnum_cli_test.cc.
#include "interop/barnum_import.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fs/fault_env.h"
#include "interop/barnum_log.h"
#include "queue/dir/queue.h"
#include "queue/import.h"
#include "tests/queue_test_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

namespace fs = std::filesystem;
using C = BarnumClass;

// Root spawns Child tasks (max_retries 0, has a finally hook); Child may
// spawn Child (max_retries 2).
const char kConfigV1[] =
    R"({"kind":"Config","config":{"steps":[)"
    R"({"name":"Root","action":{"kind":"Command","script":"true"},)"
    R"("next":["Child"],"finally":"true","options":{"max_retries":0,)"
    R"("retry_on_timeout":true,"retry_on_invalid_response":true}},)"
    R"({"name":"Child","action":{"kind":"Command","script":"true"},)"
    R"("next":["Child"],"options":{"max_retries":2,"retry_on_timeout":true,)"
    R"("retry_on_invalid_response":true}}]}})";
const char kConfigV2[] =
    R"({"kind":"Config","config":{"steps":[)"
    R"({"name":"Root","action":{"kind":"Command","params":{"script":"true"}},)"
    R"("next":["Child"],"finally":"true","options":{"max_retries":0,)"
    R"("retry_on_timeout":true,"retry_on_invalid_response":true}},)"
    R"({"name":"Child","action":{"kind":"Command","params":{"script":"true"}},)"
    R"("next":["Child"],"options":{"max_retries":2,"retry_on_timeout":true,)"
    R"("retry_on_invalid_response":true}}]}})";

std::string Parent(int p) { return p < 0 ? "null" : std::to_string(p); }

// v1 lines.
std::string Sub(int id, const std::string& step, int parent,
                const std::string& origin = R"({"kind":"Spawned"})") {
  return R"({"kind":"TaskSubmitted","task_id":)" + std::to_string(id) +
         R"(,"step":")" + step + R"(","value":{"n":)" + std::to_string(id) +
         R"(},"parent_id":)" + Parent(parent) + R"(,"origin":)" + origin + "}";
}
std::string Seed(int id) {
  return Sub(id, "Root", -1, R"({"kind":"Initial"})");
}
std::string Ok(int id, const std::string& spawned = "") {
  return R"({"kind":"TaskCompleted","task_id":)" + std::to_string(id) +
         R"(,"outcome":{"kind":"Success","value":{"spawned_task_ids":[)" +
         spawned + R"(],"finally_value":{"n":)" + std::to_string(id) + "}}}}";
}
std::string Fail(int id, int retry = -1) {
  return R"({"kind":"TaskCompleted","task_id":)" + std::to_string(id) +
         R"(,"outcome":{"kind":"Failed","value":{"reason":{"kind":"Timeout"},)"
         R"("retry_task_id":)" +
         Parent(retry) + "}}}";
}
std::string Retry(int id, int replaces, int parent) {
  return Sub(id, "Child", parent,
             R"({"kind":"Retry","replaces":)" + std::to_string(replaces) + "}");
}

std::string Lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

struct Result {
  Status status;
  BarnumLog log;
  BarnumImport imp;
  // The wizq task standing for Barnum task `b` (nullptr if none).
  const ImportedTask* Of(uint32_t b) const {
    for (size_t i = 0; i < imp.ids.size(); i++) {
      for (uint32_t x : imp.ids[i]) {
        if (x == b) return &imp.run.tasks[i];
      }
    }
    return nullptr;
  }
  int64_t IdOf(uint32_t b) const {
    for (size_t i = 0; i < imp.ids.size(); i++) {
      for (uint32_t x : imp.ids[i]) {
        if (x == b) return static_cast<int64_t>(i) + 1;
      }
    }
    return 0;
  }
};

Result Import(const std::string& text) {
  Result r;
  r.status = ReadBarnumLog("state.ndjson", text, &r.log);
  if (r.status.ok()) r.status = ImportBarnumLog(r.log, "test", &r.imp);
  return r;
}

std::string Bad(const std::string& text) {
  Result r = Import(text);
  EXPECT_TRUE(r.status.IsInvalidArgument()) << r.status.ToString();
  return r.status.message();
}

TEST(BarnumLogTest, TellsTheThreeShapesApart) {
  Result ref = Import(Lines(
      {kConfigV1,
       R"({"kind":"TaskSubmitted","task_id":0,"step":"Root","value":{},"parent_id":null,"origin":"Initial"})",
       R"({"kind":"TaskCompleted","task_id":0,"outcome":{"kind":"Success","value":{"spawned_task_ids":[1]}}})",
       R"({"kind":"TaskSubmitted","task_id":1,"step":"Child","value":{},"parent_id":0,"origin":"Spawned"})",
       R"({"kind":"TaskCompleted","task_id":1,"outcome":{"kind":"Failed","value":{"reason":{"kind":"Timeout"},"retry_task_id":2}}})",
       R"({"kind":"TaskSubmitted","task_id":2,"step":"Child","value":{},"parent_id":0,"origin":{"Retry":{"replaces":1}}})"}));
  ASSERT_TRUE(ref.status.ok()) << ref.status.ToString();
  EXPECT_EQ(ref.log.format, BarnumFormat::kReference);
  EXPECT_EQ(ref.imp.classes.at(2), C::kPending);

  Result v1 =
      Import(Lines({kConfigV1, Seed(0), Ok(0, "1"), Sub(1, "Child", 0)}));
  ASSERT_TRUE(v1.status.ok()) << v1.status.ToString();
  EXPECT_EQ(v1.log.format, BarnumFormat::kV1);

  Result v2 = Import(Lines(
      {kConfigV2,
       R"({"kind":"TaskSubmitted","task_id":0,"step":"Root","value":{},"origin":{"kind":"Seed"}})",
       R"({"kind":"TaskCompleted","task_id":0,"outcome":{"kind":"Success","value":{"finally_value":{},"children":[{"task_id":1,"step":"Child","value":{},"origin":{"kind":"Spawned","parent_id":0}}]}}})",
       R"({"kind":"TaskCompleted","task_id":1,"outcome":{"kind":"Failed","value":{"reason":{"kind":"InvalidResponse","message":"bad"},"retry":{"task_id":2,"step":"Child","value":{},"origin":{"kind":"Retry","replaces":1}}}}})"}));
  ASSERT_TRUE(v2.status.ok()) << v2.status.ToString();
  EXPECT_EQ(v2.log.format, BarnumFormat::kV2);
  // A v2 retry inherits the replaced task's parent.
  EXPECT_EQ(v2.log.tasks.at(2).parent, 0u);
  const ImportedTask* chain = v2.Of(2);
  ASSERT_NE(chain, nullptr);
  EXPECT_EQ(chain->state, TaskState::kPending);
  ASSERT_EQ(chain->failures.size(), 1u);
  EXPECT_EQ(chain->failures[0].reason, kReasonInvalidResponse);
  EXPECT_EQ(chain->failures[0].message, "bad");
}

TEST(BarnumReconstructTest, SubmittedNeverCompletedIsPending) {
  Result r = Import(Lines({kConfigV1, Seed(0)}));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.imp.classes.at(0), C::kPending);
  EXPECT_EQ(r.Of(0)->state, TaskState::kPending);
  EXPECT_EQ(r.imp.run.tasks_pending, 1);
}

TEST(BarnumReconstructTest, CompletedWithPendingChildrenWaitsAndIsNotRerun) {
  Result r = Import(Lines({kConfigV1, Seed(0), Ok(0, "1,2"), Sub(1, "Child", 0),
                           Sub(2, "Child", 0), Ok(1)}));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.imp.classes.at(0), C::kWaiting);
  EXPECT_EQ(r.imp.classes.at(1), C::kDone);
  EXPECT_EQ(r.imp.classes.at(2), C::kPending);
  // Waiting is done in wizq (not run again); its subtree is still open.
  EXPECT_EQ(r.Of(0)->state, TaskState::kDone);
  EXPECT_EQ(r.Of(0)->spawned, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.Of(2)->state, TaskState::kPending);
  EXPECT_EQ(r.imp.run.tasks_waiting, 1);
}

TEST(BarnumReconstructTest, CompletedWithAllChildrenDoneIsDone) {
  Result r = Import(Lines(
      {kConfigV1, Seed(0), Ok(0, "1"), Sub(1, "Child", 0), Ok(1),
       Sub(2, "Root", -1, R"({"kind":"Finally","finally_for":0})"), Ok(2)}));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (uint32_t id : {0u, 1u, 2u}) EXPECT_EQ(r.imp.classes.at(id), C::kDone);
  EXPECT_EQ(r.imp.run.tasks_done, 3);
}

TEST(BarnumReconstructTest, FailedWithRetryIsOneTaskWithAnAttemptSpent) {
  Result r = Import(Lines({kConfigV1, Seed(0), Ok(0, "1"), Sub(1, "Child", 0),
                           Fail(1, 2), Retry(2, 1, 0)}));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.imp.classes.at(1), C::kDone);  // the retry handles it
  EXPECT_EQ(r.imp.classes.at(2), C::kPending);
  EXPECT_EQ(r.Of(1), r.Of(2));  // one chain, one wizq task
  EXPECT_EQ(r.Of(2)->state, TaskState::kPending);
  EXPECT_EQ(r.Of(2)->failures.size(), 1u);
  EXPECT_EQ(r.Of(2)->task.max_attempts, 3);  // 2 more attempts left
  EXPECT_EQ(r.imp.run.tasks.size(), 2u);
}

TEST(BarnumReconstructTest, FailedWithoutRetryIsDroppedAsFailed) {
  Result r = Import(
      Lines({kConfigV1, Seed(0), Ok(0, "1"), Sub(1, "Child", 0), Fail(1)}));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.imp.classes.at(1), C::kDone);
  EXPECT_EQ(r.imp.classes.at(0), C::kDone);
  EXPECT_EQ(r.Of(1)->state, TaskState::kFailed);
  EXPECT_EQ(r.Of(1)->failures[0].reason, kReasonTimeout);
}

TEST(BarnumReconstructTest, RetryChainConsumesTheBudget) {
  // max_retries 2: two retries spent, the third attempt is pending and is
  // the last one.
  Result left =
      Import(Lines({kConfigV1, Seed(0), Ok(0, "1"), Sub(1, "Child", 0),
                    Fail(1, 2), Retry(2, 1, 0), Fail(2, 3), Retry(3, 2, 0)}));
  ASSERT_TRUE(left.status.ok()) << left.status.ToString();
  const ImportedTask* t = left.Of(3);
  EXPECT_EQ(t->state, TaskState::kPending);
  EXPECT_EQ(t->failures.size(), 2u);
  EXPECT_EQ(t->task.max_attempts, 3);
  // All three failed: the chain is failed, budget used up.
  Result used = Import(
      Lines({kConfigV1, Seed(0), Ok(0, "1"), Sub(1, "Child", 0), Fail(1, 2),
             Retry(2, 1, 0), Fail(2, 3), Retry(3, 2, 0), Fail(3)}));
  ASSERT_TRUE(used.status.ok()) << used.status.ToString();
  EXPECT_EQ(used.Of(3)->state, TaskState::kFailed);
  EXPECT_EQ(used.Of(3)->failures.size(), 3u);
  EXPECT_EQ(used.imp.classes.at(0), C::kDone);
}

TEST(BarnumReconstructTest, AliveGrandchildrenKeepTheGrandparentWaiting) {
  Result r = Import(Lines({kConfigV1, Seed(0), Ok(0, "1"), Sub(1, "Child", 0),
                           Ok(1, "2"), Sub(2, "Child", 1)}));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.imp.classes.at(0), C::kWaiting);
  EXPECT_EQ(r.imp.classes.at(1), C::kWaiting);
  EXPECT_EQ(r.imp.classes.at(2), C::kPending);
}

TEST(BarnumReconstructTest, FinallyHookSubmittedAndYetToFire) {
  // v1: the hook of 0 was submitted (its children are done) but not run.
  Result sub = Import(
      Lines({kConfigV1, Seed(0), Ok(0, "1"), Sub(1, "Child", 0), Ok(1),
             Sub(2, "Root", -1, R"({"kind":"Finally","finally_for":0})")}));
  ASSERT_TRUE(sub.status.ok()) << sub.status.ToString();
  EXPECT_EQ(sub.imp.classes.at(0), C::kWaiting);
  EXPECT_EQ(sub.imp.classes.at(2), C::kPending);
  EXPECT_EQ(sub.Of(2)->task.origin, Origin::kFinally);
  EXPECT_EQ(sub.Of(2)->task.finally_for, sub.IdOf(0));
  EXPECT_TRUE(sub.Of(0)->task.has_finally);
  // Yet to fire: its owner is waiting for a child; no hook task exists, the
  // owner is marked as having one (wizq fires it when the child is done).
  Result due =
      Import(Lines({kConfigV1, Seed(0), Ok(0, "1"), Sub(1, "Child", 0)}));
  ASSERT_TRUE(due.status.ok()) << due.status.ToString();
  EXPECT_TRUE(due.Of(0)->task.has_finally);
  EXPECT_EQ(due.imp.run.tasks.size(), 2u);
  // v2: a FinallyRun is a done Finally task.
  Result v2 = Import(Lines(
      {kConfigV2,
       R"({"kind":"TaskSubmitted","task_id":0,"step":"Root","value":{"a":1},"origin":{"kind":"Seed"}})",
       R"({"kind":"TaskCompleted","task_id":0,"outcome":{"kind":"Success","value":{"finally_value":{"a":2},"children":[{"task_id":1,"step":"Child","value":{},"origin":{"kind":"Spawned","parent_id":0}}]}}})",
       R"({"kind":"TaskCompleted","task_id":1,"outcome":{"kind":"Success","value":{"finally_value":{},"children":[]}}})",
       R"({"kind":"FinallyRun","finally_for":0,"children":[{"task_id":2,"step":"Child","value":{},"origin":{"kind":"Spawned"}}]})"}));
  ASSERT_TRUE(v2.status.ok()) << v2.status.ToString();
  ASSERT_EQ(v2.imp.run.tasks.size(), 4u);
  const ImportedTask& hook = v2.imp.run.tasks[3];
  EXPECT_EQ(hook.task.origin, Origin::kFinally);
  EXPECT_EQ(hook.task.finally_for, 1);
  EXPECT_EQ(hook.task.inputs, R"({"a":2})");  // the finally_value
  EXPECT_EQ(hook.state, TaskState::kDone);
  EXPECT_EQ(hook.spawned, (std::vector<int64_t>{3}));
  EXPECT_EQ(v2.imp.classes.at(2), C::kPending);
}

// Opens a queue in `dir` that starts as `imp`.
Status OpenImported(const std::string& dir, const BarnumImport& imp, Env* env,
                    std::unique_ptr<Queue>* q) {
  QueueOptions o;
  o.env = env;
  o.install_dir = dir;
  o.run_id = "b-test";
  o.workflow_json = imp.workflow_json;
  o.import = &imp.run;
  o.entry_input = "null";
  OpenReport report;
  return Queue::Open(o, q, &report);
}

TEST(BarnumReconstructTest, IdsContinueAfterTheMaximum) {
  Result r = Import(Lines({kConfigV1, Seed(0), Ok(0, "1,2"), Sub(1, "Child", 0),
                           Sub(2, "Child", 0)}));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  test::ScratchDir dir;
  std::unique_ptr<Queue> q;
  ASSERT_TRUE(OpenImported(fs::canonical(dir.path()), r.imp, nullptr, &q).ok());
  // Barnum task b is wizq task b + 1 (no retries here); the next is after.
  EXPECT_EQ(q->state().total(), 3);
  EXPECT_EQ(q->state().Find(2)->inputs, R"({"n":1})");
  EXPECT_EQ(q->state().next_task_id(), 4);
  int64_t id = 0;
  bool dup = false;
  ASSERT_TRUE(q->Transact([&](Txn& t) {
                 NewTask n;
                 n.type = "Child";
                 n.inputs = R"({"new":1})";
                 n.parent_id = 2;
                 return t.Submit(n, &id, &dup);
               }).ok());
  EXPECT_EQ(id, 4);
  ASSERT_TRUE(q->Close().ok());
}

TEST(BarnumReconstructTest, ALogOfOnlyItsConfigIsARunFinishedAtOnce) {
  Result r = Import(Lines({kConfigV1}));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.imp.run.tasks.empty());
  test::ScratchDir dir;
  std::unique_ptr<Queue> q;
  ASSERT_TRUE(OpenImported(fs::canonical(dir.path()), r.imp, nullptr, &q).ok());
  EXPECT_EQ(q->state().run().status, RunStatus::kCompleted);
  ASSERT_TRUE(q->Close().ok());
}

TEST(BarnumReconstructTest, TheImportIsOrdinaryEventsAndSurvivesReopen) {
  Result r =
      Import(Lines({kConfigV1, Seed(0), Ok(0, "1,2"), Sub(1, "Child", 0),
                    Sub(2, "Child", 0), Fail(1, 3), Retry(3, 1, 0), Ok(2)}));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  test::ScratchDir dir;
  const std::string install = fs::canonical(dir.path());
  std::unique_ptr<Queue> q;
  ASSERT_TRUE(OpenImported(install, r.imp, nullptr, &q).ok());
  ASSERT_TRUE(q->Close().ok());
  q.reset();
  // Replayed from the files alone: the same tasks, states and attempts.
  std::unique_ptr<Queue> again;
  ASSERT_TRUE(OpenImported(install, r.imp, nullptr, &again).ok());
  const QueueState& s = again->state();
  ASSERT_EQ(s.total(), 3);
  EXPECT_EQ(s.Find(1)->state, TaskState::kDone);
  EXPECT_EQ(s.Find(2)->state, TaskState::kPending);  // the retried chain
  EXPECT_EQ(s.Find(2)->attempts, 1);
  EXPECT_EQ(s.Find(2)->max_attempts, 3);
  EXPECT_EQ(s.Find(2)->error_reason, kReasonTimeout);
  EXPECT_EQ(s.Find(3)->state, TaskState::kDone);
  EXPECT_TRUE(s.Find(1)->has_finally);
  EXPECT_EQ(s.run().resumes, 1);  // resumed, not imported twice
  const std::string log = test::ReadAll(install + "/.wizard/audit.jsonl");
  EXPECT_EQ(log.find("run_imported"), log.rfind("run_imported"));
  ASSERT_TRUE(again->Close().ok());
}

// A crash (or power loss) at any file operation of the import leaves no
// run or the whole import: opening again ends with every task as imported.
TEST(BarnumReconstructTest, CrashAtEveryOpOfTheImportLeavesNoneOrAll) {
  Result r = Import(Lines({kConfigV1, Seed(0), Ok(0, "1,2"), Sub(1, "Child", 0),
                           Sub(2, "Child", 0), Fail(1, 3), Retry(3, 1, 0)}));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (bool power_loss : {false, true}) {
    for (int64_t k = 1;; k++) {
      SCOPED_TRACE((power_loss ? "power loss at op " : "crash at op ") +
                   std::to_string(k));
      test::ScratchDir dir;
      const std::string install = fs::canonical(dir.path());
      test::NoSyncEnv no_sync;
      FaultInjectionEnv env(&no_sync);
      env.SetTornWrites(true);
      env.CrashAtOp(k);
      std::unique_ptr<Queue> q;
      Status s = OpenImported(install, r.imp, &env, &q);
      const bool crashed = env.crashed();
      q.reset();
      if (!crashed) {
        ASSERT_TRUE(s.ok()) << s.ToString();
        ASSERT_GT(k, 3);
        break;
      }
      ASSERT_TRUE((power_loss ? env.DropUnsyncedData()
                              : (env.ResetState(), Status::OK()))
                      .ok());
      ASSERT_TRUE(OpenImported(install, r.imp, &no_sync, &q).ok());
      const QueueState& st = q->state();
      ASSERT_EQ(st.total(), 3);
      EXPECT_EQ(st.Find(1)->state, TaskState::kDone);
      EXPECT_EQ(st.Find(2)->state, TaskState::kPending);
      EXPECT_EQ(st.Find(2)->attempts, 1);
      EXPECT_EQ(st.Find(3)->state, TaskState::kPending);
      ASSERT_TRUE(q->Close().ok());
    }
  }
}

TEST(BarnumLogTest, BadLogsNameTheLineAndTheField) {
  const std::string seed = Seed(0);
  struct Case {
    std::string text, want;
  } cases[] = {
      {Lines({kConfigV1, "not json"}), "state.ndjson:2: not a JSON object"},
      {Lines({seed}),
       "state.ndjson:1: kind: the first entry must be the Config"},
      {"", "state.ndjson:1: kind: empty log"},
      {Lines({kConfigV1, seed, Ok(5)}),
       "state.ndjson:3: task_id: completion of unknown task 5"},
      {Lines({kConfigV1, seed, Ok(0), Ok(0)}),
       "state.ndjson:4: task_id: task 0 was already completed on line 3"},
      {Lines({kConfigV1, seed, Seed(0)}),
       "state.ndjson:3: task_id: task 0 was already submitted on line 2"},
      {Lines({kConfigV1, kConfigV1}), "state.ndjson:2: kind: a second Config"},
      {Lines({kConfigV1, Sub(0, "Child", 7)}),
       "state.ndjson:2: parent_id: unknown task 7"},
      {Lines({kConfigV1, Sub(0, "Nope", -1, R"({"kind":"Initial"})")}),
       "state.ndjson:2: step: \"Nope\" is not a step of the Config"},
      {Lines({kConfigV1, seed, Retry(1, 0, -1)}),
       "state.ndjson:3: origin.replaces: task 0 has not failed"},
      {Lines(
           {kConfigV1,
            R"({"kind":"TaskSubmitted","task_id":-1,"step":"Root","value":{},"parent_id":null,"origin":{"kind":"Initial"}})"}),
       "state.ndjson:2: task_id: must be a task id"},
      {Lines({kConfigV2, seed}),
       "state.ndjson:2: parent_id: a Barnum v1 entry in a v2 log"},
      {Lines(
           {R"({"kind":"Config","config":{"steps":[{"name":"A","action":{"kind":"Command","script":"x"},"next":["B"],"options":{"max_retries":0}}]}})"}),
       "state.ndjson:1 (the Config)"},
      {Lines(
           {R"({"kind":"Config","config":{"steps":[{"name":"A","pre":"x","action":{"kind":"Command","script":"x"},"options":{}}]}})"}),
       "state.ndjson:1: config.steps[0].pre: a Barnum pre hook cannot"},
      {Lines({kConfigV1, Seed(3), Sub(1, "Child", 3)}),
       "state.ndjson:3: parent_id: task 1 refers to task 3, which is not an "
       "earlier one"},
      {Lines({R"({"kind":5})"}),
       "state.ndjson:1: kind: a state log entry is an object"},
      {Lines(
           {kConfigV1,
            R"({"kind":"TaskSubmitted","task_id":0,"step":"Root","value":{},"parent_id":null,"origin":{"kind":7}})"}),
       "state.ndjson:2: origin: must be a task origin"},
      {Lines({kConfigV1, "{\"kind\":\"TaskSubmitted\"", seed}),
       "state.ndjson:2: not a JSON object"},
  };
  for (const Case& c : cases) {
    const std::string msg = Bad(c.text);
    EXPECT_NE(msg.find(c.want), std::string::npos)
        << "log:\n"
        << c.text << "message: " << msg << "\nwanted: " << c.want;
  }
}

TEST(BarnumLogTest, ATornLastLineIsSetAside) {
  const std::string text =
      Lines({kConfigV1, Seed(0), Ok(0, "1"), Sub(1, "Child", 0)}) +
      R"({"kind":"TaskCompleted","task_id":1,"outc)";
  Result r = Import(text);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.log.torn_tail);
  EXPECT_EQ(r.imp.classes.at(1), C::kPending);
  // Blank lines are skipped, a first one included.
  Result blank = Import("\n" + Lines({kConfigV1, "", Seed(0)}));
  ASSERT_TRUE(blank.status.ok()) << blank.status.ToString();
  EXPECT_EQ(blank.imp.classes.at(0), C::kPending);
  // A complete last line without its newline is read.
  Result whole = Import(Lines({kConfigV1, Seed(0)}) + Ok(0));
  ASSERT_TRUE(whole.status.ok()) << whole.status.ToString();
  EXPECT_FALSE(whole.log.torn_tail);
  EXPECT_EQ(whole.imp.classes.at(0), C::kDone);
}

}  // namespace
}  // namespace wizq
