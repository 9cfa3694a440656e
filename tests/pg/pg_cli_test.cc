// Every command on the PostgreSQL store through the real binary (SPEC §14,
// issue 23 item 2): `--store` / WIZQ_STORE on run, status, log, report,
// export, answer, agent, prune and `wizq runs`; two `wizq run` workers in
// two directories (two "machines' local workspaces") sharing one run with
// a side-effect ledger; a run's local workspace of its own; the store's
// credentials kept out of task bodies.
#include "tests/pg/pg_cli_fixture.h"

namespace wizq::test {
namespace {

TEST_F(PgCliTest, ARunOnTheStoreAndEveryViewOfIt) {
  const std::string wf = Write("fanout.json", kFanout);
  const std::string dir = Dir("m1");
  WizqResult r = Wizq(
      {"run", wf, "--dir", dir, "--input", R"({"n":4})", "--run-id", "fan"},
      Opts({{"PGPASSWORD", kPassword}}));
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_EQ(Ledger().size(), 5u);
  // Nothing of the run's state in --dir: only this machine's task files,
  // in the run's own workspace.
  EXPECT_FALSE(fs::exists(dir + "/.wizard")) << r.Describe();
  EXPECT_TRUE(fs::exists(dir + "/.wizq-local/fan/tasks")) << r.Describe();
  // The store's credentials never reach a task body.
  std::ifstream env_file(dir + "/root.env");
  std::stringstream env;
  env << env_file.rdbuf();
  EXPECT_FALSE(Contains(env.str(), "WIZQ_STORE=")) << env.str();
  EXPECT_FALSE(Contains(env.str(), "PGPASSWORD=")) << env.str();
  EXPECT_FALSE(Contains(env.str(), kPassword));
  EXPECT_TRUE(Contains(env.str(), "WIZQ_RUN_ID=fan")) << env.str();

  // The views, from another directory: the store holds the run.
  const std::string elsewhere = Dir("viewer");
  r = Wizq({"status", "--dir", elsewhere, "--run-id", "fan"});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "completed: 5 total, 5 done")) << r.Describe();
  r = Wizq({"status", "--json"});  // the store's latest run
  ASSERT_EQ(r.code, 0) << r.Describe();
  Json status = Json::parse(r.out);
  EXPECT_EQ(status["run_id"], "fan");
  r = Wizq({"log", "--run-id", "fan"});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "run_finished")) << r.Describe();
  r = Wizq({"log", "--table", "--run-id", "fan"});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "Work")) << r.Describe();
  const std::string html = root_ + "/report.html";
  r = Wizq({"report", "--run-id", "fan", "-o", html});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(fs::file_size(html) > 1000) << r.Describe();
  r = Wizq({"export", "--format", "barnum", "--run-id", "fan"});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_EQ(CountOf(r.out, "\"Success\""), 5) << r.Describe();
  // --format audit: a log the directory store reads as the same run.
  const std::string copy = Dir("copy");
  ASSERT_EQ(mkdir((copy + "/.wizard").c_str(), 0700), 0);
  r = Wizq({"export", "--format", "audit", "--run-id", "fan", "-o",
            copy + "/.wizard/audit.jsonl"});
  EXPECT_EQ(r.code, 0) << r.Describe();
  {
    WizqProcess p({"wizq", "status", "--dir", copy},
                  Opts({{"WIZQ_STORE", ""}}));
    const WizqResult& d = p.Wait();
    EXPECT_EQ(d.code, 0) << d.Describe();
    EXPECT_TRUE(Contains(d.out, "completed: 5 total, 5 done")) << d.Describe();
    EXPECT_TRUE(Contains(d.out, "(run fan)")) << d.Describe();
  }
  r = Wizq({"runs"});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "fan ")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "completed")) << r.Describe();
  r = Wizq({"runs", "--json"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  Json runs = Json::parse(r.out);
  ASSERT_EQ(runs.size(), 1u) << r.out;
  EXPECT_EQ(runs[0]["done"], 5);
  EXPECT_EQ(runs[0]["live_workers"], 0);

  // prune removes this machine's files of the run, per run.
  r = Wizq({"prune", "--dir", dir, "--run-id", "fan"});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "removed the files of 5 finished task(s)"))
      << r.Describe();
  EXPECT_TRUE(Contains(r.out, dir + "/.wizq-local/fan")) << r.Describe();

  // Resumed: completed, nothing runs again.
  r = Wizq(
      {"run", wf, "--dir", dir, "--input", R"({"n":4})", "--run-id", "fan"});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_EQ(Ledger().size(), 5u);
}

