// The fixture of the CLI suites on the PostgreSQL store (pg_cli_test.cc,
// pg_cli_hints_test.cc): a scratch root per case, the store by
// WIZQ_STORE, a shared side-effect ledger, and the workflows they run.
#ifndef WIZQ_TESTS_PG_PG_CLI_FIXTURE_H_
#define WIZQ_TESTS_PG_PG_CLI_FIXTURE_H_

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

}  // namespace wizq::test

#endif  // WIZQ_TESTS_PG_PG_CLI_FIXTURE_H_
