// The store's schema and its migrations (queue/pg/pg_migrate.h) against a
// real PostgreSQL: a fresh create, an idempotent re-run, migrators at once,
// an older schema refused naming `wizq db migrate`, a newer one refused and
// left untouched, and the rest of the database never touched.
#include "queue/pg/pg_migrate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "queue/pg/pg_conn.h"
#include "tests/pg/pg_test_util.h"

namespace wizq::test {
namespace {

// What a wizq with one more step than this one would apply.
std::vector<std::string_view> StepsOfANewerWizq() {
  std::vector<std::string_view> steps = PgMigrationSteps();
  steps.push_back("CREATE TABLE {schema}.step_two (x int);");
  return steps;
}

class PgMigrateTest : public PgTest {
 protected:
  // Every relation (with its kind, persistence and columns), index
  // definition and constraint of the schemas `where` selects, as one text:
  // equal texts, nothing changed.
  std::string Snapshot(const std::string& where) {
    PgResult r;
    const Status s = admin_->Exec(
        "SELECT string_agg(line, E'\\n' ORDER BY line) AS s FROM ("
        " SELECT n.nspname || '.' || c.relname || ' ' || c.relkind::text || "
        "  c.relpersistence::text || ' ' || coalesce((SELECT "
        "string_agg(a.attname "
        "  || ':' || format_type(a.atttypid, a.atttypmod), ',' ORDER BY "
        "  a.attnum) FROM pg_attribute a WHERE a.attrelid = c.oid AND "
        "  a.attnum > 0 AND NOT a.attisdropped), '') || ' ' || "
        "  coalesce(pg_get_indexdef(c.oid), '') AS line"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE " +
            where +
            " UNION ALL SELECT n.nspname || ' constraint ' || "
            "pg_get_constraintdef(k.oid)"
            " FROM pg_constraint k JOIN pg_namespace n ON n.oid = "
            "k.connamespace"
            " WHERE " +
            where +
            " UNION ALL SELECT 'schema ' || n.nspname FROM pg_namespace n "
            "WHERE " +
            where + ") lines",
        {}, &r);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return std::string(r.rows() > 0 ? r.Get(0, "s") : "");
  }
  // Snapshot of our schema, with the rows of its version table and their
  // xmin (a rewritten row has a new one).
  std::string SnapshotOurs() {
    std::string out = Snapshot("n.nspname = '" + schema_ + "'");
    PgResult r;
    int version = 0;
    PgSchema schema(admin_.get(), schema_);
    if (schema.ReadVersion(&version).ok() && version > 0) {
      EXPECT_OK(admin_->Exec(
          "SELECT string_agg(version || ' ' || applied_by || ' ' || "
          "xmin::text, ';' ORDER BY version) AS v FROM " +
              schema_ + ".schema_version",
          {}, &r));
      out += "\nversions " + std::string(r.Get(0, "v"));
    }
    return out;
  }
  static std::string NotOurs(const std::string& schema) {
    return "n.nspname <> '" + schema +
           "' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND "
           "n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'";
  }

