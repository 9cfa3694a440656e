// The test bed of the machines torture: see bed.h.
#include "tests/machines/torture/bed.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace wizq::machines {
namespace {

void ExecWith(const std::vector<std::string>& args,
              const std::map<std::string, std::string>& env) {
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  _exit(127);
}

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// A process of its own (double-forked: nobody reaps it) that copies lines
// from `in` to `out`, each after the monotonic ms it was read at; it ends
// when every writer of `in` has (the command and what it left running).
void StartStamper(int in, int out) {
  const pid_t mid = fork();
  if (mid != 0) {
    while (mid > 0 && waitpid(mid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return;
  }
  if (fork() != 0) _exit(0);
  setpgid(0, 0);
  // Nothing of the driver's is kept open (its stdout may be a test
  // runner's pipe, the write end of `in` would never let it end).
  const int null = open("/dev/null", O_RDWR);
  for (int fd = 0; fd <= 2; fd++) dup2(null, fd);
  for (int fd = 3; fd < 1024; fd++) {
    if (fd != in && fd != out) close(fd);
  }
  FILE* r = fdopen(in, "r");
  FILE* w = fdopen(out, "a");
  char* line = nullptr;
  size_t cap = 0;
  while (r != nullptr && w != nullptr && getline(&line, &cap, r) > 0) {
    fprintf(w, "%lld %s", static_cast<long long>(MonoMs()), line);
    fflush(w);
  }
  _exit(0);
}

}  // namespace

int64_t MonoMs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

Ran RunCommand(const std::vector<std::string>& args,
               const std::map<std::string, std::string>& env, int timeout_s) {
  Ran r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return r;
  const pid_t pid = fork();
  if (pid < 0) return r;
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    ExecWith(args, env);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  const int64_t until = MonoMs() + timeout_s * 1000LL;
  int status = 0;
  bool done = false;
  char buf[4096];
  while (!done) {
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
      r.out.append(buf, n);
    done = waitpid(pid, &status, WNOHANG) == pid;
    if (!done && MonoMs() > until) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      done = true;
    }
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    r.out.append(buf, n);
  close(fds[0]);
  r.code = ExitCode(status);
  return r;
}

pid_t StartCommand(const std::vector<std::string>& args,
                   const std::map<std::string, std::string>& env,
                   const std::string& log, bool stamp) {
  int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int p[2] = {-1, -1};
  if (stamp && out >= 0 && pipe2(p, O_CLOEXEC) == 0) {
    StartStamper(p[0], out);
    close(p[0]);
    close(out);
    out = p[1];
  }
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(out, 1);
    dup2(out, 2);
    ExecWith(args, env);
  }
  if (out >= 0) close(out);
  return pid;
}

void ContinueStoppedChildren() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat;
    try {  // the process may end while it is read (ESRCH)
      std::ifstream in(e.path() / "stat");
      stat.assign(std::istreambuf_iterator<char>(in), {});
    } catch (const std::ios_base::failure&) {
      continue;
    }
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream f(stat.substr(paren + 2));
    std::string state;
    pid_t ppid = 0;
    f >> state >> ppid;
    if (state == "T" && ppid == getpid()) {
      kill(std::stoi(e.path().filename().string()), SIGCONT);
    }
  }
}

Bed::Bed(BedPaths paths) : paths_(std::move(paths)) {
  owner_ = std::to_string(getpid());
  setenv("WIZQ_MACHINES_OWNER", owner_.c_str(), 1);
  pg_dir_ = paths_.work + "/pg";
  proxy_sock_ = paths_.work + "/proxy.sock";
  proxy_log_ = paths_.work + "/proxy.log";
}

Bed::~Bed() {
  if (proxy_ > 0) {
    kill(proxy_, SIGKILL);
    waitpid(proxy_, nullptr, 0);
  }
  std::error_code ec;  // the server's log outlives the cluster
  std::filesystem::copy_file(
      pg_dir_ + "/postgres.log", paths_.work + "/postgres.log",
      std::filesystem::copy_options::overwrite_existing, ec);
  if (up_) Machines({"down"}, 120);
}

Ran Bed::Machines(const std::vector<std::string>& args, int timeout_s) {
  std::vector<std::string> all = {"bash", paths_.machines_sh};
  all.insert(all.end(), args.begin(), args.end());
  return RunCommand(all, {}, timeout_s);
}

bool Bed::Up(const std::vector<std::string>& machines, std::string* error) {
  std::vector<std::string> up = {"up"};
  up.insert(up.end(), machines.begin(), machines.end());
  up_ = true;
  Ran r = Machines(up, 120);
  if (r.code != 0) {
    *error = "machines.sh up: " + r.out;
    return false;
  }
  for (const std::string& m : machines) {
    std::ifstream in("/run/wizq-machines/" + owner_ + "/m/" + m + "/index");
    in >> index_[m];
  }
  r = Machines({"db-up", pg_dir_, "5432"}, 120);
  if (r.code != 0) {
    *error = "machines.sh db-up: " + r.out;
    return false;
  }
  proxy_ = StartCommand(
      {"bash", paths_.machines_sh, "exec", "db", paths_.proxy, "--listen",
       "10.213.0.1:6432", "--upstream", "10.213.0.1:5432", "--control",
       proxy_sock_, "--log", proxy_log_},
      {}, paths_.work + "/proxy.out");
  for (int i = 0; i < 500 && access(proxy_sock_.c_str(), F_OK) != 0; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (access(proxy_sock_.c_str(), F_OK) != 0) {
    *error =
        "the fault proxy did not start (see " + paths_.work + "/proxy.out)";
    return false;
  }
  return true;
}

Ran Bed::Proxy(const std::string& command) {
  return RunCommand({paths_.proxy, "--control", proxy_sock_, "--send", command},
                    {}, 10);
}

std::string Bed::MachineStore() const {
  return "host=10.213.0.1 port=6432 user=postgres dbname=postgres "
         "sslmode=disable connect_timeout=3";
}

std::string Bed::HostStore() const {
  return "host=" + pg_dir_ + " port=5432 user=postgres dbname=postgres";
}

std::vector<std::string> Bed::InMachine(const std::string& machine,
                                        const std::string& slot,
                                        const std::vector<std::string>& args) {
  std::vector<std::string> all = {"bash",
                                  paths_.machines_sh,
                                  "exec",
                                  machine,
                                  "sh",
                                  "-c",
                                  "echo $$ >\"$0\" && exec \"$@\"",
                                  PidFile(slot)};
  all.insert(all.end(), args.begin(), args.end());
  return all;
}

std::string Bed::PidFile(const std::string& slot) const {
  return paths_.work + "/pids/" + slot;
}

int Bed::Index(const std::string& machine) const {
  auto it = index_.find(machine);
  return it == index_.end() ? 0 : it->second;
}

std::string Bed::MachineOfAddress(const std::string& peer) const {
  for (const auto& [m, i] : index_) {
    const std::string addr = "10.213." + std::to_string(i) + ".2:";
    if (peer.rfind(addr, 0) == 0) return m;
  }
  return "";
}

std::string Bed::BootId(const std::string& machine) {
  std::ifstream in("/run/wizq-machines/" + owner_ + "/m/" + machine +
                   "/boot_id");
  std::string id;
  in >> id;
  return id;
}

}  // namespace wizq::machines
