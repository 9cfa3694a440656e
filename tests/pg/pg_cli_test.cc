// Every command on the PostgreSQL store through the real binary (SPEC §14,
// issue 23 item 2): `--store` / WIZQ_STORE on run, status, log, report,
// export, answer, agent, prune and `wizq runs`; two `wizq run` workers in
// two directories (two "machines' local workspaces") sharing one run with
// a side-effect ledger; a run's local workspace of its own; the store's
// credentials kept out of task bodies.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/integration_util.h"
#include "tests/pg/pg_test_util.h"

namespace wizq::test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kPassword[] = "Cli-Shh-Pw-93";

// A workflow: Root spawns `n` Work tasks; every task appends "<id>
// <attempt> <step> <basename of its install dir>" to $SHARED_LEDGER, and
// Root saves its environment to $WIZQ_INSTALL_DIR/root.env.
constexpr char kFanout[] = R"({
  "entrypoint": "Root",
  "options": { "max_concurrency": 3 },
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "env > \"$WIZQ_INSTALL_DIR/root.env\"; echo \"$WIZQ_TASK_ID $WIZQ_ATTEMPT Root $(basename \"$WIZQ_INSTALL_DIR\")\" >> \"$SHARED_LEDGER\"; n=$(jq .value.n); jq -nc --argjson n \"$n\" '[range($n) | {kind: \"Work\", value: {i: .}}]'" },
      "next": ["Work"] },
    { "name": "Work",
      "action": { "kind": "Command", "script": "sleep 0.05; echo \"$WIZQ_TASK_ID $WIZQ_ATTEMPT Work $(basename \"$WIZQ_INSTALL_DIR\")\" >> \"$SHARED_LEDGER\"; echo '[]'" },
      "next": [] }
  ]
})";

// A human gate: Root, then Confirm (a Prompt), then Done.
constexpr char kGate[] = R"({
  "entrypoint": "Root",
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "echo '[{\"kind\": \"Confirm\", \"value\": {}}]'" },
      "next": ["Confirm"] },
    { "name": "Confirm",
      "action": { "kind": "Prompt", "message": "Go on?", "mode": "confirm" },
      "next": [] }
  ]
})";

// A Pool step only an agent does.
constexpr char kPool[] = R"({
  "entrypoint": "Root",
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "echo '[{\"kind\": \"Review\", \"value\": {}}]'" },
      "next": ["Review"] },
    { "name": "Review",
      "action": { "kind": "Pool", "instructions": "Review it." },
      "next": [] }
  ]
})";

class PgCliTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    char tmpl[] = "/tmp/wizq-pgcli-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ledger_ = root_ + "/ledger";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = root_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string Dir(const std::string& name) {
    const std::string path = root_ + "/" + name;
    fs::create_directories(path);
    return path;
  }

  // The environment of every wizq here: the store by WIZQ_STORE unless
  // `args` say --store, no PG password but one given.
  SpawnOptions Opts(std::vector<std::pair<std::string, std::string>> env = {}) {
    SpawnOptions o;
    o.cwd = root_;
    o.env = {{"WIZQ_STORE", cluster_->Location()},
             {"PGPASSWORD", ""},
             {"SHARED_LEDGER", ledger_}};
    for (auto& [name, value] : env) {
      bool replaced = false;
      for (auto& kv : o.env) {
        if (kv.first == name) kv.second = value, replaced = true;
      }
      if (!replaced) o.env.push_back({name, value});
    }
    return o;
  }
  WizqResult Wizq(std::vector<std::string> args, SpawnOptions o) {
    args.insert(args.begin(), "wizq");
    args.insert(args.end(), {"--schema", schema_});
    WizqProcess p(args, o);
    return p.Wait();
  }
  WizqResult Wizq(std::vector<std::string> args) {
    return Wizq(std::move(args), Opts());
  }

  std::vector<std::string> Ledger() {
    std::vector<std::string> lines;
    std::ifstream in(ledger_);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }

  std::string root_, ledger_;
};

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

