// `wizq db migrate|status` through the real binary, on the test cluster:
// exit codes, what it prints, and that the store's password never shows.
#include <gtest/gtest.h>

#include <algorithm>

#include "queue/pg/pg_migrate.h"
#include "tests/integration_util.h"
#include "tests/pg/pg_test_util.h"
#include "util/shell_quote.h"

namespace wizq::test {
namespace {

constexpr char kPassword[] = "Cl1-Hush-Pw-57";
constexpr char kWrong[] = "Cl1-Nope-Pw-64";

SpawnOptions WithEnv(const std::string& name, const std::string& value) {
  SpawnOptions o;
  o.env.push_back({name, value});
  return o;
}

class PgDbCliTest : public PgTest {
 protected:
  // `wizq db <args> [--schema <schema_>]`, WIZQ_STORE and PG* variables
  // cleared unless `env` sets them.
  WizqResult Db(std::vector<std::string> args, SpawnOptions opts = {}) {
    args.insert(args.begin(), {"wizq", "db"});
    if (std::find(args.begin(), args.end(), "--schema") == args.end()) {
      args.insert(args.end(), {"--schema", schema_});
    }
    for (const char* name : {"WIZQ_STORE", "PGPASSWORD", "PGPASSFILE"}) {
      bool set = false;
      for (const auto& [k, v] : opts.env) set = set || k == name;
      if (!set) opts.env.push_back({name, ""});
    }
    WizqProcess p(args, opts);
    return p.Wait();
  }
  // Neither password anywhere in what it printed.
  static void ExpectNoPassword(const WizqResult& r) {
    for (const char* p : {kPassword, kWrong}) {
      EXPECT_FALSE(Contains(r.out, p)) << r.Describe();
      EXPECT_FALSE(Contains(r.err, p)) << r.Describe();
    }
  }
};

TEST_F(PgDbCliTest, StatusAndMigrate) {
  const std::string store = cluster_->Location();
  WizqResult r = Db({"status", "--store", store});
  EXPECT_EQ(r.code, 3) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "store: " + store)) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "schema version: none")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "migration due: yes")) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "wizq db status: ")) << r.Describe();
  // The command to paste names the store (what follows runs it).
  EXPECT_TRUE(Contains(r.err, "run `wizq db migrate --store " +
                                  ShellQuote(store) + " --schema "))
      << r.Describe();

  r = Db({"migrate", "--store", store});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "applied migration 1\n")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "is now at version 1")) << r.Describe();
  r = Db({"migrate", "--store", store});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "nothing to apply")) << r.Describe();
  EXPECT_FALSE(Contains(r.out, "applied")) << r.Describe();

  r = Db({"status"}, WithEnv("WIZQ_STORE", store));
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "schema version: 1\n")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "this wizq: schema version 1")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "migration due: no\n")) << r.Describe();
  EXPECT_EQ(r.err, "");

  // A newer schema (another wizq migrated it further): refused, untouched.
  ASSERT_OK(admin_->Exec("INSERT INTO " + schema_ +
                         ".schema_version (version, applied_by) VALUES (2, "
                         "'wizq 9.0.0')"));
  PgResult before;
  ASSERT_OK(
      admin_->Exec("SELECT string_agg(version || xmin::text, ',') AS v "
                   "FROM " +
                       schema_ + ".schema_version",
                   {}, &before));
  for (const char* cmd : {"status", "migrate"}) {
    r = Db({cmd, "--store", store});
    EXPECT_EQ(r.code, 3) << r.Describe();
    EXPECT_TRUE(Contains(r.err, "version 2, newer than this wizq knows (1)"))
        << r.Describe();
    EXPECT_TRUE(Contains(r.err, "untouched")) << r.Describe();
  }
  PgResult after;
  ASSERT_OK(
      admin_->Exec("SELECT string_agg(version || xmin::text, ',') AS v "
                   "FROM " +
                       schema_ + ".schema_version",
                   {}, &after));
  EXPECT_EQ(after.Get(0, "v"), before.Get(0, "v"));
}

