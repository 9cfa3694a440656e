// wizq_pool_torture: the kill -9 torture of Pool steps (`make torture`,
// tests/pool_torture_test.cc, docs/RELIABILITY.md "Kill -9 torture").
//
//   wizq_pool_torture --wizq PATH --cycles N [--seed S] [--fanout F]
//                     [--workdir D] [--keep]
//
// Two `wizq run` and three `wizq agent serve --jobs 2` share one install
// directory on a mixed workflow: Root (a Command) spawns F Pool tasks
// (Work, lease 1 s) and F Command tasks (Cmd); every Work and Cmd records
// its start and end in a ledger and holds a per-task flock while it runs,
// so an attempt that starts while an earlier one of the same task still
// runs is recorded as an overlap. Each cycle SIGKILLs one of the five
// processes at random after 30-600 ms: a `wizq run`, a `serve` alone (its
// agent COMMAND lives on as an orphan) or a `serve` with its COMMANDs; the
// victim is started again after 0-100 ms. A run that completes is checked
// and the next one starts in a fresh directory, until N kills are done;
// the last run is then finished without kills.
//
// Checked for every run: `wizq status --json` says completed, every task
// done and no task twice (lost, duplicated), no overlap, and each task's
// executions beyond the first are counted (extra_runs: attempts in flight
// at a kill or a lapsed lease; reported, not an error).
//
// Output: one line
//   POOL-TORTURE cycles=<n> runs=<k> lost=0 duplicated=0 overlapped=0
//   extra_runs=<x>
// Exit 0 only if lost, duplicated and overlapped are all 0; 1 otherwise
// (the failed run's directory is kept), 2 on bad arguments.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace wizq::torture {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The body of Work (as the agent COMMAND) and of Cmd: ledger lines and a
// flock held for the whole attempt ($1: the install directory's work dir).
constexpr const char* kBody = R"SH(#!/bin/sh
w="$(dirname "$0")"
payload=$(cat)
kind=$(printf '%s' "$payload" | jq -r '.task.kind // .kind')
n=$(printf '%s' "$payload" | jq -r '.task.value.n // .value.n')
exec 9>"$w/locks/$kind-$n"
flock -n 9 || echo "$kind $n" >> "$w/overlaps"
echo "start $kind $n $$" >> "$w/ledger"
sleep "0.$(od -An -N1 -tu1 /dev/urandom | tr -d ' ' | cut -c1)"
echo "end $kind $n" >> "$w/ledger"
echo '[]'
)SH";

std::string Workflow(int fanout, const std::string& body) {
  Json roots = Json::array();
  for (int i = 0; i < fanout; i++) {
    roots.push_back({{"kind", "Work"}, {"value", {{"n", i}}}});
    roots.push_back({{"kind", "Cmd"}, {"value", {{"n", i}}}});
  }
  Json wf = {
      {"entrypoint", "Root"},
      {"options", {{"max_retries", 60}, {"timeout", 60}}},
      {"steps",
       {{{"name", "Root"},
         {"action",
          {{"kind", "Command"}, {"script", "echo '" + roots.dump() + "'"}}},
         {"next", {"Work", "Cmd"}}},
        {{"name", "Work"},
         {"action", {{"kind", "Pool"}, {"instructions", "Work on n."}}},
         {"options", {{"lease", 1}}}},
        {{"name", "Cmd"},
         {"action", {{"kind", "Command"}, {"script", body}}}}}}};
  return wf.dump(2);
}

struct Proc {
  std::vector<std::string> args;
  pid_t pid = -1;
};

pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    const int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Statuses of children reaped by Reap(), for Exited().
std::map<pid_t, int> g_reaped;

// Reaps every exited child (orphans adopted as subreaper included).
void Reap() {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) g_reaped[pid] = status;
}

// Whether child `pid` has exited, with its status.
bool Exited(pid_t pid, int* status) {
  Reap();
  auto it = g_reaped.find(pid);
  if (it == g_reaped.end()) return false;
  *status = it->second;
  g_reaped.erase(it);
  return true;
}

