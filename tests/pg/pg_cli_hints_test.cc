// What the commands on the PostgreSQL store say to a user (SPEC §14): bad
// store arguments and the password warning, the password nowhere in any
// output whatever each command meets, and the commands wizq prints to be
// run again (the password left out, not masked).
#include "tests/pg/pg_cli_fixture.h"

namespace wizq::test {
namespace {

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

// A store location libpq cannot read, or a bad --schema, is invalid input
// (exit 2) on every command that takes them, named once in the message.
TEST_F(PgCliTest, AnUnreadableLocationOrABadSchemaIsExit2OnEveryCommand) {
  const std::string wf = Write("gate.json", kGate);
  const std::vector<std::vector<std::string>> commands = {
      {"run", wf, "--dir", Dir("m1")},
      {"status"},
      {"log"},
      {"report", "-o", root_ + "/r.html"},
      {"export", "--format", "barnum"},
      {"answer", "2=yes"},
      {"agent", "take"},
      {"prune"},
      {"runs"},
      {"mcp"},
      {"db", "status"},
      {"db", "migrate"},
  };
  for (const std::vector<std::string>& args : commands) {
    std::vector<std::string> bad = args;
    bad.insert(bad.end(), {"--store", "host=/tmp dbnmae=x"});
    WizqResult r = Wizq(bad, Opts({{"WIZQ_STORE", ""}}));
    EXPECT_EQ(r.code, 2) << args[0] << " " << r.Describe();
    EXPECT_TRUE(Contains(r.err, "dbnmae")) << args[0] << " " << r.Describe();
    std::vector<std::string> schema = args;
    schema.insert(schema.begin(), "wizq");
    schema.insert(schema.end(), {"--schema", "Bad"});
    WizqProcess p(schema, Opts());
    r = p.Wait();
    EXPECT_EQ(r.code, 2) << args[0] << " " << r.Describe();
    EXPECT_EQ(CountOf(r.err, "--schema"), 1) << args[0] << " " << r.Describe();
  }
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
