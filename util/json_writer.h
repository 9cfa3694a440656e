// JsonWriter: a small streaming writer of compact JSON text.
//
// Used for every line wizq writes (audit events, queue.json). Strings are
// escaped per RFC 8259 (", \, control characters; everything else passes
// through as UTF-8); invalid UTF-8 is replaced by U+FFFD so the output is
// always valid JSON. RawValue() splices in JSON text that is already valid
// (task inputs are kept as the exact text the task produced).
//
// The writer does not check nesting: callers pair Begin/End themselves.
#ifndef WIZQ_UTIL_JSON_WRITER_H_
#define WIZQ_UTIL_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace wizq {

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  // An object key; the next call writes its value.
  JsonWriter& Key(std::string_view key);

  JsonWriter& String(std::string_view s);
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  JsonWriter& Double(double v);  // shortest round-trip form
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  // Valid JSON text, copied as is (empty text writes null).
  JsonWriter& RawValue(std::string_view json);

  // Shorthands for Key(k) followed by the value.
  JsonWriter& Field(std::string_view k, std::string_view v) {
    return Key(k).String(v);
  }
  JsonWriter& Field(std::string_view k, const char* v) {
    return Key(k).String(v);
  }
  JsonWriter& Field(std::string_view k, int64_t v) { return Key(k).Int(v); }
  JsonWriter& Field(std::string_view k, int v) { return Key(k).Int(v); }
  JsonWriter& Field(std::string_view k, bool v) { return Key(k).Bool(v); }

 private:
  void Separate();
  std::string* out_;
  bool need_comma_ = false;
};

// Appends `s` as a quoted, escaped JSON string to *out.
void AppendJsonString(std::string* out, std::string_view s);

}  // namespace wizq

#endif  // WIZQ_UTIL_JSON_WRITER_H_
