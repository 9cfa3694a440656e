#include "tests/pg/pg_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/test_util.h"

namespace wizq::test {
namespace {

namespace fs = std::filesystem;

constexpr char kPgBin[] = "/usr/lib/postgresql/15/bin";
constexpr char kDirPrefix[] = "wizq-pg-";
constexpr char kOwnerFile[] = "owner";

// WIZQ_PG_BIN overrides the directory (a test of the missing case).
std::string Bin(const char* name) {
  const char* dir = std::getenv("WIZQ_PG_BIN");
  return std::string(dir != nullptr && *dir != '\0' ? dir : kPgBin) + "/" +
         name;
}

bool AsRoot() { return geteuid() == 0; }

// Runs argv in `cwd`, as `postgres` if `as_postgres` and we are root
// (PostgreSQL's programs refuse to run as root); returns its exit status,
// with stdout and stderr in *output.
int RunProgram(std::vector<std::string> argv, bool as_postgres,
               const std::string& cwd, std::string* output) {
  if (AsRoot() && as_postgres) {
    argv.insert(argv.begin(), {"/usr/sbin/runuser", "-u", "postgres", "--"});
  }
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    const int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, 0);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    // The server outlives this call: it must not hold the test's other
    // descriptors (a pipe's write end would never see EOF).
    closefrom(3);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  output->clear();
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    output->append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (pid < 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Tail(const std::string& text, size_t n = 2000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), or
// "" if the process is gone or a zombie: with the pid, it names one process
// even after the pid is reused.
std::string StartTime(pid_t pid) {
  const std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return "";
  std::istringstream rest(stat.substr(paren + 2));
  std::string field, state;
  rest >> state;
  if (state == "Z" || state == "X") return "";
  for (int i = 4; i <= 22; i++) rest >> field;
  return field;
}

// --- interruption: the signal handler's table --------------------------------
// Fixed-size, filled before the handler can run, read with async-signal-safe
// calls only: kill(), waitpid(), nanosleep(), _Fork() and execve().
struct Slot {
  std::atomic<pid_t> owner{0};
  std::atomic<pid_t> postmaster{0};
  char dir[256] = {};
  char postmaster_stat[64] = {};  // /proc/<postmaster>/stat
};
Slot g_slots[8];
struct sigaction g_old_actions[3];
constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

// Whether the process whose /proc/<pid>/stat is `stat_path` is gone or a
// zombie (an orphaned server is reparented to a PID 1 that may not reap).
bool GoneOrZombie(const char* stat_path) {
  const int fd = open(stat_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return true;
  for (ssize_t i = n - 1; i >= 0; i--) {
    if (buf[i] == ')') return i + 2 < n && buf[i + 2] == 'Z';
  }
  return false;
}

void OnSignal(int sig) {
  const pid_t self = getpid();
  for (Slot& s : g_slots) {
    if (s.owner.load() != self) continue;
    const pid_t pm = s.postmaster.load();
    if (pm > 0) {
      kill(pm, SIGQUIT);  // immediate shutdown
      const timespec tick = {0, 10 * 1000 * 1000};
      for (int i = 0; i < 500 && !GoneOrZombie(s.postmaster_stat); i++) {
        if (waitpid(pm, nullptr, WNOHANG) == pm) break;
        nanosleep(&tick, nullptr);
      }
    }
    const pid_t child = _Fork();
    if (child == 0) {
      char rm[] = "/bin/rm", rf[] = "-rf", dashes[] = "--";
      char* argv[] = {rm, rf, dashes, s.dir, nullptr};
      char* envp[] = {nullptr};
      execve(rm, argv, envp);
      _exit(127);
    }
    if (child > 0) waitpid(child, nullptr, 0);
  }
  for (int i = 0; i < 3; i++) {
    if (kSignals[i] == sig) sigaction(sig, &g_old_actions[i], nullptr);
  }
  raise(sig);
}

void InstallHandlersOnce() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; i++) sigaction(kSignals[i], &sa, &g_old_actions[i]);
}

int TakeSlot(const std::string& dir) {
  for (int i = 0; i < 8; i++) {
    if (g_slots[i].owner.load() != 0) continue;
    std::snprintf(g_slots[i].dir, sizeof(g_slots[i].dir), "%s", dir.c_str());
    g_slots[i].owner.store(getpid());
    return i;
  }
  return -1;
}

// --- leftovers ---------------------------------------------------------------

// Stops the server of the cluster in `dir` (whoever's it is) and removes
// the directory.
void RemoveCluster(const std::string& dir) {
  const std::string data = dir + "/data";
  const pid_t pm =
      static_cast<pid_t>(std::atol(ReadAll(data + "/postmaster.pid").c_str()));
  if (pm > 0 && !StartTime(pm).empty()) {
    std::string out;
    if (RunProgram({Bin("pg_ctl"), "stop", "-D", data, "-m", "immediate", "-w",
                    "-t", "30"},
                   true, dir, &out) != 0) {
      kill(pm, SIGKILL);
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace

int PgCluster::RemoveLeftovers() {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/tmp", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kDirPrefix, 0) != 0 || !e.is_directory()) continue;
    std::istringstream owner(ReadAll(e.path().string() + "/" + kOwnerFile));
    pid_t pid = 0;
    std::string start;
    if (!(owner >> pid >> start)) {
      // No owner yet: a cluster being made right now, unless it is old.
      const auto age =
          fs::file_time_type::clock::now() - fs::last_write_time(e.path(), ec);
      if (ec || age < std::chrono::minutes(10)) continue;
    } else if (StartTime(pid) == start) {
      continue;  // its owner lives
    }
    // Claimed first by a rename (one winner): test binaries started side
    // by side each clean up, and two remove_all of one tree fail halfway.
    // The new name keeps the prefix and the owner file, so a remover
    // killed in the middle leaves it to the next.
    const std::string claimed =
        e.path().string() + "-gone" + std::to_string(getpid());
    if (rename(e.path().c_str(), claimed.c_str()) != 0) continue;
    RemoveCluster(claimed);
    removed++;
  }
  return removed;
}

PgCluster::PgCluster(PgClusterOptions options) : options_(std::move(options)) {}

PgCluster::~PgCluster() {
  if (slot_ < 0 || g_slots[slot_].owner.load() != getpid()) return;
  if (running() && !Stop(StopMode::kFast).ok() &&
      !Stop(StopMode::kImmediate).ok()) {
    kill(postmaster_pid_, SIGKILL);
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
  g_slots[slot_].postmaster.store(0);
  g_slots[slot_].owner.store(0);
}

Status PgCluster::Create() {
  RemoveLeftovers();
  if (access(Bin("initdb").c_str(), X_OK) != 0) {
    return Status::NotSupported(
        "PostgreSQL 15 is not installed (" + Bin("initdb") +
        " is missing): run `make test`, which installs it (the Debian "
        "package postgresql)");
  }
  const passwd* pg = AsRoot() ? getpwnam("postgres") : nullptr;
  if (AsRoot() && pg == nullptr) {
    return Status::NotSupported(
        "no `postgres` user to run PostgreSQL as (tests run as root): run "
        "`make test`, which installs the Debian package postgresql");
  }
  std::string tmpl = std::string("/tmp/") + kDirPrefix + "XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    return Status::IOErrorFromErrno("mkdtemp", tmpl, errno);
  }
  slot_ = TakeSlot(tmpl);
  if (slot_ < 0) {
    rmdir(tmpl.c_str());
    return Status::Busy("more than 8 clusters in one process");
  }
  dir_ = tmpl;
  InstallHandlersOnce();
  WriteAll(dir_ + "/" + kOwnerFile,
           std::to_string(getpid()) + " " + StartTime(getpid()) + "\n");
  if (pg != nullptr && chown(dir_.c_str(), pg->pw_uid, pg->pw_gid) != 0) {
    return Status::IOErrorFromErrno("chown", dir_, errno);
  }
  WIZQ_RETURN_IF_ERROR(InitData());
  return Configure();
}

// <dir>/data: a copy of the template, else initdb's output (then kept as
// the template).
Status PgCluster::InitData() {
  const std::string data = dir_ + "/data";
  const std::string& cache = options_.template_dir;
  std::string out;
  if (!cache.empty() && fs::exists(cache + "/PG_VERSION")) {
    if (RunProgram({"/bin/cp", "-a", cache, data}, false, "", &out) != 0) {
      return Status::IOError("copying the cluster template " + cache + ": " +
                             out);
    }
  } else {
    if (RunProgram(
            {Bin("initdb"), "-D", data, "-U", "wizq", "-A", "trust", "-E",
             "UTF8", "--locale=C", "--no-sync", "--no-instructions"},
            true, dir_, &out) != 0) {
      return Status::IOError("initdb failed: " + Tail(out));
    }
    if (!cache.empty()) {
      // Made aside and renamed into place: another binary may do the same.
      const std::string aside = cache + ".tmp" + std::to_string(getpid());
      std::string ignored;
      if (RunProgram({"/bin/cp", "-a", data, aside}, false, "", &ignored) !=
              0 ||
          rename(aside.c_str(), cache.c_str()) != 0) {
        std::error_code ec;
        fs::remove_all(aside, ec);
      }
    }
  }
  return Status::OK();
}

Status PgCluster::Configure() {
  if (options_.tcp) {
    // A free loopback port: bound to port 0, read back, released.
    const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      if (s >= 0) close(s);
      return Status::IOErrorFromErrno("binding a loopback port", "", errno);
    }
    port_ = ntohs(a.sin_port);
    close(s);
  }
  std::string conf = "\n# wizq test cluster (tests/pg/pg_cluster.cc)\n";
  conf += "listen_addresses = '" +
          std::string(options_.tcp ? "127.0.0.1" : "") + "'\n";
  conf += "port = " + std::to_string(port_) + "\n";
  conf += "unix_socket_directories = '" + dir_ + "'\n";
  conf += std::string("fsync = ") + (options_.fsync ? "on" : "off") + "\n";
  for (const std::string& line : options_.settings) conf += line + "\n";
  // Appended (and pg_hba.conf rewritten) in place: the files keep their
  // owner, the postgres user.
  std::ofstream(dir_ + "/data/postgresql.conf", std::ios::app) << conf;
  std::ofstream(dir_ + "/data/pg_hba.conf", std::ios::trunc)
      << "local all wizq trust\n"
         "local all all scram-sha-256\n"
         "host all wizq 127.0.0.1/32 trust\n"
         "host all all 127.0.0.1/32 scram-sha-256\n";
  return Status::OK();
}

Status PgCluster::Start() {
  if (dir_.empty()) WIZQ_RETURN_IF_ERROR(Create());
  if (running()) return Status::OK();
  std::string out;
  if (RunProgram({Bin("pg_ctl"), "start", "-w", "-t", "60", "-D",
                  dir_ + "/data", "-l", dir_ + "/log"},
                 true, dir_, &out) != 0) {
    return Status::IOError("pg_ctl start failed: " + Tail(out) +
                           "\nserver log:\n" + Tail(ReadAll(dir_ + "/log")));
  }
  return ReadPostmasterPid();
}

Status PgCluster::ReadPostmasterPid() {
  postmaster_pid_ = static_cast<pid_t>(
      std::atol(ReadAll(dir_ + "/data/postmaster.pid").c_str()));
  if (postmaster_pid_ <= 0) {
    return Status::Corruption("no pid in " + dir_ + "/data/postmaster.pid");
  }
  Slot& slot = g_slots[slot_];
  std::snprintf(slot.postmaster_stat, sizeof(slot.postmaster_stat),
                "/proc/%d/stat", static_cast<int>(postmaster_pid_));
  slot.postmaster.store(postmaster_pid_);
  return Status::OK();
}

Status PgCluster::Stop(StopMode mode) {
  if (!running()) return Status::OK();
  std::string out;
  const char* m = mode == StopMode::kFast ? "fast" : "immediate";
  if (RunProgram({Bin("pg_ctl"), "stop", "-w", "-t", "60", "-D", dir_ + "/data",
                  "-m", m},
                 true, dir_, &out) != 0) {
    return Status::IOError(std::string("pg_ctl stop -m ") + m +
                           " failed: " + Tail(out));
  }
  // Reaped if it was our child (a test that made itself a subreaper).
  waitpid(postmaster_pid_, nullptr, WNOHANG);
  postmaster_pid_ = 0;
  g_slots[slot_].postmaster.store(0);
  return Status::OK();
}

std::string PgCluster::Location(const std::string& user,
                                const std::string& dbname) const {
  return "host=" + dir_ + " port=" + std::to_string(port_) + " user=" + user +
         " dbname=" + dbname;
}

std::string PgCluster::TcpLocation(const std::string& user,
                                   const std::string& dbname) const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " user=" + user +
         " dbname=" + dbname;
}

std::string PgCluster::Url(const std::string& user, const std::string& password,
                           const std::string& dbname) const {
  return "postgresql://" + user + (password.empty() ? "" : ":" + password) +
         "@/" + dbname + "?host=" + dir_ + "&port=" + std::to_string(port_);
}

Status PgCluster::Connect(std::unique_ptr<PgConn>* out) const {
  PgConnOptions o;
  o.application_name = "wizq test";
  return PgConn::Open(Location(), o, out);
}

Status PgCluster::TerminateBackend(int pid) const {
  std::unique_ptr<PgConn> admin;
  WIZQ_RETURN_IF_ERROR(Connect(&admin));
  PgResult r;
  WIZQ_RETURN_IF_ERROR(admin->Exec(
      "SELECT pg_terminate_backend($1::int, 5000) AS done", {pid}, &r));
  if (!r.GetBool(0, "done")) {
    return Status::Busy("backend " + std::to_string(pid) +
                        " did not end within 5 s");
  }
  return Status::OK();
}

std::string PgCluster::NewSchemaName(const std::string& prefix) {
  std::string name = "t" + std::to_string(++schemas_) + "_";
  for (char c : prefix) {
    if (name.size() >= 48) break;
    const char l =
        static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    name.push_back((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') ? l : '_');
  }
  return name;
}

std::string PgTemplateDir() { return BuildDir() + "/pg15-template"; }

bool PgHoldsWizqSchema(const std::string& location) {
  std::unique_ptr<PgConn> c;
  PgResult r;
  Status s = PgConn::Open(location, PgConnOptions(), &c);
  if (s.ok()) {
    s = c->Exec("SELECT 1 FROM pg_namespace WHERE nspname = 'wizq'", {}, &r);
  }
  return s.ok() && r.rows() == 1;
}

}  // namespace wizq::test
