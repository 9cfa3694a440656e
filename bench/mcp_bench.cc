// mcp_bench: agents working a run of Pool tasks through `wizq mcp`
// (docs/BENCHMARKS.md, "Agents through MCP").
//
// For each agent count it makes a fresh install directory, starts
// `wizq run` on a workflow whose Root spawns --tasks Pool tasks, and starts
// that many agents: each one `wizq mcp --dir D` on a pair of pipes, spoken
// to in JSON-RPC by this program (initialize, then take_task ->
// submit_response [] until the run has finished). It reports tasks per
// second (tasks / the time from the first take to the last done) and the
// median and 90th percentile take->done round trip (sending take_task to
// the answer of its submit_response). Its install directories are under
// /tmp, where it measures the MACHINE line (bench/machine.h: fdatasync
// latency, load, cores) before the first agent count and after the last.
//
// Usage: mcp_bench [--wizq build/wizq] [--tasks 2000] [--agents 1,4]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/machine.h"

extern char** environ;

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Where the install directories go and the MACHINE line is measured.
constexpr char kBaseDir[] = "/tmp";

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

pid_t Spawn(const std::vector<std::string>& args, int in_fd, int out_fd,
            int err_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (in_fd >= 0) posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  if (err_fd >= 0) posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    throw std::runtime_error("spawn " + args[0] + ": " + std::strerror(rc));
  }
  return pid;
}

// One `wizq mcp` process and a JSON-RPC session with it.
class McpAgent {
 public:
  McpAgent(const std::string& wizq, const std::string& dir,
           const std::string& log) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe failed");
    }
    const int err =
        open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    pid_ = Spawn({wizq, "mcp", "--dir", dir}, in[0], out[1], err);
    close(in[0]);
    close(out[1]);
    close(err);
    to_ = in[1];
    from_ = out[0];
    Json init = Request("initialize", {{"protocolVersion", "2025-11-25"},
                                       {"capabilities", Json::object()},
                                       {"clientInfo", {{"name", "bench"}}}});
    if (!init.contains("result")) throw std::runtime_error(init.dump());
    Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  }
  ~McpAgent() {
    close(to_);
    close(from_);
    waitpid(pid_, nullptr, 0);
  }

  // tools/call; the CallToolResult.
  Json Call(const std::string& tool, const Json& args) {
    Json answer = Request("tools/call", {{"name", tool}, {"arguments", args}});
    if (!answer.contains("result")) throw std::runtime_error(answer.dump());
    return answer["result"];
  }

 private:
  void Send(const Json& message) {
    std::string line = message.dump() + "\n";
    size_t done = 0;
    while (done < line.size()) {
      ssize_t n = write(to_, line.data() + done, line.size() - done);
      if (n <= 0) throw std::runtime_error("write to wizq mcp failed");
      done += static_cast<size_t>(n);
    }
  }
  Json Request(const std::string& method, const Json& params) {
    const int id = ++next_id_;
    Send({{"jsonrpc", "2.0"},
          {"id", id},
          {"method", method},
          {"params", params}});
    for (;;) {
      size_t nl;
      while ((nl = buffer_.find('\n')) == std::string::npos) {
        char chunk[65536];
        ssize_t n = read(from_, chunk, sizeof chunk);
        if (n <= 0) throw std::runtime_error("wizq mcp closed its stdout");
        buffer_.append(chunk, static_cast<size_t>(n));
      }
      Json answer = Json::parse(buffer_.substr(0, nl));
      buffer_.erase(0, nl + 1);
      if (answer.value("id", -1) == id) return answer;
    }
  }

  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  int next_id_ = 0;
  std::string buffer_;
};

struct Result {
  double seconds = 0;
  std::vector<double> round_trips_ms;
};

