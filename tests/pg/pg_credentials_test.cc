// Credentials hygiene (queue/pg/pg_location.h, SPEC §14): the display form
// of a location, whether it holds a password, and that a password never
// appears in a Status message, however it was given (URL, keyword string,
// PGPASSWORD, password file) and whatever fails (a wrong password, an
// unreachable host, a malformed location).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "queue/pg/pg_conn.h"
#include "queue/pg/pg_location.h"
#include "tests/pg/pg_test_util.h"
#include "tests/test_util.h"

namespace wizq::test {
namespace {

TEST(PgLocationTest, RedactsEveryPasswordForm) {
  const std::pair<std::string, std::string> cases[] = {
      {"postgresql://alice:s3cret@db.example:5432/runs",
       "postgresql://alice:***@db.example:5432/runs"},
      {"postgres://alice@db/runs", "postgres://alice@db/runs"},
      {"postgresql://db/runs?sslmode=require&password=s3cret&connect_timeout=5",
       "postgresql://db/runs?sslmode=require&password=***&connect_timeout=5"},
      {"postgresql://db/runs?pass%77ord=s3cret",
       "postgresql://db/runs?pass%77ord=***"},
      {"postgresql://alice:pa/ss?w@rd@db/runs",
       "postgresql://alice:***@db/runs"},
      {"postgresql://u:p@h/db?sslpassword=k3y",
       "postgresql://u:***@h/db?sslpassword=***"},
      {"host=db user=alice password=s3cret dbname=runs",
       "host=db user=alice password=*** dbname=runs"},
      {"host=db password = 'with \\' quote and space' dbname=runs",
       "host=db password = *** dbname=runs"},
      {"host=db PASSWORD=s3cret", "host=db PASSWORD=***"},
      // Malformed: the unreadable rest is hidden when a password is near.
      {"host=db password=se cret dbname=runs", "host=db password=*** ***"},
      {"host=db password='unterminated", "host=db password=***"},
      {"host=db dbname x password=s3cret", "host=db ***"},
      {"host=db dbname=runs", "host=db dbname=runs"},
      {"", ""},
  };
  for (const auto& [location, shown] : cases) {
    EXPECT_EQ(RedactPgLocation(location), shown) << location;
  }
}

// What a printed command (the resume line of `status`, a gate's hint)
// carries: no password at all, so that run as printed it reads it from a
// password file or PGPASSWORD instead of sending "***".
TEST(PgLocationTest, LeavesEveryPasswordFormOutOfACommand) {
  const std::pair<std::string, std::string> cases[] = {
      {"postgresql://alice:s3cret@db.example:5432/runs",
       "postgresql://alice@db.example:5432/runs"},
      {"postgres://alice@db/runs", "postgres://alice@db/runs"},
      {"postgresql://db/runs?sslmode=require&password=s3cret&connect_timeout=5",
       "postgresql://db/runs?sslmode=require&connect_timeout=5"},
      {"postgresql://db/runs?password=s3cret&sslmode=require",
       "postgresql://db/runs?sslmode=require"},
      {"postgresql://db/runs?sslmode=require&password=s3cret",
       "postgresql://db/runs?sslmode=require"},
      {"postgresql://db/runs?password=s3cret", "postgresql://db/runs"},
      {"postgresql://db/runs?pass%77ord=s3cret", "postgresql://db/runs"},
      {"postgresql://u:p@h/db?sslpassword=k3y&password=x",
       "postgresql://u@h/db"},
      {"host=db user=alice password=s3cret dbname=runs",
       "host=db user=alice dbname=runs"},
      {"host=db password = 'with \\' quote and space' dbname=runs",
       "host=db dbname=runs"},
      {"host=db PASSWORD=s3cret", "host=db PASSWORD=***"},  // not libpq's
      {"password=s3cret host=db", "host=db"},
      // Malformed: as RedactPgLocation shows it (it would not run anyway).
      {"host=db password='unterminated", "host=db password=***"},
      {"host=db dbname x password=s3cret", "host=db ***"},
      {"host=db dbname=runs", "host=db dbname=runs"},
      {"password=s3cret", "password=***"},  // nothing else to name
      {"", ""},
  };
  for (const auto& [location, shown] : cases) {
    EXPECT_EQ(PgLocationWithoutPassword(location), shown) << location;
    EXPECT_FALSE(PgLocationHasPassword(PgLocationWithoutPassword(location)) &&
                 shown.find("***") == std::string::npos)
        << location;
  }
}

// An '@' in a query value: libpq ends the user info at the first '@'
// before a '/', the display's first reading at the last '@'. Where the
// two differ, what either finds is hidden, and a printed command is shown
// redacted rather than stripped by a guess.
TEST(PgLocationTest, AnAtSignInTheQueryHidesThePasswordStill) {
  for (const std::string location :
       {"postgresql://h/db?password=s3cret&application_name=a@b",
        "postgresql://u:s3cret@h/db?application_name=a@b",
        "postgresql://h/db?application_name=a@b&password=s3cret"}) {
    EXPECT_EQ(RedactPgLocation(location).find("s3cret"), std::string::npos)
        << location << " -> " << RedactPgLocation(location);
    EXPECT_EQ(PgLocationWithoutPassword(location).find("s3cret"),
              std::string::npos)
        << location << " -> " << PgLocationWithoutPassword(location);
  }
}

TEST(PgLocationTest, TellsWhetherAPasswordIsWritten) {
  EXPECT_TRUE(PgLocationHasPassword("postgresql://alice:s3cret@db/runs"));
  EXPECT_TRUE(PgLocationHasPassword("postgresql://db/runs?password=s3cret"));
  EXPECT_TRUE(PgLocationHasPassword("host=db password=s3cret"));
  EXPECT_TRUE(PgLocationHasPassword("host=db sslpassword=k3y"));
  EXPECT_TRUE(PgLocationHasPassword("host=db password='unterminated"));
  EXPECT_FALSE(PgLocationHasPassword("postgresql://alice@db/runs"));
  EXPECT_FALSE(PgLocationHasPassword("postgresql://alice:@db/runs"));
  EXPECT_FALSE(PgLocationHasPassword("host=db user=alice"));
  EXPECT_FALSE(PgLocationHasPassword("service=wizq"));
  const std::string w = PgPasswordWarning("--store");
  for (const char* safer :
       {"--store", "PGPASSFILE", "PGSERVICEFILE", "PGPASSWORD"}) {
    EXPECT_NE(w.find(safer), std::string::npos) << w;
  }
}

TEST(PgLocationTest, ScrubbedEnvironmentHoldsTheSecrets) {
  std::vector<std::string> names(std::begin(kPgScrubbedEnv),
                                 std::end(kPgScrubbedEnv));
  EXPECT_NE(std::find(names.begin(), names.end(), "WIZQ_STORE"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "PGPASSWORD"), names.end());
}

// A role that logs in with a password (scram-sha-256 for all but the
// superuser, pg_cluster.h).
constexpr char kPassword[] = "Zq7-Sekr1t-Pw-81";
constexpr char kWrong[] = "Wr0ng-Guess-Qx-93";
// Parts of the passwords that no message may hold either.
constexpr const char* kFragments[] = {"Sekr1t", "Pw-81", "Guess", "Qx-93"};

class PgCredentialsTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_OK(CreatePasswordRole(admin_.get(), "pwuser", kPassword));
    unsetenv("PGPASSWORD");
    unsetenv("PGPASSFILE");
  }
  void TearDown() override {
    unsetenv("PGPASSWORD");
    unsetenv("PGPASSFILE");
  }

