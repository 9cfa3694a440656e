// The public C++ API (include/wizq/, docs/EMBEDDING.md): Function handlers
// in-process, through nothing but the public headers.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "wizq/wizard.h"

namespace {

using wizq::CancelToken;
using wizq::HandlerResult;
using wizq::RunOutcome;
using wizq::TaskInfo;

class EmbedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/wizq-embed-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<wizq::Wizard> Parse(const std::string& json) {
    std::unique_ptr<wizq::Wizard> w;
    wizq::Status s = wizq::Wizard::Parse(json, dir_, &w);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return w;
  }
  // The run's place: install/ of the case's directory, on the PostgreSQL
  // store when the suite runs there (WIZQ_STORE, tests/pg/cli_on_pg.cc).
  static wizq::WizardOptions Where(const std::string& install_dir) {
    wizq::WizardOptions o;
    o.install_dir = install_dir;
    if (const char* store = getenv("WIZQ_STORE")) o.store = store;
    return o;
  }
  RunOutcome Run(wizq::Wizard* w, wizq::WizardOptions o = {}) {
    o.install_dir = dir_ + "/install";
    o.store = Where(o.install_dir).store;
    std::string error;
    RunOutcome out = w->Run("{}", o, &error);
    error_ = error;
    return out;
  }
  nlohmann::json Status() {
    std::string s;
    EXPECT_TRUE(wizq::Wizard::ReadStatus(Where(dir_ + "/install"), &s).ok());
    return nlohmann::json::parse(s);
  }
  // The last error message of task `step` in the run's status.
  std::string ErrorOf(const std::string& step) {
    const nlohmann::json status = Status();
    for (auto& t : status["tasks"])
      if (t["type"] == step && t.contains("error"))
        return t["error"]["message"].get<std::string>() + " (" +
               t["error"]["reason"].get<std::string>() + ")";
    return "";
  }

  std::string dir_, error_;
};

constexpr char kTree[] = R"({"entrypoint": "Root", "steps": [
  {"name": "Root", "action": {"kind": "Function"}, "next": ["Leaf"]},
  {"name": "Leaf", "action": {"kind": "Function"}}]})";

TEST_F(EmbedTest, SuccessWithChildrenAndTaskInfo) {
  auto w = Parse(kTree);
  std::mutex mu;
  std::vector<TaskInfo> seen;
  ASSERT_TRUE(
      w->RegisterHandler("Root", [&](const TaskInfo& t, const CancelToken&) {
         std::lock_guard<std::mutex> g(mu);
         seen.push_back(t);
         return HandlerResult::Next({{"Leaf", R"({"n":1})"},
                                     {"Leaf", R"({"n":2})"},
                                     {"Leaf", R"({"n":3})"}});
       }).ok());
  ASSERT_TRUE(
      w->RegisterHandler("Leaf", [&](const TaskInfo& t, const CancelToken&) {
         std::lock_guard<std::mutex> g(mu);
         seen.push_back(t);
         return HandlerResult::Done();
       }).ok());
  EXPECT_TRUE(w->MissingHandlers().empty());
  EXPECT_EQ(Run(w.get()), RunOutcome::kCompleted) << error_;
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].step, "Root");
  EXPECT_EQ(seen[0].inputs_json, "{}");
  EXPECT_EQ(seen[0].attempt, 1);
  EXPECT_FALSE(seen[0].run_id.empty());
  EXPECT_FALSE(seen[0].idempotency_key.empty());
  EXPECT_EQ(seen[0].install_dir,
            std::filesystem::canonical(dir_ + "/install").string());
  std::set<std::string> leaves;
  for (size_t i = 1; i < 4; i++) leaves.insert(seen[i].inputs_json);
  EXPECT_EQ(leaves,
            (std::set<std::string>{R"({"n":1})", R"({"n":2})", R"({"n":3})"}));
  EXPECT_EQ(Status()["counts"]["done"], 4);
  // Finished: a second Run does nothing and calls no handler.
  EXPECT_EQ(Run(w.get()), RunOutcome::kCompleted);
  EXPECT_EQ(seen.size(), 4u);
}

