// wizq_torture_body: the task body of the machines torture (Command tasks,
// finally hooks, and the COMMAND of `wizq agent serve` and `wizq run
// --agent`), writing the history the checker reads
// (tests/machines/torture/history.h).
//
//   wizq_torture_body LEDGER_DIR        the task's JSON on stdin
//
// It runs in a "machine" (tests/machines/machines.sh): its machine is its
// hostname. The run, task and attempt come from WIZQ_RUN_ID, WIZQ_TASK_ID
// and WIZQ_ATTEMPT; WIZQ_TORTURE_VIA (cli, mcp) names an agent that is
// not `wizq agent serve` nor `run --agent`, recorded as `via`. It
//   1. takes an flock on LEDGER_DIR/locks/<run>.<task>, held until it
//      exits (the kernel lets go of it when it dies, however). Found held,
//      it appends an `overlap` record naming the holder (read from
//      <run>.<task>.holder) and goes on without it;
//   2. appends `start` (machine, run, task, attempt, pid, CLOCK_MONOTONIC
//      ms: the clock every machine shares, unlike their wall clocks);
//   3. sleeps the task's `value.ms` (default 200);
//   4. prints its response: for kind Work and Review a Mark child that
//      embeds machine, attempt and pid (the checker's `stale` test) and,
//      for Work, a Shared child {s: i % 5} that many tasks spawn alike
//      (dedup); else no children;
//   5. appends `end`.
// Records are JSON lines appended with O_APPEND in one write(2), so lines
// from every machine interleave whole.
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

namespace {

using Json = nlohmann::json;

int64_t MonoMs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v != nullptr ? v : "";
}

void Append(const std::string& path, const Json& record) {
  const std::string line = record.dump() + "\n";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0 || write(fd, line.data(), line.size()) !=
                    static_cast<ssize_t>(line.size())) {
    perror(path.c_str());
    exit(1);
  }
  close(fd);
}

std::string ReadAll(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return "";
  std::string out;
  char buf[512];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  fclose(f);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: wizq_torture_body LEDGER_DIR < task.json\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::string input((std::istreambuf_iterator<char>(std::cin)), {});
  Json in = Json::parse(input, nullptr, false);
  const Json task = in.is_object() && in.contains("task") ? in["task"] : in;
  const std::string kind = task.is_object() ? task.value("kind", "") : "";
  const Json value = task.is_object() && task.contains("value")
                         ? task["value"]
                         : Json::object();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string run = Env("WIZQ_RUN_ID");
  const int64_t id = atoll(Env("WIZQ_TASK_ID").c_str());
  const int64_t attempt = atoll(Env("WIZQ_ATTEMPT").c_str());
  const int64_t pid = getpid();
  const std::string lock = dir + "/locks/" + run + "." + std::to_string(id);
  Json me = {{"m", host},          {"run", run}, {"task", id},
             {"attempt", attempt}, {"pid", pid}, {"kind", kind}};
  // An agent over the CLI or MCP (cli_agent.sh, mcp_agent.mjs) says so:
  // nothing ends its attempt when its lease is lost (late_agent).
  if (!Env("WIZQ_TORTURE_VIA").empty()) me["via"] = Env("WIZQ_TORTURE_VIA");
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  if (fd < 0) {
    perror(lock.c_str());
    return 1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    Json o = me;
    o["e"] = "overlap";
    o["mono"] = MonoMs();
    o["holder"] = Json::parse(ReadAll(lock + ".holder"), nullptr, false);
    Append(dir + "/ledger", o);
  }
  {
    Json h = me;
    const std::string text = h.dump();
    const int hf =
        open((lock + ".holder").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (hf >= 0) {
      (void)!write(hf, text.data(), text.size());
      close(hf);
    }
  }
  Json start = me;
  start["e"] = "start";
  start["mono"] = MonoMs();
  Append(dir + "/ledger", start);
  const int64_t ms = value.is_object() ? value.value("ms", int64_t{200}) : 200;
  timespec nap = {static_cast<time_t>(ms / 1000),
                  static_cast<long>(ms % 1000) * 1000000};
  while (nanosleep(&nap, &nap) != 0) {
  }
  Json out = Json::array();
  if (kind == "Work" || kind == "Review") {
    out.push_back(
        {{"kind", "Mark"},
         {"value", {{"of", id}, {"m", host}, {"a", attempt}, {"p", pid}}}});
  }
  if (kind == "Work" && value.is_object()) {
    out.push_back(
        {{"kind", "Shared"}, {"value", {{"s", value.value("i", 0) % 5}}}});
  }
  const std::string text = out.dump() + "\n";
  if (write(1, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return 1;
  }
  Json end = me;
  end["e"] = "end";
  end["mono"] = MonoMs();
  Append(dir + "/ledger", end);
  return 0;
}