  // Opens `location`; checks that no message about it holds a password.
  Status Open(const std::string& location, std::unique_ptr<PgConn>* c) {
    PgConnOptions o;
    o.connect_timeout_s = 2;
    const Status s = PgConn::Open(location, o, c);
    ExpectClean(s, location);
    if (*c) ExpectClean(Status::IOError((*c)->display_location()), location);
    return s;
  }
  void ExpectClean(const Status& s, const std::string& how) {
    const std::string m = s.ToString();
    for (const char* p : {kPassword, kWrong}) {
      EXPECT_EQ(m.find(p), std::string::npos) << how << " -> " << m;
    }
    for (const char* f : kFragments) {
      EXPECT_EQ(m.find(f), std::string::npos) << how << " -> " << m;
    }
  }
  // Connects with a good password, fails a statement: nothing leaks.
  void ExpectWorks(const std::string& location) {
    std::unique_ptr<PgConn> c;
    ASSERT_OK(Open(location, &c));
    PgResult r;
    ASSERT_OK(c->Exec("SELECT current_user AS u", {}, &r));
    EXPECT_EQ(r.Get(0, "u"), "pwuser");
    ExpectClean(c->Exec("SELECT no_such_column"), location);
  }
  void ExpectRefused(const std::string& location) {
    std::unique_ptr<PgConn> c;
    const Status s = Open(location, &c);
    EXPECT_TRUE(s.IsIOError()) << location << ": " << s.ToString();
    EXPECT_NE(s.message().find("password authentication failed"),
              std::string::npos)
        << s.ToString();
  }
  std::string Keywords(const char* password) {
    return cluster_->Location("pwuser") + " password='" + password + "'";
  }
};

