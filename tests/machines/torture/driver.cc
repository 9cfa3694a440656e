// wizq_machines_torture: many machines on one PostgreSQL store under
// faults, Jepsen-style (`make torture` mode machines, tests/machines/
// machines_torture_test.sh at a bounded size; docs/RELIABILITY.md, "Many
// machines under faults"). Needs root.
//
//   wizq_machines_torture --build DIR --source DIR [--machines N]
//       [--faults N] [--min-per-kind N] [--lease S] [--seed S]
//       [--max-seconds S] [--run-seconds S] [--kinds K,K...]
//       [--allow-unmatched] [--keep]
//
// N machines (tests/machines/machines.sh; default 4), each with two `wizq
// run` workers (on every other machine one of them `wizq run --agent`,
// which runs Pool tasks itself), one `wizq agent serve` and one agent over
// MCP (the SDK client, mcp_agent.mjs) or the CLI (cli_agent.sh), its wall
// clock off by
// up to an hour, all reaching the database through the fault proxy. Runs follow
// one another: each is a fan-out of Work (Command), Review (Pool, answered by
// the agents), Ask (Prompt, answered by `wizq answer` from a machine at
// random), Shared (the same child spawned by many: dedup) and Root's
// finally hook; the last machine joins each run late. Meanwhile the
// injector (faults.h) injects one fault after another until --faults were
// injected; the run under way then finishes in peace. Every task body
// writes the ledger (body.cc); at the end each run's audit log is exported
// and checked (history.h), and each fault is counted if an attempt was in
// flight on the machine it hit (any machine for a database fault).
//
// Output: per kind, injected and counted; then
//   MACHINES-TORTURE faults=<counted> lost=0 duplicated=0 overlapped=0
//   stale=0 extra_runs_unmatched=0 flipped=0
// and a worker that outlived its run by 30 s is `hung`, a claim neither
// started nor ended for 3 leases `idle` (history.h). --allow-unmatched
// prints unmatched extra runs, hung workers and idle claims as warnings
// (a post-mortem's look past them). Exit 0 if all of those are 0,
// every run completed, the clocks calibrate and each kind was counted at least
// --min-per-kind times; 1 otherwise
// (the directory is kept and named), 2 bad arguments, 3 the bed failed.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/machines/torture/torture.h"

