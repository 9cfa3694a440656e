#include "agent/agent_response.h"

#include <nlohmann/json.hpp>

#include "tasks/workflow/json_messages.h"

namespace wizq {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kSpace = " \t\r\n";

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

// Whether `s` is exactly one JSON array (no DOM is built, so any nesting
// is safe).
bool IsArray(std::string_view s) {
  s = Trim(s);
  return !s.empty() && s.front() == '[' && Json::accept(s);
}

// `s` cut to `n` bytes for a message, as a JSON literal.
std::string Shown(std::string_view s, size_t n) {
  s = Trim(s);
  return Quote(s.size() > n ? std::string(s.substr(0, n)) + "..."
                            : std::string(s));
}

// The body of the first Markdown fence (``` or ```json ...) in `s`; false
// when there is none.
bool FenceBody(std::string_view s, std::string_view* body) {
  const size_t open = s.find("```");
  if (open == std::string_view::npos) return false;
  const size_t line_end = s.find('\n', open);
  if (line_end == std::string_view::npos) return false;
  const size_t close = s.find("```", line_end);
  if (close == std::string_view::npos) return false;
  *body = s.substr(line_end + 1, close - line_end - 1);
  return true;
}

}  // namespace

Status AgentResponseText(std::string_view raw, std::string* text) {
  std::string_view s = Trim(raw);
  std::string unwrapped;
  if (!s.empty() && s.front() == '"') {
    const Json j = Json::parse(s, nullptr, /*allow_exceptions=*/false);
    if (j.is_string()) {
      unwrapped = j.get<std::string>();
      s = Trim(unwrapped);
    }
  }
  if (!s.empty() && s.front() == '[') {
    *text = std::string(s);
    return Status::OK();
  }
  // Other JSON (an object, a number) is the validator's to name.
  if (Json::accept(s)) {
    *text = std::string(raw);
    return Status::OK();
  }
  std::string_view body;
  if (FenceBody(s, &body) && IsArray(body)) {
    return Status::InvalidArgument(
        "the response is the array inside a ```json fence: send the array "
        "alone, without the fence or any text");
  }
  const size_t first = s.find('['), last = s.rfind(']');
  if (first != std::string_view::npos && last != std::string_view::npos &&
      first < last && IsArray(s.substr(first, last - first + 1))) {
    const std::string_view before = Trim(s.substr(0, first));
    const std::string_view after = Trim(s.substr(last + 1));
    std::string where;
    if (!before.empty()) where = "before it: " + Shown(before, 60);
    if (!after.empty()) {
      where += (where.empty() ? "" : "; ") + ("after it: " + Shown(after, 60));
    }
    return Status::InvalidArgument("the response has text around the array (" +
                                   where + "): send the array alone");
  }
  *text = std::string(raw);  // not an array: the validator says what it is
  return Status::OK();
}

}  // namespace wizq
