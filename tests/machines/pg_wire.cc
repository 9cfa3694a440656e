// See pg_wire.h. Message formats: PostgreSQL documentation, "Frontend/
// Backend Protocol", "Message Formats".
#include "tests/machines/pg_wire.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace wizq::machines {
namespace {

constexpr size_t kInspect = 64 * 1024;
constexpr uint32_t kSslRequest = 80877103, kGssEncRequest = 80877104;

uint32_t Be32(const std::string& s, size_t at) {
  auto b = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<unsigned char>(s[at + i]));
  };
  return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
}

// The NUL-terminated string at `*pos` of `s`; false if it does not end
// within `s`.
bool CString(std::string_view s, size_t* pos, std::string* out) {
  size_t end = s.find('\0', *pos);
  if (end == std::string_view::npos) return false;
  out->assign(s.substr(*pos, end - *pos));
  *pos = end + 1;
  return true;
}

}  // namespace

bool IsCommitText(std::string_view sql) {
  std::vector<std::string> words(1);
  for (char ch : sql) {
    unsigned char u = static_cast<unsigned char>(ch);
    if (isspace(u) || ch == ';') {
      if (!words.back().empty()) words.emplace_back();
      if (ch == ';') words.back() = ";", words.emplace_back();
    } else {
      words.back() += static_cast<char>(tolower(u));
    }
  }
  if (words.back().empty()) words.pop_back();
  if (!words.empty() && words.back() == ";") words.pop_back();
  if (words.empty() || words.size() > 2) return false;
  if (words[0] != "commit" && words[0] != "end") return false;
  return words.size() == 1 || words[1] == "work" || words[1] == "transaction";
}

void FrontendStream::Pass(std::string* out, size_t n) {
  out->append(in_, 0, n);
  in_.erase(0, n);
}

FrontendStream::Step FrontendStream::Next(std::string* out, Event* ev) {
  if (paused_ || in_.empty() || held_ > 0) return kNeedMore;
  if (opaque_) {
    Pass(out, in_.size());
    return kProgress;
  }
  if (pass_ > 0) {
    size_t n = std::min(pass_, in_.size());
    Pass(out, n);
    pass_ -= n;
    return kProgress;
  }
  if (!started_) return Startup(out);
  if (in_.size() < 5) return kNeedMore;
  char type = in_[0];
  uint32_t len = Be32(in_, 1);
  if (len < 4) {  // not the protocol this proxy knows: forward blind
    opaque_ = true;
    return kProgress;
  }
  size_t total = 1 + static_cast<size_t>(len);
  bool inspect = std::string_view("QPBEC").find(type) != std::string::npos;
  size_t need = inspect ? std::min(total, kInspect) : 5;
  if (in_.size() < need) return kNeedMore;
  if (inspect &&
      Inspect(type, std::string_view(in_).substr(5, need - 5), need == total)) {
    held_ = total;
    held_simple_ = type == 'Q';
    ev->extended = type == 'E';
    ev->replies_before = replies_expected_;
    return kCommit;
  }
  if (type == 'Q' || type == 'S' || type == 'F') replies_expected_++;
  Pass(out, need);
  pass_ = total - need;
  if (type == 'S' && pause_after_sync_) paused_ = true;
  return kProgress;
}

void FrontendStream::ForwardCommit(std::string* out, bool pause) {
  Pass(out, held_);
  held_ = 0;
  if (held_simple_) replies_expected_++;
  if (pause && held_simple_) paused_ = true;
  if (pause && !held_simple_) pause_after_sync_ = true;
}

bool FrontendStream::TakeEncryptionRequest() {
  bool r = encryption_;
  encryption_ = false;
  return r;
}

