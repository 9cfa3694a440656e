#include "util/canonical_json.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include "util/json_writer.h"

namespace wizq {
namespace {

// Compares two UTF-8 strings by their UTF-16 code units (RFC 8785 §3.2.3).
std::u16string ToUtf16(std::string_view s) {
  std::u16string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if ((c & 0xE0) == 0xC0) {
      cp = c & 0x1F;
      len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      cp = c & 0x0F;
      len = 3;
    } else {
      cp = c & 0x07;
      len = 4;
    }
    for (size_t k = 1; k < len && i + k < s.size(); k++) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    i += len;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out.push_back(static_cast<char16_t>(0xD800 + (cp >> 10)));
      out.push_back(static_cast<char16_t>(0xDC00 + (cp & 0x3FF)));
    } else {
      out.push_back(static_cast<char16_t>(cp));
    }
  }
  return out;
}

// *dup receives the first key found twice in one object (RFC 8259 leaves
// such objects' meaning open, so they are refused).
void WriteCanonical(simdjson::dom::element e, std::string* out,
                    std::string* dup, const std::string& path);

void WriteObject(simdjson::dom::object obj, std::string* out, std::string* dup,
                 const std::string& path) {
  std::vector<std::pair<std::u16string, simdjson::dom::key_value_pair>> fields;
  for (auto field : obj) fields.emplace_back(ToUtf16(field.key), field);
  std::stable_sort(
      fields.begin(), fields.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  out->push_back('{');
  for (size_t i = 0; i < fields.size(); i++) {
    if (i) out->push_back(',');
    const std::string key(fields[i].second.key);
    if (i && fields[i].first == fields[i - 1].first && dup->empty()) {
      *dup = "duplicate key \"" + key + "\" in the object at " + path;
    }
    AppendJsonString(out, key);
    out->push_back(':');
    WriteCanonical(fields[i].second.value, out, dup,
                   dup->empty() ? path + "." + key : path);
  }
  out->push_back('}');
}

void WriteCanonical(simdjson::dom::element e, std::string* out,
                    std::string* dup, const std::string& path) {
  char buf[32];
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT:
      WriteObject(e.get_object().value_unsafe(), out, dup, path);
      break;
    case simdjson::dom::element_type::ARRAY: {
      out->push_back('[');
      bool first = true;
      size_t index = 0;
      // A named copy: ranging over value_unsafe() of the temporary result
      // would bind to it after it is destroyed (-Wdangling-pointer).
      const simdjson::dom::array array = e.get_array().value_unsafe();
      for (auto child : array) {
        if (!first) out->push_back(',');
        first = false;
        WriteCanonical(
            child, out, dup,
            dup->empty() ? path + "[" + std::to_string(index) + "]" : path);
        index++;
      }
      out->push_back(']');
      break;
    }
    case simdjson::dom::element_type::INT64: {
      auto r =
          std::to_chars(buf, buf + sizeof(buf), e.get_int64().value_unsafe());
      out->append(buf, r.ptr);
      break;
    }
    case simdjson::dom::element_type::UINT64: {
      auto r =
          std::to_chars(buf, buf + sizeof(buf), e.get_uint64().value_unsafe());
      out->append(buf, r.ptr);
      break;
    }
    case simdjson::dom::element_type::DOUBLE:
      out->append(FormatDoubleEs6(e.get_double().value_unsafe()));
      break;
    case simdjson::dom::element_type::STRING:
      AppendJsonString(out, e.get_string().value_unsafe());
      break;
    case simdjson::dom::element_type::BOOL:
      out->append(e.get_bool().value_unsafe() ? "true" : "false");
      break;
    case simdjson::dom::element_type::NULL_VALUE:
      out->append("null");
      break;
  }
}