// The words of a command as sh reads them: ShellQuote's '...' and '\''.
std::vector<std::string> ShellWords(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false, quoted = false;
  for (size_t i = 0; i < line.size(); i++) {
    const char c = line[i];
    if (quoted) {
      if (c == '\'') {
        quoted = false;
      } else {
        word += c;
      }
    } else if (c == '\'') {
      quoted = in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
      in_word = true;
    } else if (c == ' ') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// A password written in --store is left out of the commands wizq prints
// (it would be shown, and "***" in its place would be sent as the
// password): run as printed, the command reads it from PGPASSWORD.
TEST_F(PgCliTest, APrintedCommandRunsAsPrintedWithoutThePassword) {
  ASSERT_OK(CreatePasswordRole(admin_.get(), "pwgate", kPassword));
  const std::string wf = Write("gate.json", kGate);
  const std::string dir = Dir("m1");
  const std::string store = cluster_->Url("pwgate", kPassword);
  const auto no_env = Opts({{"WIZQ_STORE", ""}});
  WizqResult r = Wizq(
      {"run", wf, "--dir", dir, "--run-id", "gate", "--store", store}, no_env);
  ASSERT_EQ(r.code, 4) << r.Describe();  // paused
  r = Wizq({"status", "--run-id", "gate", "--store", store}, no_env);
  ASSERT_EQ(r.code, 0) << r.Describe();
  EXPECT_FALSE(Contains(r.out + r.err, kPassword)) << r.Describe();
  EXPECT_FALSE(Contains(r.out, "***")) << r.Describe();
  const size_t at = r.out.find("wizq answer ");
  ASSERT_NE(at, std::string::npos) << r.Describe();
  std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  line.replace(line.rfind("=VALUE"), 6, "=yes");
  std::vector<std::string> words = ShellWords(line);
  ASSERT_GT(words.size(), 2u) << line;
  EXPECT_NE(std::find(words.begin(), words.end(), cluster_->Url("pwgate")),
            words.end())
      << line;
  words.erase(words.begin());  // "wizq": Wizq adds it, and --schema
  for (size_t i = 0; i + 1 < words.size(); i++) {
    if (words[i] == "--schema")
      words.erase(words.begin() + i, words.begin() + i + 2);
  }
  r = Wizq(words, Opts({{"WIZQ_STORE", ""}, {"PGPASSWORD", kPassword}}));
  ASSERT_EQ(r.code, 0) << line << "\n" << r.Describe();
  r = Wizq({"run", wf, "--dir", dir, "--run-id", "gate", "--store", store},
           no_env);
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

TEST_F(PgCliTest, BadStoreArgumentsAndThePasswordWarning) {
  WizqResult r = Wizq({"status", "--store", "/not/a/database"});
  EXPECT_EQ(r.code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "--store")) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "PostgreSQL location")) << r.Describe();
  // --schema alone means nothing.
  WizqProcess p({"wizq", "status", "--schema", "x"},
                Opts({{"WIZQ_STORE", ""}}));
  r = p.Wait();
  EXPECT_EQ(r.code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "--schema applies to a PostgreSQL store"))
      << r.Describe();
  // No run of that id: exit 2, naming it, the password nowhere.
  const std::string url = cluster_->Url("wizq", kPassword);
  r = Wizq({"status", "--store", url, "--run-id", "nosuch"});
  EXPECT_EQ(r.code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "can read it (ps)")) << r.Describe();
  EXPECT_FALSE(Contains(r.err + r.out, kPassword)) << r.Describe();
  // On the directory store, --run-id must name the run there.
  const std::string wf = Write("gate.json", kGate);
  WizqProcess d({"wizq", "run", wf, "--dir", Dir("plain"), "--run-id", "p"},
                Opts({{"WIZQ_STORE", ""}}));
  ASSERT_EQ(d.Wait().code, 4) << d.result().Describe();
  WizqProcess s({"wizq", "status", "--dir", Dir("plain"), "--run-id", "q"},
                Opts({{"WIZQ_STORE", ""}}));
  r = s.Wait();
  EXPECT_EQ(r.code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "the run there is p")) << r.Describe();
}