void Agent(const std::string& wizq, const std::string& dir,
           const std::string& log, std::mutex* mu, Result* result,
           Clock::time_point* first, Clock::time_point* last,
           std::string* error) {
  try {
    McpAgent agent(wizq, dir, log);
    const auto deadline = Clock::now() + std::chrono::minutes(10);
    auto refused_until = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      const auto t0 = Clock::now();
      Json take = agent.Call("take_task", {{"wait_seconds", 5}});
      if (take.value("isError", false)) {
        // The run may not exist yet (`wizq run` is starting): retried for
        // 30 s.
        if (Clock::now() > refused_until) {
          throw std::runtime_error("take_task: " + take.dump());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      refused_until = Clock::now() + std::chrono::seconds(30);
      const Json& p = take["structuredContent"];
      if (p.value("status", "") == "finished") return;
      if (p.value("status", "") == "idle") continue;
      Json done = agent.Call("submit_response", {{"task_id", p["task_id"]},
                                                 {"lease", p["lease"]},
                                                 {"response", Json::array()}});
      if (done.value("isError", false)) {
        throw std::runtime_error("submit_response: " + done.dump());
      }
      const auto t1 = Clock::now();
      std::lock_guard<std::mutex> lock(*mu);
      result->round_trips_ms.push_back(Ms(t1 - t0));
      if (*first == Clock::time_point() || t0 < *first) *first = t0;
      *last = std::max(*last, t1);
    }
    throw std::runtime_error("the run did not finish within 10 minutes");
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(*mu);
    *error = e.what();
  }
}

void WriteWorkflow(const std::string& path, int tasks) {
  Json wf = {{"entrypoint", "Root"},
             {"steps",
              {{{"name", "Root"},
                {"action",
                 {{"kind", "Command"},
                  {"script", "jq -nc '[range(0; " + std::to_string(tasks) +
                                 ") | {kind: \"Work\", value: {i: .}}]'"}}},
                {"next", {"Work"}}},
               {{"name", "Work"},
                {"action", {{"kind", "Pool"}, {"instructions", "Return []."}}},
                {"next", Json::array()}}}}};
  std::ofstream(path) << wf.dump(2) << "\n";
}

int Bench(const std::string& wizq, int tasks, int agents) {
  std::string tmpl = std::string(kBaseDir) + "/wizq-mcp-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  WriteWorkflow(dir + "/workflow.json", tasks);
  const std::string log = dir + "/stderr.log";
  const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  const pid_t run = Spawn({wizq, "run", dir + "/workflow.json", "--dir",
                           dir + "/install", "--quiet"},
                          -1, -1, err);
  close(err);
  std::mutex mu;
  Result result;
  Clock::time_point first, last;
  std::string error;
  std::vector<std::thread> threads;
  for (int i = 0; i < agents; i++) {
    threads.emplace_back(Agent, wizq, dir + "/install", log, &mu, &result,
                         &first, &last, &error);
  }
  for (std::thread& t : threads) t.join();
  int status = 0;
  if (!error.empty()) kill(run, SIGTERM);
  waitpid(run, &status, 0);
  if (!error.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr,
                 "mcp_bench: agents=%d failed: %s (wizq run status %d; "
                 "logs in %s)\n",
                 agents, error.c_str(), status, log.c_str());
    return 1;
  }
  std::vector<double>& rt = result.round_trips_ms;
  if (rt.empty()) {
    std::fprintf(stderr, "mcp_bench: agents=%d completed no task\n", agents);
    return 1;
  }
  std::sort(rt.begin(), rt.end());
  const double wall = Ms(last - first) / 1000;
  std::printf(
      "mcp agents=%d tasks=%zu wall=%.2fs tasks/s=%.0f take->done "
      "median=%.2fms p90=%.2fms\n",
      agents, rt.size(), wall, rt.size() / wall, rt[rt.size() / 2],
      rt[rt.size() * 9 / 10]);
  std::fflush(stdout);
  std::filesystem::remove_all(dir);
  return static_cast<int>(rt.size()) == tasks ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  std::string wizq = "build/wizq", agents = "1,4";
  int tasks = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--wizq") {
      wizq = argv[i + 1];
    } else if (flag == "--tasks") {
      tasks = std::atoi(argv[i + 1]);
    } else if (flag == "--agents") {
      agents = argv[i + 1];
    } else {
      std::fprintf(stderr,
                   "usage: mcp_bench [--wizq PATH] [--tasks N] "
                   "[--agents 1,4]\n");
      return 2;
    }
  }
  wizq = std::filesystem::absolute(wizq).string();
  std::printf("%s\n", wizq::bench::MachineLine(kBaseDir).c_str());
  std::fflush(stdout);
  int failed = 0;
  std::stringstream list(agents);
  std::string n;
  while (std::getline(list, n, ',')) failed |= Bench(wizq, tasks, std::stoi(n));
  std::printf("%s\n", wizq::bench::MachineLine(kBaseDir).c_str());
  return failed;
}