FrontendStream::Step FrontendStream::Startup(std::string* out) {
  if (in_.size() < 8) return kNeedMore;
  uint32_t len = Be32(in_, 0), code = Be32(in_, 4);
  if (len < 8 || len > 10000) {
    opaque_ = true;
    return kProgress;
  }
  if (in_.size() < len) return kNeedMore;
  if (code == kSslRequest || code == kGssEncRequest) {
    encryption_ = true;  // the startup packet comes after the answer
  } else if ((code >> 16) == 3) {
    std::string_view params = std::string_view(in_).substr(8, len - 8);
    size_t pos = 0;
    std::string key, value;
    while (CString(params, &pos, &key) && !key.empty() &&
           CString(params, &pos, &value)) {
      if (key == "user") user_ = value;
      if (key == "database") database_ = value;
      if (key == "application_name") application_name_ = value;
    }
    started_ = true;
    replies_expected_++;
  }  // else a CancelRequest: the server closes after it
  Pass(out, len);
  return kProgress;
}

// Records what a Parse, Bind or Close does to the statements and portals;
// true if `body` is a COMMIT (a Query, or the Execute of a COMMIT portal).
// `whole`: the body is complete (else its first kInspect bytes).
bool FrontendStream::Inspect(char type, std::string_view body, bool whole) {
  size_t pos = 0;
  std::string a, b;
  switch (type) {
    case 'Q':
      return whole && CString(body, &pos, &a) && IsCommitText(a);
    case 'P':  // name, query text, parameter types
      if (CString(body, &pos, &a)) {
        statements_[a] = whole && CString(body, &pos, &b) && IsCommitText(b);
      }
      return false;
    case 'B':  // portal, statement, ...
      if (CString(body, &pos, &a) && CString(body, &pos, &b)) {
        auto it = statements_.find(b);
        portals_[a] = it != statements_.end() && it->second;
      }
      return false;
    case 'E': {  // portal, row limit
      auto it = portals_.end();
      if (CString(body, &pos, &a)) it = portals_.find(a);
      return it != portals_.end() && it->second;
    }
    case 'C':  // 'S' statement or 'P' portal, name
      pos = 1;
      if (!body.empty() && CString(body, &pos, &a)) {
        (body[0] == 'S' ? statements_ : portals_).erase(a);
      }
      return false;
  }
  return false;
}

void BackendStream::DropReplyCycle(uint64_t replies_before, bool extended) {
  armed_ = true;
  extended_ = extended;
  replies_before_ = replies_before;
  outcome_.clear();
}

bool BackendStream::Pump(std::string* out, std::string* outcome) {
  while (!in_.empty()) {
    if (opaque_) {
      out->append(in_);
      in_.clear();
      break;
    }
    if (answer_pending_) {  // 'S' or 'G': encryption follows; 'N': none
      char answer = in_[0];
      out->push_back(answer);
      in_.erase(0, 1);
      answer_pending_ = false;
      if (answer == 'S' || answer == 'G') opaque_ = true;
      continue;
    }
    if (pass_ > 0) {
      size_t n = std::min(pass_, in_.size());
      if (!pass_dropped_) out->append(in_, 0, n);
      in_.erase(0, n);
      pass_ -= n;
      continue;
    }
    if (in_.size() < 5) break;
    char type = in_[0];
    uint32_t len = Be32(in_, 1);
    if (len < 4) {
      opaque_ = true;
      continue;
    }
    size_t total = 1 + static_cast<size_t>(len);
    bool in_cycle = armed_ && replies_seen_ >= replies_before_;
    if (in_cycle && (type == 'C' || type == 'E')) {
      size_t need = std::min(total, kInspect);
      if (in_.size() < need) break;
      size_t pos = 5;
      std::string tag;
      if (type == 'E') {
        outcome_ = "error";
      } else if (CString(std::string_view(in_).substr(0, need), &pos, &tag)) {
        outcome_ = tag;
      }
    }
    if (type == 'Z') replies_seen_++;
    pass_ = total;
    pass_dropped_ = in_cycle;
    if (in_cycle && type == 'Z') {
      armed_ = false;
      *outcome = outcome_;
      return true;
    }
  }
  return false;
}

}  // namespace wizq::machines
