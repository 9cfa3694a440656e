// The real `wizq mcp` binary over pipes: hostile and malformed messages get
// their JSON-RPC errors and the server keeps serving, stdout carries only
// protocol, the environment plays no part, and the server exits 0 when its
// stdin closes (also in the middle of a message). The full run through the
// official SDK client is tests/mcp/sdk_client_test.mjs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "queue/dir/queue.h"
#include "tasks/workflow/response.h"
#include "tasks/workflow/workflow.h"
#include "tests/process_util.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using test::ScratchDir;

// `wizq mcp ARGS...` with stdin and stdout on pipes, stderr in a file, run
// in `cwd` with the environment `env`.
class McpProcess {
 public:
  McpProcess(const std::vector<std::string>& args, const std::string& cwd,
             const std::vector<std::string>& env = {}) {
    signal(SIGPIPE, SIG_IGN);
    int in[2], out[2];
    EXPECT_EQ(pipe(in), 0);
    EXPECT_EQ(pipe(out), 0);
    err_path_ = err_dir_.Join("stderr");
    std::vector<std::string> argv_s = {test::BuildDir() + "/wizq", "mcp"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int err = open(err_path_.c_str(), O_WRONLY | O_CREAT, 0600);
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err, 2);
      for (int fd : {in[0], in[1], out[0], out[1], err}) close(fd);
      if (chdir(cwd.c_str()) != 0) _exit(126);
      std::vector<char*> argv, envp;
      for (std::string& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      std::vector<std::string> env_s = env;
      for (std::string& e : env_s) envp.push_back(e.data());
      envp.push_back(nullptr);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~McpProcess() {
    if (to_ >= 0) close(to_);
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(from_);
  }

  bool Send(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = write(to_, bytes.data() + done, bytes.size() - done);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  // The next line of stdout (without its newline); "" at EOF or after 30 s.
  std::string ReadLine() {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                Clock::now())
              .count());
      if (left <= 0) return "";
      pollfd p = {from_, POLLIN, 0};
      if (poll(&p, 1, left) <= 0) continue;
      char chunk[65536];
      ssize_t n = read(from_, chunk, sizeof chunk);
      if (n <= 0) return "";
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }
  Json Answer() {
    std::string line = ReadLine();
    Json j = Json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object()) << "not a JSON-RPC message: " << line;
    return j;
  }
  // Closes stdin; the exit code (-1: killed after 30 s or by a signal).
  int CloseAndWait() {
    close(to_);
    to_ = -1;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) return -1;
      usleep(10000);
    }
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // Sends `sig`, stdin left open; the exit code (-1 as for CloseAndWait).
  int SignalAndWait(int sig) {
    kill(pid_, sig);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) return -1;
      usleep(10000);
    }
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string Rest() {
    std::string all = buffer_, line;
    while (!(line = ReadLine()).empty()) all += line + "\n";
    return all;
  }
  std::string Stderr() const { return test::ReadAll(err_path_); }
  // The peak resident set size so far, in KiB (VmHWM), -1 if unknown.
  long PeakKb() const {
    std::string status =
        test::ReadAll("/proc/" + std::to_string(pid_) + "/status");
    const size_t at = status.find("VmHWM:");
    return at == std::string::npos ? -1 : std::atol(status.c_str() + at + 6);
  }

 private:
  ScratchDir err_dir_;
  std::string err_path_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int to_ = -1, from_ = -1;
  std::string buffer_;
};

const std::string kInit =
    R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{)"
    R"("protocolVersion":"2025-11-25","capabilities":{},)"
    R"("clientInfo":{"name":"binary-test","version":"1"}}})"
    "\n";

int Code(const Json& answer) {
  return answer.contains("error") ? answer["error"].value("code", 0) : 0;
}