  int Version() {
    int v = -1;
    EXPECT_OK(PgSchema(admin_.get(), schema_).ReadVersion(&v));
    return v;
  }
};

TEST(PgSchemaNameTest, OnlyPlainNamesAreAccepted) {
  for (const char* ok : {"wizq", "wizq_ci", "_w2", "a"}) {
    EXPECT_TRUE(ValidatePgSchemaName(ok).ok()) << ok;
  }
  for (const std::string& bad :
       std::vector<std::string>{"", "Wizq", "pg_wizq", "1wizq", "wiz-q",
                                "wiz q", "wizq\"; --", std::string(64, 'a')}) {
    const Status s = ValidatePgSchemaName(bad);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
    EXPECT_NE(s.message().find("--schema"), std::string::npos);
  }
}

TEST_F(PgMigrateTest, FreshCreateThenIdempotentRerun) {
  PgSchema schema(admin_.get(), schema_);
  EXPECT_EQ(Version(), 0);
  std::vector<int> applied;
  ASSERT_OK(schema.Migrate(&applied));
  EXPECT_EQ(applied, std::vector<int>{1});
  EXPECT_EQ(Version(), kPgSchemaVersion);
  ASSERT_OK(schema.Check());

  const std::string snap = SnapshotOurs();
  for (const char* part :
       {".runs rp", ".tasks rp", ".events rp", ".schema_version rp",
        ".workers ru" /* unlogged */, "PRIMARY KEY (run, task_id)",
        "UNIQUE (run, dedup_key)", "PRIMARY KEY (run, seq)", "inputs:text",
        "body:text", "tasks_ready ON " /* partial: */, "WHERE (state = 0)",
        "next_seq:bigint", "versions 1 wizq "}) {
    EXPECT_NE(snap.find(part), std::string::npos) << part << "\n" << snap;
  }
  EXPECT_EQ(snap.find("jsonb"), std::string::npos) << snap;

  ASSERT_OK(schema.Migrate(&applied));
  EXPECT_TRUE(applied.empty());
  EXPECT_EQ(SnapshotOurs(), snap);
  ASSERT_OK(schema.Open());
  EXPECT_EQ(SnapshotOurs(), snap);
}

TEST_F(PgMigrateTest, OpenCreatesAnAbsentSchema) {
  PgSchema schema(admin_.get(), schema_);
  Status s = schema.Check();
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_NE(s.message().find("wizq db migrate"), std::string::npos);
  EXPECT_EQ(Version(), 0);  // Check() wrote nothing
  ASSERT_OK(schema.Open());
  EXPECT_EQ(Version(), kPgSchemaVersion);
}

TEST_F(PgMigrateTest, MigrationWaitsForTheMigrationLock) {
  auto holder = Connect();
  ASSERT_OK(holder->Begin());
  ASSERT_OK(holder->Exec("SELECT pg_advisory_xact_lock($1::int4, $2::int4)",
                         {kPgMigrateLockSpace, PgMigrateLockKey(schema_)}));
  auto migrator = Connect();
  Status migrated;
  std::vector<int> applied;
  std::thread t([&] {
    PgSchema schema(migrator.get(), schema_);
    migrated = schema.Migrate(&applied);
  });
  bool waiting = false;
  for (int i = 0; i < 2000 && !waiting; i++) {
    PgResult r;
    ASSERT_OK(admin_->Exec(
        "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND "
        "NOT granted AND pid = $1 AND classid = $2::int::oid AND "
        "objid = $3::int::oid",
        {migrator->backend_pid(), kPgMigrateLockSpace,
         PgMigrateLockKey(schema_)},
        &r));
    waiting = r.GetInt(0, "n") == 1;
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(waiting) << "the migrator did not wait for the lock";
  EXPECT_EQ(Version(), 0);
  ASSERT_OK(holder->Commit());
  t.join();
  ASSERT_OK(migrated);
  EXPECT_EQ(applied, std::vector<int>{1});
  EXPECT_EQ(Version(), kPgSchemaVersion);
}

TEST_F(PgMigrateTest, ConcurrentMigratorsApplyEachStepOnce) {
  for (int round = 0; round < 5; round++) {
    schema_ = cluster_->NewSchemaName("concurrent");
    constexpr int kMigrators = 3;
    std::vector<std::unique_ptr<PgConn>> conns;
    for (int i = 0; i < kMigrators; i++) conns.push_back(Connect());
    std::atomic<int> ready{0};
    std::vector<Status> results(kMigrators);
    std::vector<std::vector<int>> applied(kMigrators);
    std::vector<std::thread> threads;
    for (int i = 0; i < kMigrators; i++) {
      threads.emplace_back([&, i] {
        PgSchema schema(conns[i].get(), schema_, StepsOfANewerWizq());
        ready++;
        while (ready.load() < kMigrators) {
        }
        results[i] = schema.Migrate(&applied[i]);
      });
    }
    for (auto& t : threads) t.join();
    std::vector<int> all;
    for (int i = 0; i < kMigrators; i++) {
      EXPECT_TRUE(results[i].ok()) << results[i].ToString();
      all.insert(all.end(), applied[i].begin(), applied[i].end());
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, (std::vector<int>{1, 2})) << "round " << round;
    PgResult r;
    ASSERT_OK(admin_->Exec(
        "SELECT count(*) AS n FROM " + schema_ + ".schema_version", {}, &r));
    EXPECT_EQ(r.GetInt(0, "n"), 2);
  }
}

TEST_F(PgMigrateTest, OlderSchemaIsRefusedNamingMigrate) {
  std::vector<int> applied;
  ASSERT_OK(PgSchema(admin_.get(), schema_).Migrate(&applied));
  PgSchema newer(admin_.get(), schema_, StepsOfANewerWizq());
  const std::string before = SnapshotOurs();
  Status s = newer.Check();
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_NE(s.message().find("version 1, older than this wizq's (2)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("wizq db migrate"), std::string::npos);
  s = newer.Open();  // an existing older schema is not upgraded by itself
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_EQ(SnapshotOurs(), before);

  ASSERT_OK(newer.Migrate(&applied));
  EXPECT_EQ(applied, std::vector<int>{2});
  ASSERT_OK(newer.Check());
}

TEST_F(PgMigrateTest, NewerSchemaIsRefusedAndLeftUntouched) {
  std::vector<int> applied;
  ASSERT_OK(
      PgSchema(admin_.get(), schema_, StepsOfANewerWizq()).Migrate(&applied));
  EXPECT_EQ(applied, (std::vector<int>{1, 2}));
  const std::string before = SnapshotOurs();
  ASSERT_NE(before.find("step_two"), std::string::npos);

  PgSchema ours(admin_.get(), schema_);
  for (int i = 0; i < 3; i++) {
    Status s = i == 0   ? ours.Check()
               : i == 1 ? ours.Open()
                        : ours.Migrate(&applied);
    EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
    EXPECT_NE(s.message().find("version 2, newer than this wizq knows (1)"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("untouched"), std::string::npos);
  }
  EXPECT_TRUE(applied.empty());
  EXPECT_EQ(SnapshotOurs(), before);
}

TEST_F(PgMigrateTest, OtherTablesAndSchemasAreUntouched) {
  const std::string other = schema_ + "_other";
  ASSERT_OK(admin_->ExecScript("CREATE TABLE public." + schema_ +
                               "_keep (id int PRIMARY KEY, v text);"
                               "INSERT INTO public." +
                               schema_ +
                               "_keep VALUES (1, 'one'), (2, 'two');"
                               "CREATE SCHEMA " +
                               other +
                               ";"
                               "CREATE TABLE " +
                               other +
                               ".runs (x int);"
                               "CREATE TABLE " +
                               other +
                               ".schema_version (version int);"
                               "INSERT INTO " +
                               other + ".schema_version VALUES (99);"));
  const std::string before = Snapshot(NotOurs(schema_));
  ASSERT_NE(before.find(other + ".runs"), std::string::npos);
  std::vector<int> applied;
  ASSERT_OK(PgSchema(admin_.get(), schema_).Migrate(&applied));
  EXPECT_EQ(applied, std::vector<int>{1});
  EXPECT_EQ(Snapshot(NotOurs(schema_)), before);
  PgResult r;
  ASSERT_OK(
      admin_->Exec("SELECT (SELECT string_agg(v, ',' ORDER BY id) FROM "
                   "public." +
                       schema_ +
                       "_keep) AS keep, (SELECT "
                       "version FROM " +
                       other + ".schema_version) AS v",
                   {}, &r));
  EXPECT_EQ(r.Get(0, "keep"), "one,two");
  EXPECT_EQ(r.GetInt(0, "v"), 99);
  // The other schema's version table is not ours: its 99 is not read.
  int version = 0;
  ASSERT_OK(PgSchema(admin_.get(), other).ReadVersion(&version));
  EXPECT_EQ(version, 99);
  EXPECT_EQ(Version(), 1);
}

}  // namespace
}  // namespace wizq::test