// SPEC §6.1: the handler is called only once its claim is on disk (what a
// read-only open, another process's view, sees).
TEST_F(EmbedTest, ClaimIsDurableBeforeTheCall) {
  auto w = Parse(kTree);
  std::mutex mu;
  std::vector<std::string> seen;
  auto check = [&](const TaskInfo& t, const CancelToken&) {
    std::string s;
    EXPECT_TRUE(wizq::Wizard::ReadStatus(Where(t.install_dir), &s).ok());
    const nlohmann::json status = nlohmann::json::parse(s);
    for (auto& task : status["tasks"]) {
      if (task["id"].get<int64_t>() != t.id) continue;
      std::lock_guard<std::mutex> g(mu);
      seen.push_back(task["state"].get<std::string>() + " " +
                     task["attempts"].dump());
    }
    return t.step == "Root" ? HandlerResult::Next({{"Leaf", "{}"}})
                            : HandlerResult::Done();
  };
  ASSERT_TRUE(w->RegisterHandler("Root", check).ok());
  ASSERT_TRUE(w->RegisterHandler("Leaf", check).ok());
  EXPECT_EQ(Run(w.get()), RunOutcome::kCompleted) << error_;
  EXPECT_EQ(seen, (std::vector<std::string>{"in_progress 1", "in_progress 1"}));
}

TEST_F(EmbedTest, FailureIsRetriedByThePolicy) {
  auto w = Parse(R"({"entrypoint": "Flaky", "steps": [
    {"name": "Flaky", "action": {"kind": "Function"},
     "options": {"max_retries": 2}}]})");
  std::vector<int> attempts;
  ASSERT_TRUE(
      w->RegisterHandler("Flaky", [&](const TaskInfo& t, const CancelToken&) {
         attempts.push_back(t.attempt);
         return t.attempt < 3 ? HandlerResult::Failed("not yet")
                              : HandlerResult::Done();
       }).ok());
  EXPECT_EQ(Run(w.get()), RunOutcome::kCompleted) << error_;
  EXPECT_EQ(attempts, (std::vector<int>{1, 2, 3}));
}

TEST_F(EmbedTest, FailureAfterTheLastAttemptFailsTheRun) {
  auto w = Parse(R"({"entrypoint": "Bad", "steps": [
    {"name": "Bad", "action": {"kind": "Function"},
     "options": {"max_retries": 1}}]})");
  std::atomic<int> calls{0};
  ASSERT_TRUE(
      w->RegisterHandler("Bad", [&](const TaskInfo&, const CancelToken&) {
         calls++;
         return HandlerResult::Failed("disk is full");
       }).ok());
  EXPECT_EQ(Run(w.get()), RunOutcome::kTaskFailed);
  EXPECT_EQ(calls, 2);
  EXPECT_NE(ErrorOf("Bad").find("disk is full"), std::string::npos);
}

TEST_F(EmbedTest, ThrowingHandlerIsAFailedAttempt) {
  auto w = Parse(R"({"entrypoint": "Boom", "steps": [
    {"name": "Boom", "action": {"kind": "Function"}}]})");
  ASSERT_TRUE(w->RegisterHandler(
                   "Boom",
                   [](const TaskInfo&, const CancelToken&) -> HandlerResult {
                     throw std::runtime_error("kaboom");
                   })
                  .ok());
  EXPECT_EQ(Run(w.get()), RunOutcome::kTaskFailed);
  EXPECT_NE(ErrorOf("Boom").find("threw: kaboom"), std::string::npos)
      << ErrorOf("Boom");
}

TEST_F(EmbedTest, InvalidResponseIsJudgedLikeACommands) {
  auto w = Parse(kTree);
  ASSERT_TRUE(
      w->RegisterHandler("Root", [](const TaskInfo&, const CancelToken&) {
         return HandlerResult::Next({{"Nowhere", "{}"}});
       }).ok());
  ASSERT_TRUE(
      w->RegisterHandler("Leaf", [](const TaskInfo&, const CancelToken&) {
         return HandlerResult::Done();
       }).ok());
  EXPECT_EQ(Run(w.get()), RunOutcome::kTaskFailed);
  EXPECT_NE(ErrorOf("Root").find("invalid_response"), std::string::npos)
      << ErrorOf("Root");
}