TEST(McpBinaryTest, HostileMessagesGetErrorsAndTheServerKeepsServing) {
  ScratchDir dir;
  McpProcess mcp({"--dir", dir.path()}, "/");
  ASSERT_TRUE(mcp.Send(kInit));
  Json init = mcp.Answer();
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-11-25");
  const std::vector<std::pair<std::string, int>> cases = {
      {"}{", -32700},
      {"\x01\x02\x03", -32700},
      {std::string(50000, '{'), -32700},
      {R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", -32600},
      {R"({"jsonrpc":"2.0","id":true,"method":"ping"})", -32600},
      {R"({"jsonrpc":2,"id":2,"method":"ping"})", -32600},
      {R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rm"}})",
       -32602},
      {R"({"jsonrpc":"2.0","id":4,"method":"shutdown"})", -32601},
      {R"({"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":")" +
           std::string(4 << 20, 'x') + "\"}, \"unknown\": 1}",
       0},
      {R"({"jsonrpc":"2.0","id":5,"method":"ping"})", -32600},  // reused id
      {R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":)"
       R"({"name":"heartbeat","arguments":{"task_id":"x","lease":"L"}}})",
       0},
      {R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":)"
       R"({"name":"run_status","arguments":{}}})",
       0},
  };
  for (const auto& [line, code] : cases) {
    // A notification in between is never answered.
    ASSERT_TRUE(mcp.Send(R"({"jsonrpc":"2.0","method":"notifications/x"})"
                         "\n" +
                         line + "\n"));
    Json a = mcp.Answer();
    EXPECT_EQ(Code(a), code) << line.substr(0, 100) << " -> " << a.dump();
  }
  // The last two: a wrong argument and a refused call (no run here) are
  // tool errors.
  ASSERT_TRUE(mcp.Send(R"({"jsonrpc":"2.0","id":8,"method":"tools/call",)"
                       R"("params":{"name":"fail_task","arguments":)"
                       R"({"task_id":1,"lease":"nope"}}})"
                       "\n"));
  Json refused = mcp.Answer();
  EXPECT_EQ(refused["result"]["isError"], true) << refused.dump();
  EXPECT_FALSE(
      refused["result"]["content"][0]["text"].get<std::string>().empty());
  // Closed in the middle of a message: exit 0, nothing more on stdout.
  ASSERT_TRUE(mcp.Send(R"({"jsonrpc":"2.0","id":9,"method":"tools/ca)"));
  EXPECT_EQ(mcp.CloseAndWait(), 0) << mcp.Stderr();
  EXPECT_EQ(mcp.Rest(), "");
  EXPECT_NE(mcp.Stderr().find("in the middle of a message"), std::string::npos)
      << mcp.Stderr();
}

// A line far over the 32 MiB limit is answered -32600 once it ends, and is
// dropped as it arrives: the server's memory stays bounded by the limit, not
// by the line.
TEST(McpBinaryTest, AHugeLineIsRefusedWithoutBufferingIt) {
  ScratchDir dir;
  McpProcess mcp({"--dir", dir.path()}, "/");
  ASSERT_TRUE(mcp.Send(kInit));
  EXPECT_EQ(mcp.Answer()["id"], 0);
  const std::string chunk(16 << 20, 'x');
  ASSERT_TRUE(mcp.Send(R"({"jsonrpc":"2.0","id":1,"method":"ping","x":")"));
  for (int i = 0; i < 16; i++) ASSERT_TRUE(mcp.Send(chunk));  // 256 MiB
  ASSERT_TRUE(mcp.Send("\"}\n" + std::string(R"({"jsonrpc":"2.0","id":2,)") +
                       R"("method":"ping"})" + "\n"));
  Json refused = mcp.Answer();
  EXPECT_EQ(Code(refused), -32600) << refused.dump();
  EXPECT_NE(refused.dump().find("limit is 33554432"), std::string::npos)
      << refused.dump();
  EXPECT_EQ(mcp.Answer()["id"], 2);
  const long peak_kb = mcp.PeakKb();
  EXPECT_GT(peak_kb, 0);
  // Under ASan/TSan the runtimes' own memory dwarfs the bound.
  if (!test::UnderSanitizer()) {
    EXPECT_LT(peak_kb, 160 << 10) << "the server buffered the line";
  }
  EXPECT_EQ(mcp.CloseAndWait(), 0) << mcp.Stderr();
}

TEST(McpBinaryTest, ServesTheWorkingDirectoryWithAnEmptyEnvironment) {
  ScratchDir dir;
  McpProcess mcp({}, dir.path(), {});
  ASSERT_TRUE(mcp.Send(
      kInit + R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})" + "\n"));
  EXPECT_EQ(mcp.Answer()["id"], 0);
  Json list = mcp.Answer();
  EXPECT_EQ(list["result"]["tools"].size(), 6u) << list.dump();
  EXPECT_EQ(mcp.CloseAndWait(), 0) << mcp.Stderr();
}

// A client that stops its server with SIGTERM, stdin still open (as the
// SDKs do when a server has not exited soon after its stdin closed), ends
// the session in order: the task it held is failed at once, charged
// (agent_disconnected), not left to its 60 s lease; the server exits 130.
TEST(McpBinaryTest, SigtermEndsTheSessionAndFailsItsLeases) {
  ScratchDir dir;
  std::unique_ptr<Workflow> wf;
  ASSERT_TRUE(Workflow::Parse(R"({"entrypoint": "Review", "steps": [
      {"name": "Review", "action": {"kind": "Pool", "instructions": "x"}}]})",
                              "wf", &wf)
                  .ok());
  QueueOptions o;
  o.install_dir = dir.path();
  o.run_id = "rsig";
  o.workflow_json = wf->frozen_json();
  o.initial_tasks.push_back(RootTask(*wf, "{}"));
  std::unique_ptr<Queue> q;
  ASSERT_TRUE(Queue::Open(o, &q, nullptr).ok());
  ASSERT_TRUE(q->Close().ok());
  McpProcess mcp({"--dir", dir.path()}, "/");
  ASSERT_TRUE(mcp.Send(kInit +
                       R"({"jsonrpc":"2.0","id":1,"method":"tools/call",)"
                       R"("params":{"name":"take_task","arguments":{}}})"
                       "\n"));
  EXPECT_EQ(mcp.Answer()["id"], 0);
  const Json take = mcp.Answer();
  ASSERT_EQ(take["result"]["structuredContent"]["task_id"], 1) << take.dump();
  EXPECT_EQ(mcp.SignalAndWait(SIGTERM), 130) << mcp.Stderr();
  const std::string log = test::ReadAll(dir.Join(".wizard/audit.jsonl"));
  EXPECT_NE(log.find(R"("event":"task_failed")"), std::string::npos) << log;
  EXPECT_NE(log.find(R"("reason":"agent_disconnected")"), std::string::npos)
      << log;
}

TEST(McpBinaryTest, AMissingDirectoryIsServedAFileIsExit2) {
  // An MCP client may start the server before the run exists.
  ScratchDir dir;
  McpProcess absent({"--dir", dir.Join("absent")}, "/");
  ASSERT_TRUE(absent.Send(kInit +
                          R"({"jsonrpc":"2.0","id":1,"method":)"
                          R"("tools/call","params":{"name":)"
                          R"("run_status"}})" +
                          "\n"));
  EXPECT_EQ(absent.Answer()["id"], 0);
  EXPECT_EQ(absent.Answer()["result"]["isError"], true);
  EXPECT_EQ(absent.CloseAndWait(), 0);
  test::WriteAll(dir.Join("file"), "x");
  McpProcess file({"--dir", dir.Join("file")}, "/");
  EXPECT_EQ(file.CloseAndWait(), 2);
  EXPECT_NE(file.Stderr().find("not a directory"), std::string::npos)
      << file.Stderr();
  EXPECT_EQ(file.Rest(), "");
}

}  // namespace
}  // namespace wizq