TEST_F(PgDbCliTest, TwoMigrateProcessesAtOnce) {
  std::vector<std::string> args = {
      "wizq",     "db",   "migrate", "--store", cluster_->Location(),
      "--schema", schema_};
  WizqProcess a(args), b(args);
  const WizqResult ra = a.Wait(), rb = b.Wait();
  EXPECT_EQ(ra.code, 0) << ra.Describe();
  EXPECT_EQ(rb.code, 0) << rb.Describe();
  EXPECT_EQ(Contains(ra.out, "applied migration 1") +
                Contains(rb.out, "applied migration 1"),
            1)
      << ra.Describe() << rb.Describe();
}

TEST_F(PgDbCliTest, BadArgumentsExit2UnreachableExit3) {
  WizqResult r = Db({"status"});
  EXPECT_EQ(r.code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "--store")) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "WIZQ_STORE")) << r.Describe();

  r = Db({"migrate", "--store", cluster_->Location(), "--schema", "Bad-Name"});
  EXPECT_EQ(r.code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "--schema \"Bad-Name\"")) << r.Describe();

  r = Db({"migrate", "--store", "host=db dbname"});
  EXPECT_EQ(r.code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "cannot read the store location"))
      << r.Describe();

  r = Db({"status", "--store", "host=127.0.0.1 port=1 connect_timeout=2"});
  EXPECT_EQ(r.code, 3) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "cannot connect to the store")) << r.Describe();
}

TEST_F(PgDbCliTest, ThePasswordNeverShows) {
  ASSERT_OK(CreatePasswordRole(admin_.get(), "cliuser", kPassword));
  const std::string url = cluster_->Url("cliuser", kPassword);
  const std::string shown = cluster_->Url("cliuser", "***");

  // On the command line: works, warns naming the safer ways.
  WizqResult r = Db({"migrate", "--store", url});
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "store: " + shown)) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "warning: a password is written in --store"))
      << r.Describe();
  EXPECT_TRUE(Contains(r.err, "PGPASSFILE")) << r.Describe();
  ExpectNoPassword(r);

  // In WIZQ_STORE: not in `ps`, no warning.
  r = Db({"status"}, WithEnv("WIZQ_STORE", url));
  EXPECT_EQ(r.code, 0) << r.Describe();
  EXPECT_FALSE(Contains(r.err, "warning")) << r.Describe();
  ExpectNoPassword(r);

  // Wrong passwords, however given: exit 3, never printed.
  const std::string keywords = cluster_->Location("cliuser");
  ScratchDir dir;
  WriteAll(dir.Join("pgpass"), std::string("*:*:*:cliuser:") + kWrong + "\n");
  chmod(dir.Join("pgpass").c_str(), 0600);
  const std::vector<std::pair<std::vector<std::string>, SpawnOptions>> wrong = {
      {{"status", "--store", cluster_->Url("cliuser", kWrong)}, {}},
      {{"status", "--store", keywords + " password=" + kWrong}, {}},
      {{"status"}, WithEnv("WIZQ_STORE", keywords + " password=" + kWrong)},
      {{"status", "--store", keywords}, WithEnv("PGPASSWORD", kWrong)},
      {{"status", "--store", keywords},
       WithEnv("PGPASSFILE", dir.Join("pgpass"))}};
  for (const auto& [args, opts] : wrong) {
    r = Db(args, opts);
    EXPECT_EQ(r.code, 3) << r.Describe();
    EXPECT_TRUE(Contains(r.err, "password authentication failed"))
        << r.Describe();
    ExpectNoPassword(r);
  }
  // A mistyped command line quotes the location back: without it.
  r = Db({"migrate", url});
  EXPECT_EQ(r.code, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "not expected: " + shown)) << r.Describe();
  ExpectNoPassword(r);

  // An unreachable host with the password written in the location.
  r = Db({"status", "--store",
          std::string("postgresql://cliuser:") + kPassword + "@127.0.0.1:1/x"});
  EXPECT_EQ(r.code, 3) << r.Describe();
  ExpectNoPassword(r);
}

}  // namespace
}  // namespace wizq::test
