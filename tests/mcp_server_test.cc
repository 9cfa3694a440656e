// McpServer in process, on files and pipes, with a fake AgentService: the
// MCP lifecycle, the tools and their argument checks, and every kind of
// malformed or hostile message (mcp/mcp_server.h). tests/mcp_binary_test.cc
// sends the same kinds of messages to the real `wizq mcp`.
#include "mcp/mcp_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "agent/agent_service.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

using Json = nlohmann::json;
using test::ScratchDir;

// Records every call and answers with `reply` (or `take_reply` for Take).
class FakeAgentService : public AgentService {
 public:
  AgentReply Take(const TakeRequest& r) override {
    calls.push_back("take");
    take = r;
    return take_reply;
  }
  AgentReply Heartbeat(int64_t task_id, const std::string& lease) override {
    calls.push_back("heartbeat " + std::to_string(task_id) + " " + lease);
    return reply;
  }
  AgentReply Done(int64_t task_id, const std::string& lease,
                  const std::string& response) override {
    calls.push_back("done " + std::to_string(task_id) + " " + lease + " " +
                    response);
    return reply;
  }
  AgentReply Fail(int64_t task_id, const std::string& lease,
                  std::string_view reason,
                  const std::string& message) override {
    calls.push_back("fail " + std::to_string(task_id) + " " + lease + " " +
                    message);
    fail_reason = reason;
    return reply;
  }
  AgentReply Release(int64_t task_id, const std::string& lease) override {
    calls.push_back("release " + std::to_string(task_id) + " " + lease);
    return reply;
  }
  AgentReply RunStatus() override {
    calls.push_back("status");
    if (throw_in_status) throw std::runtime_error("status exploded");
    return reply;
  }
  std::string workspace() const override { return ""; }

  std::vector<std::string> calls;
  std::string fail_reason;
  bool throw_in_status = false;
  TakeRequest take;
  AgentReply take_reply{
      0, R"({"task":{"kind":"Review","value":{}},"task_id":7,"lease":"L"})",
      ""};
  AgentReply reply{0, R"({"status":"ok"})", ""};
};

constexpr const char* kInit =
    R"({"jsonrpc":"2.0","id":"init","method":"initialize","params":{)"
    R"("protocolVersion":"2025-11-25","capabilities":{},)"
    R"("clientInfo":{"name":"test-client","version":"1"}}})";

std::string Request(int id, const std::string& method, const Json& params) {
  Json m = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null()) m["params"] = params;
  return m.dump();
}

std::string Call(int id, const std::string& tool, const Json& args) {
  return Request(id, "tools/call", {{"name", tool}, {"arguments", args}});
}

// Serves `input` (bytes, as is) from a file; the answers, one JSON each.
struct Served {
  int code = -1;
  std::vector<Json> answers;
  std::string log;
};

Served Serve(FakeAgentService* fake, const std::string& input,
             McpServerOptions options = McpServerOptions()) {
  ScratchDir dir;
  test::WriteAll(dir.Join("in"), input);
  const int in = open(dir.Join("in").c_str(), O_RDONLY);
  const int out = open(dir.Join("out").c_str(), O_WRONLY | O_CREAT, 0600);
  const int log = open(dir.Join("log").c_str(), O_WRONLY | O_CREAT, 0600);
  options.log_fd = log;
  Served s;
  {
    McpServer server(fake, in, out, options);
    s.code = server.Serve();
  }
  for (int fd : {in, out, log}) close(fd);
  s.log = test::ReadAll(dir.Join("log"));
  std::istringstream lines(test::ReadAll(dir.Join("out")));
  std::string line;
  while (std::getline(lines, line)) {
    // Nothing but protocol: every output line is one JSON-RPC message.
    Json j = Json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object()) << line;
    EXPECT_EQ(j.value("jsonrpc", ""), "2.0") << line;
    s.answers.push_back(j);
  }
  return s;
}

