#include "tasks/workflow/json_messages.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "tasks/workflow/jsonc.h"

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

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      size_t cost = (a[i - 1] == b[j - 1]) ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

std::string Suggest(std::string_view name,
                    const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t limit = std::max<size_t>(1, name.size() / 3);
  size_t best_distance = limit + 1;
  for (const std::string& c : candidates) {
    size_t d = EditDistance(Lower(name), Lower(c));
    if (d < best_distance && d < name.size() && c != name) {
      best_distance = d;
      best = &c;
    }
  }
  return best ? " (did you mean " + Quote(*best) + "?)" : "";
}

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
