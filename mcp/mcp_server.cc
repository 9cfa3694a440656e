#include "mcp/mcp_server.h"

#include <errno.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <utility>

#include "mcp/mcp_session.h"
#include "util/exit_code.h"

namespace wizq {
namespace {

constexpr size_t kReadChunk = 64 << 10;

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

const std::vector<std::string>& McpServer::SupportedProtocolVersions() {
  static const std::vector<std::string> versions = {
      "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"};
  return versions;
}

McpServer::McpServer(AgentService* service, int in_fd, int out_fd,
                     McpServerOptions options)
    : in_fd_(in_fd), out_fd_(out_fd), options_(std::move(options)) {
  session_ = std::make_unique<McpSession>(
      service, options_.server_version, options_.max_nesting,
      [this](const std::string& line) { Log(line); });
}

McpServer::~McpServer() = default;

void McpServer::Log(const std::string& line) const {
  if (options_.log_fd < 0) return;
  const std::string text = "wizq mcp: " + line + "\n";
  (void)WriteAll(options_.log_fd, text.data(), text.size());
}

bool McpServer::Emit(const std::string& message) {
  std::string line = message;
  line += '\n';
  if (WriteAll(out_fd_, line.data(), line.size())) return true;
  Log(std::string("cannot write the output: ") + std::strerror(errno));
  return false;
}

int McpServer::Serve() {
  const int code = ReadAndAnswer();
  session_->EndSession();
  return code;
}

int McpServer::ReadAndAnswer() {
  std::string buffer;     // input not yet split into lines
  size_t scanned = 0;     // buffer[0, scanned) holds no newline
  size_t discarding = 0;  // bytes of an over-long line dropped so far
  char chunk[kReadChunk];
  for (;;) {
    if (options_.stop_requested && options_.stop_requested()) {
      Log("stopped by a signal; the session ends");
      return kExitInterrupted;
    }
    const ssize_t n = read(in_fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;  // a stop is seen above
    if (n < 0) {
      Log(std::string("cannot read the input: ") + std::strerror(errno));
      return kExitEnvironment;
    }
    if (n == 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    size_t start = 0;
    for (;;) {
      const size_t nl = buffer.find('\n', scanned);
      if (nl == std::string::npos) break;
      if (discarding > 0 || nl - start > options_.max_message_bytes) {
        // The end of an over-long line: answer it once, as one message.
        if (!Emit(McpSession::TooLong(discarding + nl - start,
                                      options_.max_message_bytes))) {
          return kExitEnvironment;
        }
        discarding = 0;
      } else {
        std::string line = buffer.substr(start, nl - start);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::optional<std::string> answer = session_->HandleLine(line);
        if (answer && !Emit(*answer)) return kExitEnvironment;
      }
      start = nl + 1;
      scanned = start;
    }
    buffer.erase(0, start);
    scanned = buffer.size();
    if (buffer.size() > options_.max_message_bytes) {
      discarding += buffer.size();
      buffer.clear();
      scanned = 0;
    }
  }
  if (!buffer.empty() || discarding > 0) {
    Log("the input ended in the middle of a message (" +
        std::to_string(buffer.size() + discarding) +
        " bytes without a newline); it was not answered");
  }
  return kExitCompleted;
}

}  // namespace wizq
