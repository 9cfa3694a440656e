// SPEC §14, issue 23 item 4: the location's `sslmode` is honoured. A
// cluster of its own listens on 127.0.0.1 with SSL on (a certificate made
// here for 127.0.0.1); wizq's connection options never override what the
// location says: `require` gets an encrypted session, `disable` a plain
// one, and `verify-full` against the wrong root certificate is refused.
#include <gtest/gtest.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "queue/pg/pg_conn.h"
#include "tests/pg/pg_test_util.h"

namespace wizq::test {
namespace {

// A self-signed certificate for 127.0.0.1 in `dir` (name.crt, name.key).
bool MakeCert(const std::string& dir, const std::string& name) {
  const std::string cmd =
      "openssl req -new -x509 -days 2 -nodes -newkey rsa:2048 -subj "
      "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " +
      dir + "/" + name + ".key -out " + dir + "/" + name +
      ".crt >/dev/null 2>&1";
  return system(cmd.c_str()) == 0 &&
         chmod((dir + "/" + name + ".key").c_str(), 0600) == 0;
}

class PgSslTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/wizq-pgssl-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    certs_ = tmpl;
    ASSERT_TRUE(MakeCert(certs_, "server"));
    ASSERT_TRUE(MakeCert(certs_, "other"));
    // The server reads its key as the postgres user.
    const passwd* pg = getuid() == 0 ? getpwnam("postgres") : nullptr;
    if (pg != nullptr) {
      for (const char* f : {"", "/server.key", "/server.crt"}) {
        ASSERT_EQ(chown((certs_ + f).c_str(), pg->pw_uid, pg->pw_gid), 0);
      }
    }
    PgClusterOptions o;
    o.tcp = true;
    o.template_dir = PgTemplateDir();
    o.settings = {"ssl = on", "ssl_cert_file = '" + certs_ + "/server.crt'",
                  "ssl_key_file = '" + certs_ + "/server.key'"};
    cluster_ = std::make_unique<PgCluster>(o);
    ASSERT_OK(cluster_->Start());
  }
  void TearDown() override {
    cluster_.reset();  // stopped and removed
    const std::string rm = "rm -rf " + certs_;
    if (system(rm.c_str()) != 0) ADD_FAILURE() << rm;
  }

  // Whether a session opened with `extra` appended to the TCP location is
  // encrypted; the open's status in *opened.
  bool Encrypted(const std::string& extra, Status* opened) {
    std::unique_ptr<PgConn> c;
    *opened = PgConn::Open(cluster_->TcpLocation() + " " + extra,
                           PgConnOptions(), &c);
    if (!opened->ok()) return false;
    PgResult r;
    *opened = c->Exec(
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", {}, &r);
    return opened->ok() && r.rows() == 1 && r.GetBool(0, "ssl");
  }

  std::string certs_;
  std::unique_ptr<PgCluster> cluster_;
};

TEST_F(PgSslTest, TheLocationsSslModeIsHonoured) {
  Status s;
  EXPECT_TRUE(Encrypted("sslmode=require", &s)) << s.ToString();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(Encrypted("sslmode=disable", &s));
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Encrypted(
      "sslmode=verify-full sslrootcert=" + certs_ + "/server.crt", &s))
      << s.ToString();
  // The wrong root: the server is not believed, nothing is sent.
  EXPECT_FALSE(Encrypted(
      "sslmode=verify-full sslrootcert=" + certs_ + "/other.crt", &s));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("certificate"), std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace wizq::test