TEST_F(EmbedTest, TimeoutCancelsAHandlerThatHonoursIt) {
  auto w = Parse(R"({"entrypoint": "Slow", "steps": [
    {"name": "Slow", "action": {"kind": "Function"},
     "options": {"timeout": 0.2}}]})");
  std::atomic<bool> saw_cancel{false};
  ASSERT_TRUE(
      w->RegisterHandler("Slow", [&](const TaskInfo&, const CancelToken& c) {
         saw_cancel = c.WaitFor(30);
         return HandlerResult::Done();  // discarded: timed out
       }).ok());
  wizq::WizardOptions o;
  o.cancel_grace_seconds = 20;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Run(w.get(), o), RunOutcome::kTaskFailed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(saw_cancel);
  EXPECT_NE(ErrorOf("Slow").find("returned after cancellation"),
            std::string::npos)
      << ErrorOf("Slow");
}

TEST_F(EmbedTest, TimeoutAbandonsAHandlerThatIgnoresIt) {
  // Two attempts: the second may start only once the abandoned first call
  // has returned (attempts of one task never overlap).
  auto w = Parse(R"({"entrypoint": "Stuck", "steps": [
    {"name": "Stuck", "action": {"kind": "Function"},
     "options": {"timeout": 0.1, "max_retries": 1}}]})");
  std::atomic<int> in_flight{0}, max_in_flight{0}, calls{0};
  ASSERT_TRUE(
      w->RegisterHandler("Stuck", [&](const TaskInfo&, const CancelToken&) {
         calls++;
         int now = ++in_flight;
         max_in_flight = std::max(max_in_flight.load(), now);
         std::this_thread::sleep_for(std::chrono::milliseconds(600));
         in_flight--;
         return HandlerResult::Done();
       }).ok());
  wizq::WizardOptions o;
  o.cancel_grace_seconds = 0.1;
  EXPECT_EQ(Run(w.get(), o), RunOutcome::kTaskFailed);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(max_in_flight, 1);
  EXPECT_NE(ErrorOf("Stuck").find("did not return within"), std::string::npos)
      << ErrorOf("Stuck");
  // The last call was abandoned and still runs; let it end before the
  // test's objects go.
  while (in_flight > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

TEST_F(EmbedTest, FinallyHookIsAFunction) {
  auto w = Parse(R"({"entrypoint": "Root", "steps": [
    {"name": "Root", "action": {"kind": "Function"}, "next": ["Leaf"],
     "finally": {"kind": "Function"}},
    {"name": "Leaf", "action": {"kind": "Function"}}]})");
  EXPECT_EQ(w->MissingHandlers(),
            (std::vector<std::string>{"Root", "Root.finally", "Leaf"}));
  std::mutex mu;
  std::vector<std::string> order;
  auto log = [&](const std::string& what) {
    std::lock_guard<std::mutex> g(mu);
    order.push_back(what);
  };
  ASSERT_TRUE(
      w->RegisterHandler("Root", [&](const TaskInfo&, const CancelToken&) {
         log("Root");
         return HandlerResult::Next({{"Leaf", "{}"}});
       }).ok());
  ASSERT_TRUE(
      w->RegisterHandler("Leaf", [&](const TaskInfo&, const CancelToken&) {
         log("Leaf");
         return HandlerResult::Done();
       }).ok());
  ASSERT_TRUE(w->RegisterHandler("Root.finally", [&](const TaskInfo& t,
                                                     const CancelToken&) {
                 log(t.finally_hook ? "hook" : "not a hook?");
                 return HandlerResult::Done();
               }).ok());
  EXPECT_EQ(Run(w.get()), RunOutcome::kCompleted) << error_;
  EXPECT_EQ(order, (std::vector<std::string>{"Root", "Leaf", "hook"}));
}