namespace wizq::machines {

namespace fs = std::filesystem;

bool Torture::SetUp(std::string* error) {
  for (int i = 1; i <= o_.machines; i++)
    machines_.push_back("m" + std::to_string(i));
  fs::create_directories(Ledger() + "/locks");
  fs::create_directories(work_ + "/pids");
  fs::create_directories(work_ + "/logs");
  std::error_code ec;
  fs::copy_file(o_.source + "/tests/machines/torture/mcp_agent.mjs", McpAgent(),
                fs::copy_options::overwrite_existing, ec);
  if (ec ||
      !fs::exists(o_.build + "/node/node_modules/@modelcontextprotocol/sdk")) {
    *error = "the MCP SDK is not installed in " + o_.build +
             "/node (run: sh tests/mcp/npm_setup.sh tests/mcp " + o_.build +
             "/node)";
    return false;
  }
  if (!bed_.Up(machines_, error)) return false;
  // Every machine but the first off by up to an hour, either way.
  for (size_t i = 0; i < machines_.size(); i++) {
    const int64_t offset = i == 0 ? 0 : Pick(-3600, 3600);
    bed_.Machines({"clock", machines_[i], std::to_string(offset)});
    Calibrate(machines_[i], offset);
  }
  Ran r = RunCommand({Wizq(), "db", "migrate", "--store", bed_.HostStore()});
  if (r.code != 0) {
    *error = "wizq db migrate: " + r.out;
    return false;
  }
  return true;
}

// What a probe linked like wizq maps under a clock offset: libfaketime,
// and jemalloc when wizq links it (not in a sanitizer build).
std::string Torture::WantLibs() {
  if (want_libs_.empty()) {
    const Ran r = RunCommand({"ldd", Wizq()}, {}, 20);
    const bool jemalloc = r.out.find("libjemalloc") != std::string::npos;
    want_libs_ = jemalloc ? "jemalloc,faketime" : "faketime";
  }
  return want_libs_;
}

// A calibration record: the machine's monotonic clock (and that its wizq,
// linked with jemalloc, loads libfaketime when its wall clock is off).
void Torture::Calibrate(const std::string& m, int64_t offset_s) {
  timespec host_wall;
  clock_gettime(CLOCK_REALTIME, &host_wall);
  const int64_t before = MonoMs();
  Ran r = bed_.Machines({"exec", m, o_.build + "/wizq_clock_probe"});
  const int64_t after = MonoMs();
  double wall = 0, mono = 0;
  std::string libs;
  std::istringstream(r.out) >> wall >> mono >> libs;
  Json rec = {{"e", "calibration"},
              {"m", m},
              {"before", before},
              {"after", after},
              {"mono", static_cast<int64_t>(mono * 1000)},
              {"wall_ms", std::llround(wall * 1000)},
              {"host_wall_ms",
               int64_t{host_wall.tv_sec} * 1000 + host_wall.tv_nsec / 1000000},
              {"offset_s", offset_s},
              {"libs", libs},
              {"want_libs", WantLibs()}};
  std::ofstream(Ledger() + "/ledger", std::ios::app) << rec.dump() << "\n";
}

std::string Torture::Workflow(int round) {
  const std::string body = Body() + " " + Ledger();
  Json roots = Json::array();
  const int64_t lengths[] = {300, 1000, 2000, 3000, 3000, 6000};
  // Reviews: ten first, more than the agents take at once, so that a
  // worker `run --agent` (which claims in id order) gets some too; then
  // one after every eighth Work.
  auto review = [&](int r) {
    roots.push_back({{"kind", "Review"},
                     {"value", {{"r", r}, {"ms", lengths[Pick(0, 5)]}}}});
  };
  for (int r = 0; r < 10; r++) review(r);
  for (int i = 0; i < 80; i++) {
    roots.push_back(
        {{"kind", "Work"}, {"value", {{"i", i}, {"ms", lengths[Pick(0, 5)]}}}});
    if (i % 8 == 7) review(10 + i / 8);
  }
  for (int q = 0; q < 2; q++)
    roots.push_back({{"kind", "Ask"}, {"value", {{"q", q}}}});
  fs::create_directories(work_ + "/runs");
  const std::string roots_file =
      work_ + "/runs/roots" + std::to_string(round) + ".json";
  std::ofstream(roots_file) << roots.dump();
  const Json command = {{"kind", "Command"}, {"script", body}};
  Json wf = {
      {"entrypoint", "Root"},
      {"options", {{"max_retries", 40}, {"max_concurrency", 3}}},
      {"steps",
       {{{"name", "Root"},
         {"action",
          {{"kind", "Command"},
           {"script", "cat >/dev/null; cat " + roots_file}}},
         {"next", {"Work", "Review", "Ask"}},
         {"finally", command}},
        {{"name", "Work"}, {"action", command}, {"next", {"Mark", "Shared"}}},
        {{"name", "Review"},
         {"action", {{"kind", "Pool"}, {"instructions", "Review it."}}},
         {"options", {{"lease", o_.lease_s}}},
         {"next", {"Mark"}}},
        {{"name", "Ask"},
         {"action",
          {{"kind", "Prompt"}, {"mode", "input"}, {"message", "Say it."}}},
         {"next", {"Echo"}}},
        {{"name", "Echo"}, {"action", command}, {"next", Json::array()}},
        {{"name", "Shared"}, {"action", command}, {"next", Json::array()}},
        {{"name", "Mark"},
         {"action",
          {{"kind", "Command"}, {"script", "cat >/dev/null; echo '[]'"}}},
         {"next", Json::array()}}}}};
  const std::string path = work_ + "/runs/wf" + std::to_string(round) + ".json";
  std::ofstream(path) << wf.dump(1);
  return path;
}

void Torture::StartSlot(Slot* s, const std::string& run) {
  std::vector<std::string> args;
  if (s->via == "cli") {
    args = {"bash", o_.source + "/tests/machines/torture/cli_agent.sh",
            Wizq(), run,
            Body(), Ledger()};
  } else if (s->via == "mcp") {
    args = {"node", McpAgent(), Wizq(), run, Body(), Ledger()};
  } else if (s->agent) {
    args = {Wizq(), "agent", "serve", "--agent", s->name, "--run-id",
            run,    "--dir", "/mnt",  "--",      Body(),  Ledger()};
  } else {
    args = {Wizq(),
            "run",
            work_ + "/runs/wf" + run.substr(1) + ".json",
            "--lease",
            std::to_string(o_.lease_s),
            "--run-id",
            run,
            "--dir",
            "/mnt",
            "--quiet"};
    if (s->run_agent) {
      args.insert(args.end(),
                  {"--agent", "'" + Body() + "' '" + Ledger() + "'"});
    }
  }
  fs::remove(bed_.PidFile(s->name));
  Event({{"e", "start"}, {"slot", s->name}, {"run", run}, {"mono", MonoMs()}});
  s->pid = StartCommand(bed_.InMachine(s->machine, s->name, args),
                        {{"WIZQ_STORE", bed_.MachineStore()}},
                        work_ + "/logs/" + s->name + ".log", /*stamp=*/true);
}

// Reaps what exited and starts again what should run.
void Torture::Supervise(std::vector<Slot>* slots, const std::string& run,
                        bool over) {
  const int64_t now = MonoMs();
  for (Slot& s : *slots) {
    int status = 0;
    if (s.pid > 0 && waitpid(s.pid, &status, WNOHANG) == s.pid) {
      s.pid = -1;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      Event({{"e", "exit"},
             {"slot", s.name},
             {"run", run},
             {"mono", now},
             {"code", WIFEXITED(status) ? WEXITSTATUS(status)
                                        : 128 + WTERMSIG(status)}});
      s.done = ok;  // 0: the run ended
      // Not before its machine is back: asked again at each start (while
      // a death kills, its machine is down for good: reaped then, a slot
      // that took that for its start time was never started again).
      s.start_at = now + Pick(200, 1000);
    }
    if (s.pid < 0 && !over && !s.done && now >= s.start_at &&
        now >= injector_->DownUntil(s.machine)) {
      StartSlot(&s, run);
    }
  }
}

Json Torture::Status(const std::string& run) {
  Ran r = RunCommand({Wizq(), "status", "--json", "--store", bed_.HostStore(),
                      "--run-id", run},
                     {}, 30);
  return r.code == 0 ? Json::parse(r.out, nullptr, false) : Json();
}

// Answers each Ask that waits, from a machine at random.
void Torture::Answer(const std::string& run, const Json& status) {
  if (!status.is_object() || !status.contains("tasks")) return;
  for (const Json& t : status["tasks"]) {
    if (t.value("type", "") != "Ask" || t.contains("answer")) continue;
    if (t.value("state", "") != "pending") continue;
    const Json inputs = Json::parse(t.value("inputs", Json("{}")).is_string()
                                        ? t["inputs"].get<std::string>()
                                        : t.value("inputs", Json()).dump(),
                                    nullptr, false);
    const std::string q =
        std::to_string(inputs.is_object() ? inputs.value("q", 0) : 0);
    const std::string value = "answer-" + run + "-" + q;
    answers_[run][q] = value;
    const std::string m =
        machines_[static_cast<size_t>(Pick(0, machines_.size() - 1))];
    std::vector<std::string> args = {
        "bash",
        o_.source + "/tests/machines/machines.sh",
        "exec",
        m,
        Wizq(),
        "answer",
        "--run-id",
        run,
        "--dir",
        "/mnt",
        std::to_string(t.value("id", 0)) + "=" + value};
    RunCommand(args, {{"WIZQ_STORE", bed_.MachineStore()}}, 20);
  }
}

// For a post-mortem of a hung worker: every thread's stack of each `wizq`
// under `root` (the host-side nsenter of its slot), by gdb, into `path`.
void Torture::Backtraces(pid_t root, const std::string& path) {
  std::vector<std::string> todo = {std::to_string(root)};
  std::ofstream out(path);
  while (!todo.empty()) {
    const std::string pid = todo.back();
    todo.pop_back();
    std::ifstream children("/proc/" + pid + "/task/" + pid + "/children");
    for (std::string c; children >> c;) todo.push_back(c);
    std::string comm;
    std::getline(std::ifstream("/proc/" + pid + "/comm"), comm);
    if (comm != "wizq") continue;
    const Ran r = RunCommand(
        {"gdb", "-batch", "-ex", "thread apply all bt", "-p", pid}, {}, 30);
    out << "== pid " << pid << " (host)\n" << r.out << "\n";
  }
}

// Every slot has 30 s from the run's end to exit; each is judged by its
// own state at that time (a slot that exited while another was waited for
// is not hung).
void Torture::EndSlots(std::vector<Slot>* slots, const std::string& run) {
  const int64_t until = MonoMs() + 30000;
  auto reap = [](Slot& s) {
    if (s.pid > 0 && waitpid(s.pid, nullptr, WNOHANG) == s.pid) s.pid = -1;
    return s.pid > 0;
  };
  for (bool left = true; left && MonoMs() < until;) {
    left = false;
    for (Slot& s : *slots) left = reap(s) || left;
    if (left) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (Slot& s : *slots) {
    if (!reap(s)) continue;
    std::ifstream in(bed_.PidFile(s.name));
    std::string pid;
    in >> pid;
    fprintf(stderr, "machines torture: %s did not exit after run %s; killed\n",
            s.name.c_str(), run.c_str());
    // A worker hangs only on a store that never answers (a half-open
    // connection with neither keepalives nor the answer timeout).
    if (!s.agent) {
      hung_.push_back(s.name);
      Backtraces(s.pid, work_ + "/logs/" + s.name + ".hung-" + run + ".txt");
    }
    Event(
        {{"e", "killed"}, {"slot", s.name}, {"run", run}, {"mono", MonoMs()}});
    if (!pid.empty()) bed_.Machines({"exec", s.machine, "kill", "-9", pid});
    kill(s.pid, SIGCONT);
    waitpid(s.pid, nullptr, 0);
    s.pid = -1;
  }
}

// One run, to its end. False if it did not end within its time.
bool Torture::OneRound(int round, std::atomic<bool>* active) {
  Workflow(round);
  const std::string run = "r" + std::to_string(round);
  std::vector<Slot> slots;
  const int64_t start = MonoMs();
  for (size_t i = 0; i < machines_.size(); i++) {
    // The last machine joins the run late.
    const int64_t at =
        i + 1 == machines_.size() ? start + Pick(3000, 10000) : start;
    // Two workers and an `agent serve` each; every other machine an agent
    // over MCP, the others one over the CLI and a worker `run --agent`.
    const char* other = i % 2 == 0 ? ".mcp" : ".cli";
    for (const char* role : {".w1", ".w2", ".a", other}) {
      Slot s;
      s.name = machines_[i] + role;
      s.machine = machines_[i];
      s.agent = role[1] != 'w';
      if (std::string(role) == other) s.via = other + 1;
      s.run_agent = i % 2 == 1 && std::string(role) == ".w2";
      s.start_at = at;
      slots.push_back(s);
    }
  }
  active->store(true);
  std::string status;
  int64_t next_poll = 0;
  const int64_t deadline = start + o_.run_seconds * 1000;
  while (status != "completed" && status != "failed" && MonoMs() < deadline) {
    Supervise(&slots, run, false);
    if (MonoMs() >= next_poll) {
      const Json st = Status(run);
      if (st.is_object()) status = st.value("status", "");
      Answer(run, st);
      next_poll = MonoMs() + 1000;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  active->store(false);
  EndSlots(&slots, run);
  CheckInput in;
  in.run = run;
  in.status = status.empty() ? "unfinished" : status;
  in.answers_given = answers_[run];
  in.idle_claim_ms = 3 * o_.lease_s * 1000;
  const std::string path = work_ + "/runs/" + run + ".audit.jsonl";
  for (int i = 0; i < 5; i++) {
    Ran r = RunCommand({Wizq(), "export", "--format", "audit", "--store",
                        bed_.HostStore(), "--run-id", run, "-o", path});
    if (r.code == 0) break;
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  std::ifstream audit(path);
  for (std::string line; std::getline(audit, line);) {
    in.audit.push_back(Json::parse(line, nullptr, false));
  }
  runs_.push_back(std::move(in));
  printf("run %s: %s in %lld s, %d faults so far\n", run.c_str(),
         status.c_str(), static_cast<long long>((MonoMs() - start) / 1000),
         injector_->Injected());
  fflush(stdout);
  return MonoMs() < deadline;
}

int Torture::Run() {
  std::string error;
  if (!SetUp(&error)) {
    fprintf(stderr, "machines torture: the bed failed: %s\n", error.c_str());
    return 3;
  }
  injector_ = std::make_unique<Injector>(
      &bed_, o_.seed + 1, o_.lease_s * 1000, machines_, o_.kinds,
      work_ + "/faults.jsonl", Ledger() + "/ledger");
  std::atomic<bool> active{false}, stop{false};
  std::thread faults([&] {
    std::mt19937 gaps(o_.seed + 2);
    while (!stop.load() && injector_->Injected() < o_.faults) {
      if (!active.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      injector_->InjectOne();
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::uniform_int_distribution<int>(200, 1500)(gaps)));
    }
  });
  const int64_t until = MonoMs() + o_.max_seconds * 1000;
  bool in_time = true;
  for (int round = 0; in_time && MonoMs() < until; round++) {
    const bool faults_left = injector_->Injected() < o_.faults;
    in_time = OneRound(round, &active);
    if (!faults_left) break;  // a run with no fault to inject ran last
  }
  stop.store(true);
  faults.join();
  if (!in_time) {
    printf("ERROR a run did not end in %lld s (--run-seconds)\n",
           static_cast<long long>(o_.run_seconds));
  }
  return Report(injector_->Faults()) == 0 && in_time ? 0 : 1;
}

}  // namespace wizq::machines

int main(int argc, char** argv) {
  using namespace wizq::machines;
  Options o;
  o.seed = static_cast<uint32_t>(std::random_device{}());
  try {
    ParseArgs(argc, argv, &o);
  } catch (const std::exception& e) {
    fprintf(stderr, "wizq_machines_torture: %s\n", e.what());
    return 2;
  }
  if (geteuid() != 0) {
    fprintf(stderr, "wizq_machines_torture: needs root (namespaces)\n");
    return 3;
  }
  // A sanitizer build refuses libfaketime preloaded ahead of its runtime
  // (the machines with a clock offset) unless told the order is meant.
  const char* asan = getenv("ASAN_OPTIONS");
  const std::string asan_options =
      std::string(asan != nullptr && *asan ? std::string(asan) + ":" : "") +
      "verify_asan_link_order=0";
  setenv("ASAN_OPTIONS", asan_options.c_str(), 1);
  char tmpl[] = "/tmp/wizq-machines-torture-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 3;
  chmod(tmpl, 0755);
  printf("machines torture: seed %u, directory %s\n", o.seed, tmpl);
  fflush(stdout);
  int code;
  {
    Torture t(o, tmpl);
    code = t.Run();
  }
  if (code == 0 && !o.keep) {
    std::error_code ec;
    std::filesystem::remove_all(tmpl, ec);
  } else {
    printf("machines torture: kept %s\n", tmpl);
  }
  return code;
}