// Serves kInit and then `lines`; the answers after initialize's.
Served Session(FakeAgentService* fake, const std::vector<std::string>& lines) {
  std::string input = std::string(kInit) + "\n";
  for (const std::string& l : lines) input += l + "\n";
  Served s = Serve(fake, input);
  EXPECT_EQ(s.code, 0);
  EXPECT_FALSE(s.answers.empty());
  if (!s.answers.empty()) s.answers.erase(s.answers.begin());
  return s;
}

int ErrorCode(const Json& answer) {
  return answer.contains("error") ? answer["error"].value("code", 0) : 0;
}

TEST(McpServerTest, InitializeAnswersTheClientsVersionWhenSupported) {
  for (const std::string& v : McpServer::SupportedProtocolVersions()) {
    FakeAgentService fake;
    Served s = Serve(&fake, Request(1, "initialize",
                                    {{"protocolVersion", v},
                                     {"capabilities", Json::object()},
                                     {"clientInfo", {{"name", "c"}}}}) +
                                "\n");
    ASSERT_EQ(s.answers.size(), 1u);
    const Json& r = s.answers[0]["result"];
    EXPECT_EQ(r["protocolVersion"], v);
    EXPECT_EQ(r["serverInfo"]["name"], "wizq");
    EXPECT_TRUE(r["capabilities"]["tools"].is_object());
  }
  EXPECT_EQ(McpServer::SupportedProtocolVersions().front(), "2025-11-25");
}