TEST_F(EmbedTest, FunctionAndCommandStepsMix) {
  auto w = Parse(R"({"entrypoint": "Plan", "steps": [
    {"name": "Plan", "action": {"kind": "Function"}, "next": ["Shell"]},
    {"name": "Shell", "action": {"kind": "Command", "script":
      "cat > shell.in; echo '[{\"kind\": \"Check\", \"value\": {\"ok\": 1}}]'"},
     "next": ["Check"]},
    {"name": "Check", "action": {"kind": "Function", "handler": "Verify"}}]})");
  std::string checked;
  ASSERT_TRUE(
      w->RegisterHandler("Plan", [](const TaskInfo&, const CancelToken&) {
         return HandlerResult::NextJson(
             R"([{"kind": "Shell", "value": {"file": "a"}}])");
       }).ok());
  ASSERT_FALSE(w->RegisterHandler("Check", nullptr).ok());  // named Verify
  ASSERT_TRUE(
      w->RegisterHandler("Verify", [&](const TaskInfo& t, const CancelToken&) {
         checked = t.inputs_json;
         return HandlerResult::Done();
       }).ok());
  EXPECT_EQ(Run(w.get()), RunOutcome::kCompleted) << error_;
  EXPECT_EQ(checked, R"({"ok":1})");
  std::ifstream in(dir_ + "/shell.in");  // the Command ran in base_dir
  std::string payload((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(payload.find(R"("file":"a")"), std::string::npos) << payload;
}

// Records the order in which the run loop starts tasks.
class StartOrder : public wizq::Observer {
 public:
  void OnTaskStarted(int64_t task_id, const std::string& step, int,
                     const wizq::RunProgress&) override {
    std::lock_guard<std::mutex> l(mu_);
    started_.emplace_back(task_id, step);
  }
  std::vector<std::pair<int64_t, std::string>> started() {
    std::lock_guard<std::mutex> l(mu_);
    return started_;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<int64_t, std::string>> started_;
};

// Short Commands wait in the spawner beyond the slots (RunLoop::QueueAhead);
// a Function task, which cannot wait there, must not be overtaken by the
// Commands claimed after it: once it is next, nothing after it starts
// before it does.
TEST_F(EmbedTest, AFunctionIsNotOvertakenByQueuedCommands) {
  auto w = Parse(R"({"entrypoint": "Root", "steps": [
    {"name": "Root", "action": {"kind": "Function"}, "next": ["Fast", "Mark"]},
    {"name": "Fast", "action": {"kind": "Command", "script": "echo []"}},
    {"name": "Mark", "action": {"kind": "Function"}}]})");
  constexpr int kFast = 300;
  ASSERT_TRUE(
      w->RegisterHandler("Root", [](const TaskInfo&, const CancelToken&) {
         // Mark comes right after the first 20 Fast tasks.
         std::string next = "[";
         for (int i = 0; i < kFast; i++) {
           if (i == 20) next += R"({"kind": "Mark", "value": {}},)";
           next += R"({"kind": "Fast", "value": {"i": )" + std::to_string(i) +
                   "}}" + (i + 1 < kFast ? "," : "");
         }
         return HandlerResult::NextJson(next + "]");
       }).ok());
  ASSERT_TRUE(
      w->RegisterHandler("Mark", [](const TaskInfo&, const CancelToken&) {
         return HandlerResult::Done();
       }).ok());
  StartOrder order;
  wizq::WizardOptions o;
  o.jobs = 4;  // enough slots that claims run ahead of the commits
  o.observer = &order;
  EXPECT_EQ(Run(w.get(), o), RunOutcome::kCompleted) << error_;
  // Fast tasks claimed after Mark (higher ids) that started before it.
  int64_t mark_id = 0;
  for (const auto& [id, step] : order.started()) {
    if (step == "Mark") mark_id = id;
  }
  ASSERT_GT(mark_id, 0);
  int overtook = 0;
  for (const auto& [id, step] : order.started()) {
    if (id == mark_id) break;
    overtook += id > mark_id;
  }
  EXPECT_EQ(overtook, 0);
}

TEST_F(EmbedTest, SpawnedTasksAreDeduplicated) {
  auto w = Parse(kTree);
  std::atomic<int> leaves{0};
  ASSERT_TRUE(
      w->RegisterHandler("Root", [](const TaskInfo&, const CancelToken&) {
         return HandlerResult::Next({{"Leaf", R"({"a":1,"b":2})"},
                                     {"Leaf", R"({"b":2,"a":1})"},
                                     {"Leaf", R"({"a":2})"}});
       }).ok());
  ASSERT_TRUE(
      w->RegisterHandler("Leaf", [&](const TaskInfo&, const CancelToken&) {
         leaves++;
         return HandlerResult::Done();
       }).ok());
  EXPECT_EQ(Run(w.get()), RunOutcome::kCompleted) << error_;
  EXPECT_EQ(leaves, 2);
}