TEST_F(PgCredentialsTest, PasswordInUrl) {
  ExpectWorks(cluster_->Url("pwuser", kPassword));
  ExpectRefused(cluster_->Url("pwuser", kWrong));
  ExpectRefused(cluster_->Url("pwuser", "", "postgres") +
                "&password=" + kWrong);
}

TEST_F(PgCredentialsTest, PasswordInKeywordString) {
  ExpectWorks(Keywords(kPassword));
  ExpectRefused(Keywords(kWrong));
}

TEST_F(PgCredentialsTest, PasswordInPgpassword) {
  setenv("PGPASSWORD", kPassword, 1);
  ExpectWorks(cluster_->Location("pwuser"));
  setenv("PGPASSWORD", kWrong, 1);
  ExpectRefused(cluster_->Location("pwuser"));
}

TEST_F(PgCredentialsTest, PasswordInPassfile) {
  ScratchDir dir;
  const std::string file = dir.Join("pgpass");
  WriteAll(file, std::string("*:*:*:pwuser:") + kPassword + "\n");
  chmod(file.c_str(), 0600);
  setenv("PGPASSFILE", file.c_str(), 1);
  ExpectWorks(cluster_->Location("pwuser"));
  WriteAll(file, std::string("*:*:*:pwuser:") + kWrong + "\n");
  ExpectRefused(cluster_->Location("pwuser"));
}

TEST_F(PgCredentialsTest, UnreachableHostAndMalformedLocations) {
  std::unique_ptr<PgConn> c;
  const std::string refused =
      std::string("postgresql://pwuser:") + kPassword + "@127.0.0.1:1/postgres";
  Status s = Open(refused, &c);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("postgresql://pwuser:***@127.0.0.1:1/postgres"),
            std::string::npos)
      << s.message();
  // A TEST-NET-1 address: nothing answers (a timeout or no route).
  s = Open(std::string("host=192.0.2.1 connect_timeout=1 password=") + kWrong,
           &c);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  // libpq quotes a bad percent-escape, here inside the password.
  s = Open(std::string("postgresql://pwuser:Zq7%zz") + kFragments[0] +
               "@localhost/postgres",
           &c);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("percent-encoded"), std::string::npos)
      << s.message();
  s = Open(cluster_->Url("pwuser") + "&password=" + kFragments[0] + "%zz", &c);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  // libpq quotes the word after an unquoted space in a keyword value.
  s = Open("host=db password=Zq7 " + std::string(kFragments[0]) + " x=y", &c);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("missing \"=\""), std::string::npos)
      << s.message();
  s = Open(std::string("host=db password='") + kPassword, &c);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

}  // namespace
}  // namespace wizq::test