TEST(McpServerTest, InitializeAnswersTheLatestForAnUnknownVersion) {
  FakeAgentService fake;
  Served s =
      Serve(&fake, Request(1, "initialize",
                           {{"protocolVersion", "2099-01-01"},
                            {"capabilities", Json::object()}}) +
                       "\n" + Request(2, "initialize", {{"x", 1}}) + "\n");
  ASSERT_EQ(s.answers.size(), 2u);
  EXPECT_EQ(s.answers[0]["result"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(ErrorCode(s.answers[1]), -32600) << "initialized twice";
  Served missing = Serve(
      &fake, Request(1, "initialize", Json::object()) + "\n" +
                 Request(2, "initialize", {{"protocolVersion", 5}}) + "\n");
  ASSERT_EQ(missing.answers.size(), 2u);
  EXPECT_EQ(ErrorCode(missing.answers[0]), -32602);
  EXPECT_EQ(ErrorCode(missing.answers[1]), -32602);
}

TEST(McpServerTest, ToolsNeedInitializePingDoesNot) {
  FakeAgentService fake;
  Served s = Serve(&fake, Request(1, "tools/list", nullptr) + "\n" +
                              Call(2, "run_status", Json::object()) + "\n" +
                              Request(3, "ping", nullptr) + "\n");
  ASSERT_EQ(s.answers.size(), 3u);
  EXPECT_EQ(ErrorCode(s.answers[0]), -32600);
  EXPECT_EQ(ErrorCode(s.answers[1]), -32600);
  EXPECT_EQ(s.answers[2]["result"], Json::object());
  EXPECT_TRUE(fake.calls.empty());
}

TEST(McpServerTest, ToolsListGivesAnObjectSchemaForEachTool) {
  FakeAgentService fake;
  Served s = Session(&fake, {Request(2, "tools/list", {{"cursor", "x"}})});
  ASSERT_EQ(s.answers.size(), 1u);
  const Json& tools = s.answers[0]["result"]["tools"];
  std::vector<std::string> names;
  for (const Json& t : tools) {
    names.push_back(t["name"]);
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t.dump();
    EXPECT_FALSE(t["description"].get<std::string>().empty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"take_task", "heartbeat",
                                             "submit_response", "fail_task",
                                             "release_task", "run_status"}));
  EXPECT_EQ(tools[2]["inputSchema"]["required"],
            Json({"task_id", "lease", "response"}));
  // The array, or the array as a JSON string (Barnum's "JSON array string").
  const Json& response = tools[2]["inputSchema"]["properties"]["response"];
  EXPECT_EQ(response["anyOf"][0]["type"], "array") << response.dump();
  EXPECT_EQ(response["anyOf"][1]["type"], "string") << response.dump();
}

TEST(McpServerTest, TakeTaskReturnsThePayloadAsStructuredContentAndText) {
  FakeAgentService fake;
  Served s = Session(
      &fake,
      {Call(2, "take_task", {{"steps", {"Review"}}, {"wait_seconds", 1.5}})});
  ASSERT_EQ(s.answers.size(), 1u);
  const Json& r = s.answers[0]["result"];
  const Json payload = Json::parse(fake.take_reply.json);
  EXPECT_EQ(r["structuredContent"], payload);
  EXPECT_EQ(Json::parse(r["content"][0]["text"].get<std::string>()), payload);
  EXPECT_EQ(r["content"][0]["type"], "text");
  EXPECT_EQ(r["isError"], false);
  EXPECT_EQ(fake.take.steps, std::vector<std::string>{"Review"});
  EXPECT_EQ(fake.take.wait_seconds, 1.5);
  EXPECT_EQ(fake.take.agent, "mcp:test-client");
}

TEST(McpServerTest, NothingToTakeIsAResultNotAnError) {
  FakeAgentService fake;
  fake.take_reply = {5, R"({"status":"idle"})", ""};
  Served s = Session(&fake, {Call(2, "take_task", Json::object())});
  ASSERT_EQ(s.answers.size(), 1u);
  EXPECT_EQ(s.answers[0]["result"]["isError"], false);
  EXPECT_EQ(s.answers[0]["result"]["structuredContent"]["status"], "idle");
}

TEST(McpServerTest, EachToolCallsTheServiceWithItsArguments) {
  FakeAgentService fake;
  Served s = Session(
      &fake, {Call(2, "heartbeat", {{"task_id", 7}, {"lease", "L"}}),
              Call(3, "submit_response",
                   {{"task_id", 7},
                    {"lease", "L"},
                    {"response", {{{"kind", "Next"}, {"value", {1, 2}}}}}}),
              Call(4, "fail_task", {{"task_id", 8}, {"lease", "M"}}),
              Call(5, "fail_task",
                   {{"task_id", 9}, {"lease", "N"}, {"message", "why"}}),
              Call(6, "run_status", Json::object()),
              Request(7, "tools/call", {{"name", "run_status"}}),
              Call(8, "release_task", {{"task_id", 10}, {"lease", "O"}}),
              Call(9, "submit_response",
                   {{"task_id", 11}, {"lease", "P"}, {"response", "[]"}})});
  ASSERT_EQ(s.answers.size(), 8u);
  for (const Json& a : s.answers) {
    EXPECT_EQ(a["result"]["structuredContent"], Json({{"status", "ok"}}));
  }
  EXPECT_EQ(fake.calls,
            (std::vector<std::string>{
                "heartbeat 7 L", R"(done 7 L [{"kind":"Next","value":[1,2]}])",
                "fail 8 M ", "fail 9 N why", "status", "status", "release 10 O",
                "done 11 P []"}));
  EXPECT_EQ(fake.fail_reason, "agent_failed");
}

TEST(McpServerTest, ARefusedCallIsAToolErrorWithTheMessage) {
  FakeAgentService fake;
  fake.reply = {3, "", "lease lost: task 7 was put back"};
  Served s =
      Session(&fake, {Call(2, "heartbeat", {{"task_id", 7}, {"lease", "L"}})});
  ASSERT_EQ(s.answers.size(), 1u);
  const Json& r = s.answers[0]["result"];
  EXPECT_EQ(r["isError"], true);
  EXPECT_EQ(r["content"][0]["text"], "lease lost: task 7 was put back");
  EXPECT_EQ(r["structuredContent"]["exit_code"], 3);
  fake.reply = {1, R"({"task_id":7})", "response is not an array"};
  s = Session(
      &fake,
      {Call(2, "submit_response",
            {{"task_id", 7}, {"lease", "L"}, {"response", Json::array()}})});
  ASSERT_EQ(s.answers.size(), 1u);
  EXPECT_EQ(s.answers[0]["result"]["structuredContent"]["result"]["task_id"],
            7);
}

// The session's leases are failed (agent_disconnected) when its input ends:
// those it took and did not end, not those it completed, failed or released.
TEST(McpServerTest, LeasesStillHeldWhenTheInputEndsAreFailedDisconnected) {
  FakeAgentService fake;
  Served s =
      Session(&fake, {Call(2, "take_task", Json::object()),
                      Call(3, "heartbeat", {{"task_id", 7}, {"lease", "L"}})});
  ASSERT_EQ(s.answers.size(), 2u);
  EXPECT_EQ(fake.calls.back().rfind(
                "fail 7 L the MCP session of mcp:test-client ended", 0),
            0u)
      << fake.calls.back();
  EXPECT_EQ(fake.fail_reason, "agent_disconnected");
  EXPECT_NE(s.log.find("task 7: handed back, charged"), std::string::npos)
      << s.log;
  for (const char* end : {"submit_response", "fail_task", "release_task"}) {
    FakeAgentService ended;
    Json args = {{"task_id", 7}, {"lease", "L"}};
    if (std::string(end) == "submit_response") args["response"] = Json::array();
    Session(&ended, {Call(2, "take_task", Json::object()), Call(3, end, args)});
    EXPECT_EQ(ended.calls.size(), 2u) << end << ": " << ended.calls.back();
  }
}

TEST(McpServerTest, WrongArgumentsAreToolErrorsThatReachNoCall) {
  const std::vector<std::pair<std::string, Json>> bad = {
      {"heartbeat", {{"task_id", "7"}, {"lease", "L"}}},
      {"heartbeat", {{"task_id", 1.5}, {"lease", "L"}}},
      {"heartbeat", {{"task_id", 0}, {"lease", "L"}}},
      {"heartbeat", {{"task_id", -3}, {"lease", "L"}}},
      {"heartbeat", {{"task_id", 7}, {"lease", ""}}},
      {"heartbeat", {{"task_id", 7}, {"lease", 5}}},
      {"heartbeat", {{"task_id", 7}}},
      {"heartbeat", {{"task_id", 7}, {"lease", "L"}, {"taskid", 7}}},
      {"submit_response", {{"task_id", 7}, {"lease", "L"}}},
      {"submit_response", {{"task_id", 7}, {"lease", "L"}, {"response", 5}}},
      {"submit_response",
       {{"task_id", 7}, {"lease", "L"}, {"response", {{"kind", "A"}}}}},
      {"fail_task", {{"task_id", 7}, {"lease", "L"}, {"message", 1}}},
      {"take_task", {{"steps", "Review"}}},
      {"take_task", {{"steps", {1}}}},
      {"take_task", {{"steps", {""}}}},
      {"take_task", {{"wait_seconds", -1}}},
      {"take_task", {{"wait_seconds", 1e9}}},
      {"take_task", {{"wait_seconds", "1"}}},
      {"run_status", {{"verbose", true}}},
  };
  for (const auto& [tool, args] : bad) {
    FakeAgentService fake;
    Served s = Session(&fake, {Call(2, tool, args)});
    ASSERT_EQ(s.answers.size(), 1u) << args.dump();
    const Json& r = s.answers[0]["result"];
    EXPECT_EQ(r["isError"], true) << args.dump();
    EXPECT_EQ(r["structuredContent"]["exit_code"], 2) << args.dump();
    EXPECT_NE(r["content"][0]["text"].get<std::string>().find(tool + ": "),
              std::string::npos)
        << r.dump();
    EXPECT_TRUE(fake.calls.empty()) << tool << " " << args.dump();
  }
}

TEST(McpServerTest, MalformedToolCallsAreInvalidParams) {
  FakeAgentService fake;
  Served s = Session(
      &fake,
      {Call(2, "no_such_tool", Json::object()),
       Request(3, "tools/call", {{"name", 5}}),
       Request(4, "tools/call", Json::object()),
       Request(5, "tools/call", {{"name", "run_status"}, {"arguments", {1}}}),
       Request(6, "tools/call", {1, 2}),
       Request(7, "tools/call", "run_status")});
  ASSERT_EQ(s.answers.size(), 6u);
  for (size_t i = 0; i < s.answers.size(); i++) {
    EXPECT_EQ(ErrorCode(s.answers[i]), -32602) << s.answers[i].dump();
    EXPECT_EQ(s.answers[i]["id"], static_cast<int>(i) + 2);
  }
  EXPECT_TRUE(fake.calls.empty());
}

TEST(McpServerTest, MalformedMessagesGetTheirErrorAndTheSessionGoesOn) {
  FakeAgentService fake;
  const std::vector<std::pair<std::string, int>> cases = {
      {"not json", -32700},
      {R"({"jsonrpc":"2.0","id":2,"method":"ping")", -32700},
      {"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"p\xff\"}", -32700},
      {std::string(100000, '[') + std::string(100000, ']'), -32700},
      {"42", -32600},
      {"\"ping\"", -32600},
      {"null", -32600},
      {R"([{"jsonrpc":"2.0","id":3,"method":"ping"}])", -32600},
      {R"({"jsonrpc":"1.0","id":4,"method":"ping"})", -32600},
      {R"({"id":5,"method":"ping"})", -32600},
      {R"({"jsonrpc":"2.0","id":6,"method":7})", -32600},
      {R"({"jsonrpc":"2.0","id":6.5,"method":"ping"})", -32600},
      {R"({"jsonrpc":"2.0","id":null,"method":"ping"})", -32600},
      {R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})", -32600},
      {R"({"jsonrpc":"2.0","id":8})", -32600},
      {R"({"jsonrpc":"2.0","id":9,"method":"resources/list"})", -32601},
      {R"({"jsonrpc":"2.0","id":10,"method":"ping","params":[1]})", -32602},
  };
  std::vector<std::string> lines;
  for (const auto& c : cases) lines.push_back(c.first);
  lines.push_back(R"({"jsonrpc":"2.0","id":11,"method":"ping","extra":1,)"
                  R"("params":{"_meta":{"progressToken":1},"unknown":[]}})");
  lines.push_back("");
  lines.push_back("   ");
  Served s = Session(&fake, lines);
  ASSERT_EQ(s.answers.size(), cases.size() + 1);
  for (size_t i = 0; i < cases.size(); i++) {
    EXPECT_EQ(ErrorCode(s.answers[i]), cases[i].second)
        << cases[i].first.substr(0, 80) << " -> " << s.answers[i].dump();
  }
  EXPECT_EQ(s.answers[0]["id"], nullptr);
  EXPECT_EQ(s.answers[8]["id"], 4) << "a valid id is echoed";
  EXPECT_EQ(s.answers[11]["id"], nullptr) << "an invalid id is not";
  EXPECT_EQ(s.answers.back()["id"], 11);
  EXPECT_EQ(s.answers.back()["result"], Json::object());
}