TEST_F(EmbedTest, MissingHandlerIsInvalidAndWritesNothing) {
  auto w = Parse(kTree);
  ASSERT_TRUE(
      w->RegisterHandler("Root", [](const TaskInfo&, const CancelToken&) {
         return HandlerResult::Done();
       }).ok());
  wizq::Status s =
      w->RegisterHandler("Typo", [](const TaskInfo&, const CancelToken&) {
        return HandlerResult::Done();
      });
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("Root, Leaf"), std::string::npos) << s.message();
  EXPECT_EQ(Run(w.get()), RunOutcome::kInvalid);
  EXPECT_NE(error_.find("step \"Leaf\""), std::string::npos) << error_;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/install/.wizard"));
}

class Recorder : public wizq::Observer {
 public:
  void OnOpened(const std::string&, const std::string& how,
                const wizq::RunProgress&) override {
    events.push_back("opened " + how);
  }
  void OnTaskStarted(int64_t, const std::string& step, int,
                     const wizq::RunProgress&) override {
    events.push_back("started " + step);
  }
  void OnTaskFinished(int64_t, const std::string& step,
                      const std::string& reason, const std::string&, bool,
                      int spawned, const wizq::RunProgress& p) override {
    events.push_back("finished " + step + " " + reason + " " +
                     std::to_string(spawned));
    last = p;
  }
  void OnRunFinished(RunOutcome o, const wizq::RunProgress&) override {
    events.push_back(std::string("run ") + wizq::RunOutcomeName(o));
  }
  void OnPaused(const std::vector<int64_t>& ids,
                const wizq::RunProgress&) override {
    events.push_back("paused " + std::to_string(ids.size()));
  }
  std::vector<std::string> events;
  wizq::RunProgress last;
};

class Answers : public wizq::PromptAnswerer {
 public:
  explicit Answers(std::vector<std::string> replies) : replies_(replies) {}
  wizq::Status Answer(const wizq::PromptRequest& q, const CancelToken&,
                      std::string* answer) override {
    asked.push_back(q.mode + ":" + q.message);
    if (replies_.empty()) return wizq::Status::NotFound("no one is there");
    *answer = replies_.front();
    replies_.erase(replies_.begin());
    return wizq::Status::OK();
  }
  std::vector<std::string> asked;

 private:
  std::vector<std::string> replies_;
};

constexpr char kGate[] = R"({"entrypoint": "Confirm", "steps": [
  {"name": "Confirm", "action": {"kind": "Prompt", "mode": "confirm",
   "message": "Install?"}, "next": ["Install"]},
  {"name": "Install", "action": {"kind": "Function"}}]})";

TEST_F(EmbedTest, ObserverAndPromptAnswerer) {
  auto w = Parse(kGate);
  std::string got;
  ASSERT_TRUE(
      w->RegisterHandler("Install", [&](const TaskInfo& t, const CancelToken&) {
         got = t.inputs_json;
         return HandlerResult::Done();
       }).ok());
  Recorder rec;
  Answers answers({"\"maybe\"", "true"});  // the first does not fit
  wizq::WizardOptions o;
  o.observer = &rec;
  o.answerer = &answers;
  EXPECT_EQ(Run(w.get(), o), RunOutcome::kCompleted) << error_;
  EXPECT_EQ(answers.asked.size(), 2u);
  EXPECT_EQ(answers.asked[0], "confirm:Install?");
  EXPECT_NE(got.find("\"answer\":true"), std::string::npos) << got;
  EXPECT_EQ(rec.events,
            (std::vector<std::string>{"opened started", "started Confirm",
                                      "finished Confirm  1", "started Install",
                                      "finished Install  0", "run completed"}));
  EXPECT_EQ(rec.last.done, 2);
  EXPECT_NE(Status().dump().find("\"program\""), std::string::npos);
}

TEST_F(EmbedTest, UnansweredPromptPauses) {
  auto w = Parse(kGate);
  ASSERT_TRUE(
      w->RegisterHandler("Install", [](const TaskInfo&, const CancelToken&) {
         return HandlerResult::Done();
       }).ok());
  Recorder rec;
  Answers none({});
  wizq::WizardOptions o;
  o.observer = &rec;
  o.answerer = &none;
  EXPECT_EQ(Run(w.get(), o), RunOutcome::kPaused) << error_;
  EXPECT_EQ(rec.events.back(), "paused 1");
  // Resumed with an answer up front, as `wizq run --answer` does.
  o.answerer = nullptr;
  o.answers = {"1=yes"};
  EXPECT_EQ(Run(w.get(), o), RunOutcome::kCompleted) << error_;
}

