// Small helpers over simdjson's On-Demand API shared by the snapshot and
// event readers.
#ifndef WIZQ_QUEUE_JSON_UTIL_H_
#define WIZQ_QUEUE_JSON_UTIL_H_

#include <simdjson.h>

#include <string>
#include <string_view>
#include <vector>

namespace wizq {

// The exact JSON text of a value (object, array or scalar).
inline simdjson::error_code RawJson(simdjson::ondemand::value v,
                                    std::string_view* out) {
  simdjson::ondemand::json_type type;
  auto err = v.type().get(type);
  if (err) return err;
  if (type == simdjson::ondemand::json_type::object) {
    simdjson::ondemand::object obj;
    err = v.get_object().get(obj);
    return err ? err : obj.raw_json().get(*out);
  }
  if (type == simdjson::ondemand::json_type::array) {
    simdjson::ondemand::array arr;
    err = v.get_array().get(arr);
    return err ? err : arr.raw_json().get(*out);
  }
  std::string_view tok = v.raw_json_token();
  while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n' ||
                          tok.back() == '\r' || tok.back() == '\t')) {
    tok.remove_suffix(1);
  }
  *out = tok;
  return simdjson::SUCCESS;
}

// Keys and strings as views into the document itself when they hold no
// escapes (every key and nearly every string wizq writes). simdjson's
// unescaped_key() and get_string() copy each one into the parser's string
// buffer, which only grows within a document: for a 40 MB queue.json that
// is ~30 MB more memory touched (see docs/BENCHMARKS.md, "Open"). A string
// with a backslash is unescaped as usual. The document has been through
// simdjson's first pass, so every string is closed by a quote.
inline simdjson::error_code KeyView(
    simdjson::simdjson_result<simdjson::ondemand::field>& field,
    std::string_view* out) {
  simdjson::ondemand::raw_json_string raw;
  auto err = field.key().get(raw);
  if (err) return err;
  const char* const start = raw.raw();
  const char* end = start;
  while (*end != '"' && *end != '\\') end++;
  if (*end == '"') {
    *out = std::string_view(start, static_cast<size_t>(end - start));
    return simdjson::SUCCESS;
  }
  return field.unescaped_key().get(*out);
}

inline simdjson::error_code StringView(simdjson::ondemand::value v,
                                       std::string_view* out) {
  const std::string_view tok = v.raw_json_token();
  if (!tok.empty() && tok[0] == '"') {
    const size_t end = tok.find_first_of("\"\\", 1);
    if (end != std::string_view::npos && tok[end] == '"') {
      *out = tok.substr(1, end - 1);
      return simdjson::SUCCESS;
    }
  }
  return v.get_string().get(*out);  // escapes, or not a string
}

// An array of strings, copied into *out.
inline simdjson::error_code ReadStrings(simdjson::ondemand::value v,
                                        std::vector<std::string>* out) {
  out->clear();
  simdjson::ondemand::array arr;
  auto err = v.get_array().get(arr);
  if (err) return err;
  for (auto element : arr) {
    simdjson::ondemand::value item;
    err = element.get(item);
    std::string_view s;
    if (!err) err = StringView(item, &s);
    if (err) return err;
    out->emplace_back(s);
  }
  return simdjson::SUCCESS;
}

// A nullable integer: null reads as 0.
inline simdjson::error_code IntOrNull(simdjson::ondemand::value v,
                                      int64_t* out) {
  bool is_null = false;
  auto err = v.is_null().get(is_null);
  if (err) return err;
  if (is_null) {
    *out = 0;
    return simdjson::SUCCESS;
  }
  return v.get_int64().get(*out);
}

}  // namespace wizq

#endif  // WIZQ_QUEUE_JSON_UTIL_H_