TEST(McpServerTest, NotificationsAndResponsesGetNoAnswer) {
  FakeAgentService fake;
  Served s = Session(
      &fake,
      {R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
       R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})",
       R"({"jsonrpc":"2.0","method":"notifications/whatever"})",
       R"({"jsonrpc":"2.0","method":"tools/call","params":{"name":"run_status"}})",
       R"({"jsonrpc":"1.0","method":"ping"})",
       R"({"jsonrpc":"2.0","id":1,"result":{}})",
       R"({"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}})",
       Request(3, "ping", nullptr)});
  ASSERT_EQ(s.answers.size(), 1u);
  EXPECT_EQ(s.answers[0]["id"], 3);
  EXPECT_TRUE(fake.calls.empty()) << "a tools/call notification ran";
}

TEST(McpServerTest, AReusedRequestIdIsRefusedAndNotRun) {
  FakeAgentService fake;
  Served s =
      Session(&fake, {Call(2, "run_status", Json::object()),
                      Call(2, "run_status", Json::object()),
                      R"({"jsonrpc":"2.0","id":"2","method":"ping"})",
                      R"({"jsonrpc":"2.0","id":"init","method":"ping"})"});
  ASSERT_EQ(s.answers.size(), 4u);
  EXPECT_TRUE(s.answers[0].contains("result"));
  EXPECT_EQ(ErrorCode(s.answers[1]), -32600);
  EXPECT_EQ(s.answers[1]["id"], 2);
  EXPECT_TRUE(s.answers[2].contains("result")) << "\"2\" is not 2";
  EXPECT_EQ(ErrorCode(s.answers[3]), -32600);
  EXPECT_EQ(fake.calls.size(), 1u);
}