// Two Wizards on one directory in one process, with the status read and
// the handler list asked from other threads meanwhile (make tsan).
TEST_F(EmbedTest, ConcurrentWizardsShareOneRun) {
  std::mutex mu;
  std::map<std::string, int> calls;
  auto setup = [&](wizq::Wizard* w) {
    ASSERT_TRUE(
        w->RegisterHandler("Root", [](const TaskInfo&, const CancelToken&) {
           std::vector<wizq::Spawn> next;
           for (int i = 0; i < 40; i++)
             next.push_back({"Leaf", "{\"i\":" + std::to_string(i) + "}"});
           return HandlerResult::Next(next);
         }).ok());
    ASSERT_TRUE(
        w->RegisterHandler("Leaf", [&](const TaskInfo& t, const CancelToken&) {
           std::this_thread::sleep_for(std::chrono::milliseconds(2));
           std::lock_guard<std::mutex> g(mu);
           calls[t.inputs_json]++;
           return HandlerResult::Done();
         }).ok());
  };
  auto a = Parse(kTree), b = Parse(kTree);
  setup(a.get());
  setup(b.get());
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done) {
      std::string s;
      (void)wizq::Wizard::ReadStatus(Where(dir_ + "/install"), &s);
      EXPECT_TRUE(a->MissingHandlers().empty());
    }
  });
  RunOutcome ra, rb;
  std::thread ta([&] { ra = Run(a.get()); });
  std::thread tb([&] { rb = Run(b.get()); });
  ta.join();
  tb.join();
  done = true;
  reader.join();
  EXPECT_EQ(ra, RunOutcome::kCompleted);
  EXPECT_EQ(rb, RunOutcome::kCompleted);
  EXPECT_EQ(calls.size(), 40u);
  for (auto& [k, n] : calls) EXPECT_EQ(n, 1) << k;
}

TEST_F(EmbedTest, RequestStopCancelsAndResumes) {
  auto w = Parse(R"({"entrypoint": "Wait", "steps": [
    {"name": "Wait", "action": {"kind": "Function"}}]})");
  std::atomic<int> calls{0};
  std::atomic<bool> started{false};
  ASSERT_TRUE(
      w->RegisterHandler("Wait", [&](const TaskInfo&, const CancelToken& c) {
         if (calls++ == 0) {
           started = true;
           c.WaitFor(30);
           return HandlerResult::Failed("stopped");
         }
         return HandlerResult::Done();
       }).ok());
  std::thread stopper([&] {
    while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    wizq::Wizard::RequestStop();
  });
  EXPECT_EQ(Run(w.get()), RunOutcome::kInterrupted) << error_;
  stopper.join();
  EXPECT_EQ(Run(w.get()), RunOutcome::kCompleted) << error_;
  EXPECT_EQ(calls, 2);
}

// The wizq command has no handlers: validate says so, run refuses (exit 2).
TEST_F(EmbedTest, CommandLineNamesTheFunctionStep) {
  const std::string wf = dir_ + "/wf.json";
  std::ofstream(wf) << kTree;
  const std::string wizq = std::string(WIZQ_BUILD_DIR) + "/wizq";
  const std::string out = dir_ + "/out";
  int rc =
      std::system((wizq + " validate " + wf + " >" + out + " 2>&1").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 0);
  std::ifstream v(out);
  std::string text((std::istreambuf_iterator<char>(v)), {});
  EXPECT_NE(text.find("step \"Root\""), std::string::npos) << text;
  rc = std::system((wizq + " run " + wf + " --dir " + dir_ +
                    "/cli </dev/null >" + out + " 2>&1")
                       .c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::ifstream r(out);
  text.assign((std::istreambuf_iterator<char>(r)), {});
  EXPECT_NE(text.find("step \"Root\": its action is a Function"),
            std::string::npos)
      << text;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/cli/.wizard"));
}

}  // namespace
