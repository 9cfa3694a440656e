#include "tasks/workflow/jsonc.h"

#include <cstdio>

#include "util/utf8.h"

namespace wizq {

namespace {

bool IsJsonSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Blanks out comments and trailing commas in a copy of the text. One pass;
// `pending_comma_` is the offset of the last comma seen outside strings whose
// fate (kept or blanked) depends on the next significant character.
class JsoncStripper {
 public:
  explicit JsoncStripper(std::string_view text) : in_(text), out_(text) {}

  Status Run(std::string* out) {
    while (pos_ < in_.size()) {
      WIZQ_RETURN_IF_ERROR(Step());
    }
    *out = std::move(out_);
    return Status::OK();
  }

 private:
  Status Step() {
    char c = in_[pos_];
    if (c == '"') return SkipString();
    if (c == '/' && pos_ + 1 < in_.size() && in_[pos_ + 1] == '/') {
      return BlankLineComment();
    }
    if (c == '/' && pos_ + 1 < in_.size() && in_[pos_ + 1] == '*') {
      return BlankBlockComment();
    }
    if (!IsJsonSpace(c)) Significant(c);
    ++pos_;
    return Status::OK();
  }

  // A character that is not whitespace or a comment: decides a pending comma.
  // Only a comma that follows a value can be trailing ("[,]" stays invalid).
  void Significant(char c) {
    if (pending_comma_ != kNone && (c == ']' || c == '}')) {
      out_[pending_comma_] = ' ';
    }
    bool after_value = last_ != '[' && last_ != '{' && last_ != ',' &&
                       last_ != ':' && last_ != '\0';
    pending_comma_ = (c == ',' && after_value) ? pos_ : kNone;
    last_ = c;
  }

  Status SkipString() {
    Significant('"');
    ++pos_;  // opening quote
    while (pos_ < in_.size() && in_[pos_] != '"') {
      if (in_[pos_] == '\\') ++pos_;
      ++pos_;
    }
    ++pos_;  // closing quote (an unterminated string is the parser's to report)
    return Status::OK();
  }

  Status BlankLineComment() {
    while (pos_ < in_.size() && in_[pos_] != '\n') Blank(pos_++);
    return Status::OK();
  }

  Status BlankBlockComment() {
    size_t start = pos_;
    Blank(pos_++);
    Blank(pos_++);
    while (pos_ < in_.size()) {
      if (in_[pos_] == '*' && pos_ + 1 < in_.size() && in_[pos_ + 1] == '/') {
        Blank(pos_++);
        Blank(pos_++);
        return Status::OK();
      }
      Blank(pos_++);
    }
    return Status::InvalidArgument("unterminated /* comment starting at " +
                                   LineColumn(in_, start) +
                                   "; close it with */");
  }

  void Blank(size_t i) {
    if (in_[i] != '\n' && in_[i] != '\r') out_[i] = ' ';
  }

  static constexpr size_t kNone = std::string::npos;
  std::string_view in_;
  std::string out_;
  size_t pos_ = 0;
  size_t pending_comma_ = kNone;
  char last_ = '\0';  // the last significant character
};

void AppendEscapedByte(unsigned char c, std::string* out) {
  switch (c) {
    case '\n':
      *out += "\\n";
      return;
    case '\t':
      *out += "\\t";
      return;
    case '\r':
      *out += "\\r";
      return;
    default: {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      *out += buf;
    }
  }
}

}  // namespace

Status StripJsonc(std::string_view text, std::string* out) {
  return JsoncStripper(text).Run(out);
}

Status CheckJsonDepth(std::string_view json, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return Status::InvalidArgument(
            "JSON nests arrays/objects deeper than " +
            std::to_string(max_depth) + " levels (at " + LineColumn(json, i) +
            "); flatten the data");
      }
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    }
  }
  return Status::OK();
}

std::string LineColumn(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

std::string Excerpt(std::string_view text, size_t max_bytes) {
  // Trailing white space (the newline that ends most output) would show
  // as a literal "\n" at the end of a message.
  const size_t last = text.find_last_not_of(" \t\r\n");
  text = text.substr(0, last == std::string_view::npos ? 0 : last + 1);
  std::string out;
  size_t i = 0;
  while (i < text.size() && i < max_bytes) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = Utf8SequenceLength(text, i);
    if (len > 1) {
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    if (len == 1 && c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      AppendEscapedByte(c, &out);
    }
    ++i;
  }
  if (i < text.size()) out += "...";
  return out;
}

}  // namespace wizq