// simdjson refuses integers beyond the 64-bit range (NUMBER_ERROR) although
// they are valid JSON, and RFC 8785 reads every number as a double anyway.
// Copies `json` to *out with ".0" after each such integer (outside strings)
// so that it parses as the double it stands for; false if there is none.
bool WidenBigIntegers(std::string_view json, std::string* out) {
  auto digits = [&](size_t j) {
    while (j < json.size() && json[j] >= '0' && json[j] <= '9') j++;
    return j;
  };
  bool changed = false;
  out->clear();
  for (size_t i = 0; i < json.size();) {
    const char c = json[i];
    size_t j = i + 1;
    if (c == '"') {
      while (j < json.size() && json[j] != '"') j += json[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, json.size());
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t int_begin = i + (c == '-');
      const size_t int_end = digits(int_begin);
      j = int_end;
      bool integer = true;
      if (j < json.size() && json[j] == '.') {
        integer = false;
        j = digits(j + 1);
      }
      if (j < json.size() && (json[j] == 'e' || json[j] == 'E')) {
        integer = false;
        j++;
        if (j < json.size() && (json[j] == '+' || json[j] == '-')) j++;
        j = digits(j);
      }
      if (integer && int_end > int_begin) {
        uint64_t u;
        int64_t s;
        const bool big =
            c == '-'
                ? std::from_chars(json.data() + i, json.data() + j, s).ec ==
                      std::errc::result_out_of_range
                : std::from_chars(json.data() + i, json.data() + j, u).ec ==
                      std::errc::result_out_of_range;
        if (big) {
          out->append(json.substr(i, j - i)).append(".0");
          changed = true;
          i = j;
          continue;
        }
      }
    }
    out->append(json.substr(i, j - i));
    i = j;
  }
  return changed;
}

}  // namespace

std::string FormatDoubleEs6(double v) {
  if (v == 0) return "0";
  if (!std::isfinite(v)) return "null";
  std::string out;
  if (v < 0) {
    out.push_back('-');
    v = -v;
  }
  // Shortest round-trip digits in scientific form: d[.ddd]e[+-]x.
  char buf[40];
  auto r =
      std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, r.ptr - buf);
  size_t epos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, epos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp10 = 0;
  std::from_chars(sci.data() + epos + 1 + (sci[epos + 1] == '+'),
                  sci.data() + sci.size(), exp10);
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;  // position of the decimal point
  if (k <= n && n <= 21) {
    out += digits;
    out.append(n - k, '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, n);
    out += '.';
    out += digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(-n, '0');
    out += digits;
  } else {
    out += digits[0];
    if (k > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += 'e';
    out += (n - 1 >= 0) ? '+' : '-';
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

Status CanonicalizeJson(std::string_view json, std::string* out) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element root;
  auto error = parser.parse(padded).get(root);
  std::string widened;
  if (error == simdjson::NUMBER_ERROR && WidenBigIntegers(json, &widened)) {
    padded = simdjson::padded_string(widened);
    error = parser.parse(padded).get(root);
  }
  if (error) {
    return Status::InvalidArgument(std::string("not valid JSON: ") +
                                   simdjson::error_message(error));
  }
  out->clear();
  std::string dup;
  WriteCanonical(root, out, &dup, "$");
  if (!dup.empty()) {
    out->clear();
    return Status::InvalidArgument(dup);
  }
  return Status::OK();
}

namespace {

// True if no object in `e` repeats a key (keys compared unescaped, as
// CanonicalizeJson compares them). *keys is scratch space.
bool KeysUnique(simdjson::dom::element e, std::vector<std::string_view>* keys) {
  if (e.type() == simdjson::dom::element_type::ARRAY) {
    const simdjson::dom::array array = e.get_array().value_unsafe();
    for (auto child : array) {
      if (!KeysUnique(child, keys)) return false;
    }
    return true;
  }
  if (e.type() != simdjson::dom::element_type::OBJECT) return true;
  const simdjson::dom::object obj = e.get_object().value_unsafe();
  const size_t base = keys->size();
  for (auto field : obj) keys->push_back(field.key);
  std::sort(keys->begin() + base, keys->end());
  const bool unique =
      std::adjacent_find(keys->begin() + base, keys->end()) == keys->end();
  keys->resize(base);
  if (!unique) return false;
  for (auto field : obj) {
    if (!KeysUnique(field.value, keys)) return false;
  }
  return true;
}

}  // namespace

bool IsValidJson(std::string_view json) {
  thread_local simdjson::dom::parser parser;
  thread_local std::string buffer;
  thread_local std::vector<std::string_view> keys;
  buffer.assign(json);
  buffer.resize(json.size() + simdjson::SIMDJSON_PADDING, '\0');
  simdjson::dom::element root;
  auto error = parser.parse(buffer.data(), json.size(), false).get(root);
  if (error == simdjson::NUMBER_ERROR) {  // a big integer: valid JSON
    std::string canonical;
    return CanonicalizeJson(json, &canonical).ok();
  }
  return !error && KeysUnique(root, &keys);
}

Status CheckKeysUnique(std::string_view json) {
  std::string canonical;
  Status s = CanonicalizeJson(json, &canonical);
  const bool dup =
      !s.ok() && s.message().rfind("duplicate key", 0) != std::string::npos;
  return dup ? s : Status::OK();
}

}  // namespace wizq
