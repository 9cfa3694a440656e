#include "tasks/json_messages.h"

#include <nlohmann/json.hpp>

#include "tasks/jsonc.h"

namespace wizq {

namespace {

using Json = nlohmann::json;

bool IsIdentifier(const std::string& key) {
  if (key.empty()) return false;
  for (size_t i = 0; i < key.size(); ++i) {
    char c = key[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 c == '$';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

}  // namespace

std::string Quote(std::string_view s) {
  return Json(std::string(s))
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string KeyPath(const std::string& base, const std::string& key) {
  if (IsIdentifier(key)) return base + "." + key;
  return base + "[" + Quote(key) + "]";
}

std::string IndexPath(const std::string& base, size_t index) {
  return base + "[" + std::to_string(index) + "]";
}

std::string Got(const Json& v) {
  if (v.is_object()) return "got an object";
  if (v.is_array()) return "got an array";
  return "got " +
         Excerpt(v.dump(-1, ' ', false, Json::error_handler_t::replace), 60);
}

}  // namespace wizq