// The processes whose parent is `pid` (the agent COMMANDs of a serve).
std::vector<pid_t> Children(pid_t pid) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const pid_t p = static_cast<pid_t>(atoi(e->d_name));
    if (p <= 0) continue;
    std::ifstream f("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat;
    std::getline(f, stat);
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == pid) out.push_back(p);
  }
  closedir(d);
  return out;
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string Capture(const std::vector<std::string>& args) {
  std::string cmd;
  for (const std::string& a : args) cmd += "'" + a + "' ";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

struct Counts {
  int lost = 0, duplicated = 0, overlapped = 0, extra = 0;
};

// Checks a completed run in `work` (install dir `work`/dir).
bool Check(const std::string& wizq, const std::string& work, int fanout,
           Counts* c) {
  const Json st =
      Json::parse(Capture({wizq, "status", "--dir", work + "/dir", "--json"}),
                  nullptr, false);
  bool ok = st.is_object() && st["status"] == "completed";
  std::map<std::string, int> seen;
  if (st.is_object()) {
    for (const Json& t : st["tasks"]) {
      if (t["state"] != "done") ok = false;
      if (t["type"] == "Root") continue;
      seen[t["type"].get<std::string>() + " " + t["inputs"]["n"].dump()]++;
    }
  }
  std::map<std::string, int> ends;
  std::istringstream ledger(Read(work + "/ledger"));
  std::string line;
  while (std::getline(ledger, line)) {
    if (line.rfind("end ", 0) == 0) ends[line.substr(4)]++;
  }
  for (int i = 0; i < fanout; i++) {
    for (const char* kind : {"Work", "Cmd"}) {
      const std::string key = std::string(kind) + " " + std::to_string(i);
      if (seen[key] == 0 || ends[key] == 0) c->lost++;
      if (seen[key] > 1) c->duplicated += seen[key] - 1;
      if (ends[key] > 1) c->extra += ends[key] - 1;
    }
  }
  std::istringstream ov(Read(work + "/overlaps"));
  while (std::getline(ov, line)) c->overlapped++;
  return ok && c->lost == 0 && c->duplicated == 0 && c->overlapped == 0;
}

int Main(int argc, char** argv) {
  std::string wizq, workdir;
  int cycles = 30, fanout = 8;
  uint32_t seed = std::random_device{}();
  bool keep = false;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--wizq") {
      wizq = next();
    } else if (a == "--cycles") {
      cycles = atoi(next().c_str());
    } else if (a == "--fanout") {
      fanout = atoi(next().c_str());
    } else if (a == "--seed") {
      seed = static_cast<uint32_t>(strtoul(next().c_str(), nullptr, 10));
    } else if (a == "--workdir") {
      workdir = next();
    } else if (a == "--keep") {
      keep = true;
    } else {
      std::fprintf(stderr, "wizq_pool_torture: unknown argument %s\n",
                   a.c_str());
      return 2;
    }
  }
  if (wizq.empty() || cycles < 0 || fanout < 1) {
    std::fprintf(stderr, "usage: wizq_pool_torture --wizq PATH --cycles N\n");
    return 2;
  }
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  if (workdir.empty()) {
    char tmpl[] = "/tmp/wizq-pool-torture-XXXXXX";
    workdir = mkdtemp(tmpl);
  }
  std::fprintf(stderr, "wizq_pool_torture: seed %u, workdir %s\n", seed,
               workdir.c_str());
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  Counts total;
  int kills = 0, runs = 0;
  bool failed = false;
  while (!failed && (kills < cycles || runs == 0)) {
    const std::string work = workdir + "/run" + std::to_string(runs);
    fs::create_directories(work + "/locks");
    fs::create_directories(work + "/dir");
    const std::string body = work + "/body.sh";
    std::ofstream(body) << kBody;
    chmod(body.c_str(), 0755);
    std::ofstream(work + "/wf.json") << Workflow(fanout, body);
    const std::string dir = work + "/dir";
    std::vector<Proc> procs;
    for (int i = 0; i < 2; i++) {
      procs.push_back({{wizq, "run", work + "/wf.json", "--dir", dir, "--jobs",
                        "3", "--quiet"}});
    }
    for (int i = 0; i < 3; i++) {
      procs.push_back({{wizq, "agent", "serve", "--dir", dir, "--jobs", "2",
                        "--agent", "a" + std::to_string(i), "--", body}});
    }
    for (Proc& p : procs) p.pid = Spawn(p.args, work + "/procs.log");
    const Clock::time_point deadline = Clock::now() + std::chrono::minutes(5);
    while (true) {
      std::this_thread::sleep_for(milliseconds(pick(30, 600)));
      bool run_done = false;
      for (Proc& p : procs) {
        int status = 0;
        if (p.pid <= 0 || !Exited(p.pid, &status)) continue;
        const bool is_run = &p < &procs[2];
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        run_done = run_done || (is_run && ok);
        // A serve ends when the run has; anything else starts again.
        p.pid = ok ? -1 : Spawn(p.args, work + "/procs.log");
      }
      if (run_done || Clock::now() > deadline) break;
      if (kills >= cycles) continue;  // the last run finishes unharmed
      Proc& victim = procs[pick(0, 4)];
      if (victim.pid <= 0) continue;
      const bool with_children = &victim >= &procs[2] && pick(0, 1) == 1;
      std::vector<pid_t> children;
      if (with_children) children = Children(victim.pid);
      kill(victim.pid, SIGKILL);
      for (pid_t c : children) kill(-c, SIGKILL);
      int status = 0;
      while (!Exited(victim.pid, &status)) {
        std::this_thread::sleep_for(milliseconds(1));
      }
      kills++;
      std::this_thread::sleep_for(milliseconds(pick(0, 100)));
      victim.pid = Spawn(victim.args, work + "/procs.log");
    }
    // The run has completed (or timed out): stop what is left.
    for (Proc& p : procs) {
      if (p.pid <= 0) continue;
      const Clock::time_point end = Clock::now() + std::chrono::seconds(10);
      int status = 0;
      while (!Exited(p.pid, &status)) {
        if (Clock::now() > end) kill(p.pid, SIGKILL);
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
    Reap();
    Counts c;
    if (!Check(wizq, work, fanout, &c)) {
      failed = true;
      std::fprintf(stderr,
                   "wizq_pool_torture: run %d failed: lost=%d duplicated=%d "
                   "overlapped=%d; kept in %s\n",
                   runs, c.lost, c.duplicated, c.overlapped, work.c_str());
    } else if (!keep) {
      fs::remove_all(work);
    }
    total.lost += c.lost;
    total.duplicated += c.duplicated;
    total.overlapped += c.overlapped;
    total.extra += c.extra;
    runs++;
  }
  std::printf(
      "POOL-TORTURE cycles=%d runs=%d lost=%d duplicated=%d overlapped=%d "
      "extra_runs=%d\n",
      kills, runs, total.lost, total.duplicated, total.overlapped, total.extra);
  if (!failed && !keep) fs::remove_all(workdir);
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace wizq::torture

int main(int argc, char** argv) { return wizq::torture::Main(argc, argv); }