// The reading commands open the run without its row lock, which every
// worker's transaction holds while it runs: a session that holds it (a
// worker in a long transaction) delays no `status` or `log`.
TEST_F(PgCliTest, ReadingCommandsNeverWaitForTheRunsRowLock) {
  const std::string wf = Write("fanout.json", kFanout);
  ASSERT_EQ(Wizq({"run", wf, "--dir", Dir("m1"), "--input", R"({"n":2})",
                  "--run-id", "locked"})
                .code,
            0);
  std::unique_ptr<PgConn> holder = Connect();
  ASSERT_OK(holder->Exec("BEGIN"));
  ASSERT_OK(holder->Exec("SELECT 1 FROM \"" + schema_ +
                         "\".runs WHERE run_id = 'locked' FOR UPDATE"));
  for (const char* cmd : {"status", "log"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const WizqResult r = Wizq({cmd, "--run-id", "locked"});
    EXPECT_EQ(r.code, 0) << cmd << ": " << r.Describe();
    EXPECT_LT(SecondsSince(t0), 3.0) << cmd << " waited for the lock";
  }
  ASSERT_OK(holder->Exec("ROLLBACK"));
}

TEST_F(PgCliTest, TwoWorkersInTwoDirectoriesShareOneRun) {
  const std::string wf = Write("fanout.json", kFanout);
  const std::vector<std::string> run = {"run", wf, "--input", R"({"n":24})"};
  auto in = [&](const std::string& dir) {
    std::vector<std::string> a = run;
    a.insert(a.end(), {"--dir", Dir(dir), "--jobs", "3"});
    a.insert(a.begin(), "wizq");
    a.insert(a.end(), {"--schema", schema_});
    return a;
  };
  // The run id is derived from the workflow and the input alone: the same
  // command in two directories joins one run.
  WizqProcess a(in("m1"), Opts());
  WizqProcess b(in("m2"), Opts());
  const WizqResult ra = a.Wait(), rb = b.Wait();
  ASSERT_EQ(ra.code, 0) << ra.Describe();
  ASSERT_EQ(rb.code, 0) << rb.Describe();
  const std::vector<std::string> lines = Ledger();
  ASSERT_EQ(lines.size(), 25u);
  std::map<std::string, int> per_task, per_dir;
  for (const std::string& l : lines) {
    std::istringstream f(l);
    std::string id, attempt, step, dir;
    f >> id >> attempt >> step >> dir;
    per_task[id]++;
    per_dir[dir]++;
    EXPECT_EQ(attempt, "1") << l;
  }
  EXPECT_EQ(per_task.size(), 25u);  // each task ran exactly once
  for (const auto& [id, n] : per_task) EXPECT_EQ(n, 1) << "task " << id;
  // Both did work (each holds up to 3 at once, 24 tasks of 50 ms).
  EXPECT_GT(per_dir["m1"], 0) << ra.Describe() << rb.Describe();
  EXPECT_GT(per_dir["m2"], 0) << ra.Describe() << rb.Describe();
  WizqResult r = Wizq({"log", "--json"});
  EXPECT_EQ(CountOf(r.out, "\"event\":\"worker_joined\""), 2) << r.Describe();
  EXPECT_EQ(CountOf(r.out, "\"event\":\"task_completed\""), 25);
}

TEST_F(PgCliTest, AGateAnsweredOnTheStore) {
  const std::string wf = Write("gate.json", kGate);
  const std::string dir = Dir("m1");
  WizqResult r = Wizq({"run", wf, "--dir", dir, "--run-id", "gate"});
  ASSERT_EQ(r.code, 4) << r.Describe();  // paused
  // The printed command finds the run by its id (the store comes from
  // WIZQ_STORE, which the command inherits).
  EXPECT_TRUE(Contains(r.err, "answer --dir " + dir + " --schema " + schema_ +
                                  " --run-id gate 2="))
      << r.Describe();
  r = Wizq({"status", "--run-id", "gate"});
  EXPECT_TRUE(Contains(r.out, "waiting for an answer")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "--run-id gate 2=VALUE")) << r.Describe();
  r = Wizq({"answer", "--dir", Dir("m2"), "--run-id", "gate", "2=yes"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  r = Wizq({"run", wf, "--dir", dir, "--run-id", "gate"});
  EXPECT_EQ(r.code, 0) << r.Describe();
}

TEST_F(PgCliTest, AnAgentOnAnotherDirectoryTakesAPoolTask) {
  const std::string wf = Write("pool.json", kPool);
  WizqProcess run({"wizq", "run", wf, "--dir", Dir("m1"), "--run-id", "pool",
                   "--schema", schema_},
                  Opts());
  WizqResult r;
  Json payload;
  for (int i = 0; i < 100 && payload.is_null(); i++) {
    r = Wizq({"agent", "take", "--dir", Dir("agent"), "--run-id", "pool",
              "--wait", "1"});
    if (r.code == 0) payload = Json::parse(r.out);
  }
  ASSERT_FALSE(payload.is_null()) << r.Describe();
  EXPECT_EQ(payload["run_id"], "pool");
  const std::string task = std::to_string(payload["task_id"].get<int64_t>());
  const std::string lease = payload["lease"].get<std::string>();
  // A heartbeat waits for nobody's transaction: a session that holds the
  // run's row (a frozen machine's) delays none.
  std::unique_ptr<PgConn> holder = Connect();
  ASSERT_OK(holder->Exec("BEGIN"));
  ASSERT_OK(holder->Exec("SELECT 1 FROM \"" + schema_ +
                         "\".runs WHERE run_id = 'pool' FOR UPDATE"));
  const auto t0 = std::chrono::steady_clock::now();
  r = Wizq({"agent", "heartbeat", "--run-id", "pool", "--task", task, "--lease",
            lease});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_LT(SecondsSince(t0), 3.0) << "the heartbeat waited for the row";
  ASSERT_OK(holder->Exec("ROLLBACK"));
  r = Wizq({"agent", "done", "--run-id", "pool", "--task", task, "--lease",
            lease, "--response", "[]"});
  EXPECT_EQ(r.code, 0) << r.Describe();
  const WizqResult& rr = run.Wait();
  EXPECT_EQ(rr.code, 0) << rr.Describe();
}

TEST_F(PgCliTest, ARunIdGivenAgainGetsAWorkspaceOfItsOwn) {
  const std::string wf = Write("fanout.json", kFanout);
  const std::string dir = Dir("m1");
  WizqResult r = Wizq(
      {"run", wf, "--dir", dir, "--input", R"({"n":1})", "--run-id", "again"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  r = Wizq({"run", wf, "--dir", dir, "--input", R"({"n":2})", "--run-id",
            "again", "--fresh"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "archived the previous run")) << r.Describe();
  // The previous run's files are set aside under its start time.
  int aside = 0;
  for (const auto& e : fs::directory_iterator(dir + "/.wizq-local")) {
    const std::string name = e.path().filename();
    if (name.rfind("again.", 0) == 0) aside++;
  }
  EXPECT_EQ(aside, 1);
  std::ifstream marker(dir + "/.wizq-local/again/run");
  std::string started;
  marker >> started;
  r = Wizq({"status", "--json", "--run-id", "again"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_EQ(std::to_string(Json::parse(r.out)["started_ms"].get<int64_t>()),
            started);
  r = Wizq({"runs", "--archived", "--json"});
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_EQ(Json::parse(r.out).size(), 2u) << r.out;
}

// SPEC §11 on PostgreSQL: a fresh run's "previous run" is the archived
// run of that name in the store.
TEST_F(PgCliTest, AFreshRunReusesTheArchivedRunOfItsName) {
  const std::string wf = Write("fanout.json", kFanout);
  const std::vector<std::string> run = {
      "run", wf, "--dir", Dir("m1"), "--input", R"({"n":3})", "--run-id", "re"};
  WizqResult r = Wizq(run);
  ASSERT_EQ(r.code, 0) << r.Describe();
  ASSERT_EQ(Ledger().size(), 4u);
  std::vector<std::string> fresh = run;
  fresh.push_back("--fresh");
  fresh[3] = Dir("m2");  // another machine's directory: the store decides
  r = Wizq(fresh);
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "4 reused, 0 ran")) << r.Describe();
  EXPECT_EQ(Ledger().size(), 4u);  // nothing ran again
}

// SPEC §14: a worker whose workflow, input or step files differ from the
// run's is refused (exit 3) naming the difference, and writes nothing; the
// run is the other workers' too. --fresh starts it again instead.
TEST_F(PgCliTest, AWorkerWhoseDefinitionDiffersIsRefused) {
  // Root runs ./work.sh (a step file the def_hash covers), then a gate.
  const std::string wf = std::string(kGate).replace(
      std::string(kGate).find("echo '[{"), 0, "sh ./work.sh; ");
  auto machine = [&](const std::string& name, const std::string& script,
                     const std::string& text) {
    const std::string dir = Dir(name);
    std::ofstream(dir + "/work.sh") << script;
    std::ofstream(dir + "/wf.json") << text;
    return dir;
  };
  const std::string a = machine("a", "true\n", wf);
  const std::vector<std::string> run = {"run", a + "/wf.json", "--dir",
                                        a,     "--run-id",     "def"};
  WizqResult r = Wizq(run);
  ASSERT_EQ(r.code, 4) << r.Describe();  // paused at the gate: current
  const auto events = [&] {
    return CountOf(Wizq({"log", "--json", "--run-id", "def"}).out, "\n");
  };
  const int before = events();
  auto join = [&](const std::string& dir, std::vector<std::string> extra) {
    std::vector<std::string> args = {"run", dir + "/wf.json", "--dir",
                                     dir,   "--run-id",       "def"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Wizq(args);
  };
  const std::string b = machine("b", "true # edited\n", wf);
  r = join(b, {});
  EXPECT_EQ(r.code, 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "step file 'work.sh' in " + b +
                                  " differs from the copy run def was "
                                  "started with"))
      << r.Describe();
  EXPECT_TRUE(Contains(r.err, "--fresh")) << r.Describe();
  const std::string c = machine("c", "true\n", wf);
  fs::remove(c + "/work.sh");
  r = join(c, {});
  EXPECT_EQ(r.code, 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err,
                       "'work.sh', which run def was started with, "
                       "is missing"))
      << r.Describe();
  std::string edited = wf;
  edited.replace(edited.find("Go on?"), 6, "Really?");
  const std::string d = machine("d", "true\n", edited);
  r = join(d, {});
  EXPECT_EQ(r.code, 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "its step 'Confirm' differs")) << r.Describe();
  r = join(a, {"--input", "{\"x\":1}"});
  EXPECT_EQ(r.code, 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "--input")) << r.Describe();
  EXPECT_EQ(events(), before);  // the refused wrote nothing
  // The same definition on another machine joins; --fresh starts again.
  r = join(machine("e", "true\n", wf), {});
  EXPECT_EQ(r.code, 4) << r.Describe();
  r = join(d, {"--fresh"});
  EXPECT_EQ(r.code, 4) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "it was archived (--fresh)")) << r.Describe();
}

}  // namespace
}  // namespace wizq::test