// SPEC §14: the password never reaches stdout, stderr, `--json`, a report,
// an export, the local workspace or a task's environment — given by URL,
// by keyword string or by PGPASSWORD; with every command run once
// successfully, with a wrong password, against an unreachable server and
// against a newer schema.
TEST_F(PgCliTest, ThePasswordShowsNowhereWhateverEachCommandMeets) {
  constexpr char kWrong[] = "Cli-Nope-Pw-71";
  ASSERT_OK(CreatePasswordRole(admin_.get(), "pwcli", kPassword));
  const std::string wf = Write("gate.json", kGate);
  const std::string dir = Dir("m1");
  const std::string report = root_ + "/r.html", audit = root_ + "/a.jsonl";
  const std::vector<std::vector<std::string>> commands = {
      {"run", wf, "--dir", dir, "--run-id", "pw", "--json"},
      {"status", "--run-id", "pw"},
      {"status", "--run-id", "pw", "--json"},
      {"log", "--run-id", "pw", "--json"},
      {"log", "--table", "--run-id", "pw"},
      {"report", "--run-id", "pw", "-o", report},
      {"export", "--format", "barnum", "--run-id", "pw"},
      {"export", "--format", "audit", "--run-id", "pw", "-o", audit},
      {"answer", "--run-id", "pw", "2=yes"},
      {"agent", "take", "--run-id", "pw"},
      {"prune", "--dir", dir, "--run-id", "pw"},
      {"runs", "--archived", "--json"},
  };
  const std::string key = "host=" + cluster_->dir() +
                          " port=" + std::to_string(cluster_->port()) +
                          " dbname=postgres user=pwcli password=";
  struct Way {
    const char* name;
    std::string store;       // --store ("" : WIZQ_STORE)
    std::string env_store;   // WIZQ_STORE
    std::string pgpassword;  // PGPASSWORD
  };
  const std::vector<Way> ways = {
      {"url", cluster_->Url("pwcli", kPassword), "", ""},
      {"keywords", key + kPassword, "", ""},
      {"pgpassword", "", cluster_->Url("pwcli"), kPassword},
      {"wrong url", cluster_->Url("pwcli", kWrong), "", ""},
      {"wrong pgpassword", "", cluster_->Url("pwcli"), kWrong},
      // Port 1 of this machine's loopback: refused at once.
      {"unreachable",
       "postgresql://pwcli:" + std::string(kPassword) +
           "@127.0.0.1:1/postgres?connect_timeout=2",
       "", ""},
  };
  auto check = [&](const std::string& what, const std::string& text) {
    for (const char* pw : {kPassword, kWrong}) {
      EXPECT_FALSE(Contains(text, pw)) << what << " holds " << pw << ":\n"
                                       << text;
    }
  };
  auto sweep = [&](const Way& way, const std::string& label) {
    for (std::vector<std::string> args : commands) {
      if (!way.store.empty()) args.insert(args.end(), {"--store", way.store});
      const WizqResult r = Wizq(args, Opts({{"WIZQ_STORE", way.env_store},
                                            {"PGPASSWORD", way.pgpassword}}));
      const std::string what = label + " / " + way.name + " / wizq " + args[0];
      check(what, r.out + r.err);
      EXPECT_FALSE(r.timed_out) << what;
    }
  };
  for (const Way& way : ways) sweep(way, "fresh");
  // The files written on the way, and a task's environment (the gate's
  // Root wrote none: the fan-out's does).
  for (const std::string& f : {report, audit}) {
    std::ifstream in(f);
    std::stringstream text;
    text << in.rdbuf();
    check(f, text.str());
  }
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    check(e.path().string(), text.str());
  }
  // A newer schema: every command refuses it, and says so without the
  // password.
  ASSERT_OK(admin_->Exec("INSERT INTO " + schema_ +
                         ".schema_version (version, applied_by) VALUES (99, "
                         "'wizq 9.0.0')"));
  for (const Way& way : {ways[0], ways[1], ways[2]}) {
    for (std::vector<std::string> args : commands) {
      if (!way.store.empty()) args.insert(args.end(), {"--store", way.store});
      const WizqResult r = Wizq(args, Opts({{"WIZQ_STORE", way.env_store},
                                            {"PGPASSWORD", way.pgpassword}}));
      const std::string what =
          std::string("newer / ") + way.name + " / wizq " + args[0];
      check(what, r.out + r.err);
      EXPECT_NE(r.code, 0) << what << r.Describe();
    }
  }
}

}  // namespace
}  // namespace wizq::test