TEST(McpServerTest, AnExceptionInACallIsAnInternalErrorAndTheSessionGoesOn) {
  FakeAgentService fake;
  fake.throw_in_status = true;
  Served s = Session(&fake, {Call(2, "run_status", Json::object()),
                             Request(3, "ping", nullptr)});
  ASSERT_EQ(s.answers.size(), 2u);
  EXPECT_EQ(ErrorCode(s.answers[0]), -32603);
  EXPECT_EQ(s.answers[0]["id"], 2);
  EXPECT_EQ(s.answers[1]["id"], 3);
}

TEST(McpServerTest, AnOverlongLineIsRefusedAndTheNextOneServed) {
  FakeAgentService fake;
  McpServerOptions options;
  options.max_message_bytes = 100000;
  const std::string huge = R"({"jsonrpc":"2.0","id":2,"method":"ping","x":")" +
                           std::string(1000000, 'a') + "\"}";
  const std::string big_ok =
      R"({"jsonrpc":"2.0","id":3,"method":"ping","x":")" +
      std::string(90000, 'b') + "\"}";
  Served s = Serve(&fake,
                   std::string(kInit) + "\n" + huge + "\n" + big_ok + "\r\n" +
                       Request(4, "ping", nullptr) + "\n",
                   options);
  EXPECT_EQ(s.code, 0);
  ASSERT_EQ(s.answers.size(), 4u);
  EXPECT_EQ(ErrorCode(s.answers[1]), -32600);
  EXPECT_NE(s.answers[1]["error"]["message"].get<std::string>().find(
                "limit is 100000"),
            std::string::npos);
  EXPECT_EQ(s.answers[2]["id"], 3);
  EXPECT_EQ(s.answers[3]["id"], 4);
}

TEST(McpServerTest, InputEndingMidMessageIsNotAnsweredNorRun) {
  FakeAgentService fake;
  Served s = Serve(
      &fake, std::string(kInit) + "\n" + Call(2, "run_status", Json::object()));
  EXPECT_EQ(s.code, 0);
  ASSERT_EQ(s.answers.size(), 1u);
  EXPECT_TRUE(fake.calls.empty());
  EXPECT_NE(s.log.find("in the middle of a message"), std::string::npos)
      << s.log;
}

TEST(McpServerTest, AClosedOutputEndsServeWithAnError) {
  signal(SIGPIPE, SIG_IGN);
  FakeAgentService fake;
  ScratchDir dir;
  test::WriteAll(dir.Join("in"), std::string(kInit) + "\n");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  const int in = open(dir.Join("in").c_str(), O_RDONLY);
  McpServerOptions options;
  options.log_fd = -1;
  McpServer server(&fake, in, fds[1], options);
  EXPECT_EQ(server.Serve(), 3);
  close(in);
  close(fds[1]);
}

}  // namespace
}  // namespace wizq
