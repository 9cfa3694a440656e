#include "tasks/workflow.h"

#include <pthread.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <stdexcept>
#include <utility>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/constraint_builder.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "fs/env.h"
#include "tasks/jsonc.h"

// Without exceptions valijson calls abort() on a malformed schema.
#if !VALIJSON_USE_EXCEPTIONS
#error "build with VALIJSON_USE_EXCEPTIONS=1 (link the valijson CMake target)"
#endif

namespace wizq {

namespace {

using Json = nlohmann::json;

// ---------------------------------------------------------------------------
// Paths and message helpers

// `s` as a JSON string literal (safe for any bytes).
std::string Quote(std::string_view s) {
  return Json(std::string(s))
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

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

std::string KeyPath(const std::string& base, const std::string& key) {
  if (IsIdentifier(key)) return base + "." + key;
  return base + "[" + Quote(key) + "]";
}

std::string IndexPath(const std::string& base, size_t index) {
  return base + "[" + std::to_string(index) + "]";
}

// "got 5", "got \"x\"", "got an object" -- for type mismatch messages.
std::string Got(const Json& v) {
  if (v.is_object()) return "got an object";
  if (v.is_array()) return "got an array";
  return "got " +
         Excerpt(v.dump(-1, ' ', false, Json::error_handler_t::replace), 60);
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
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

// " (did you mean \"x\"?)" for a candidate close to `name` (case aside), or
// "".
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

// ---------------------------------------------------------------------------
// Regular expressions on a large stack
//
// libstdc++'s std::regex matcher recurses once or more per subject character
// and overflows an 8 MiB stack at ~20,000 characters. valijson uses it for
// `pattern`, so wizq replaces that keyword with its own constraint that runs
// long matches on a thread with a stack sized for the subject.

constexpr size_t kMaxRegexSubject = 1 << 16;  // bytes
constexpr size_t kInlineRegexSubject = 256;   // bytes matched on the caller's
constexpr size_t kRegexStackPerByte = 4096;   // generous: ~700 measured
constexpr size_t kRegexStackBase = 16 << 20;

void* RunFunction(void* arg) {
  (*static_cast<std::function<void()>*>(arg))();
  return nullptr;
}

// Runs `fn` (which must not throw) on a new thread with `stack_bytes` of
// stack and waits for it. False if the thread could not be started.
bool RunOnLargeStack(size_t stack_bytes, std::function<void()> fn) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  bool ok = pthread_attr_setstacksize(&attr, stack_bytes) == 0;
  pthread_t thread;
  ok = ok && pthread_create(&thread, &attr, &RunFunction, &fn) == 0;
  pthread_attr_destroy(&attr);
  if (ok) pthread_join(thread, nullptr);
  return ok;
}

// std::regex_search that cannot overflow the stack. False (with *error set)
// if the match could not be run.
bool SafeRegexSearch(const std::regex& re, const std::string& subject,
                     bool* matched, std::string* error) {
  if (subject.size() > kMaxRegexSubject) {
    *error = "string of " + std::to_string(subject.size()) +
             " bytes is too long to check against a 'pattern' (limit " +
             std::to_string(kMaxRegexSubject) + " bytes)";
    return false;
  }
  auto search = [&] {
    try {
      *matched = std::regex_search(subject, re);
    } catch (const std::exception& e) {
      *error = std::string("regular expression failed: ") + e.what();
    }
  };
  if (subject.size() <= kInlineRegexSubject) {
    search();
  } else if (!RunOnLargeStack(
                 kRegexStackBase + kRegexStackPerByte * subject.size(),
                 search)) {
    *error = "could not start a thread to check a 'pattern'";
  }
  return error->empty();
}

// ---------------------------------------------------------------------------
// RFC 3339 date/time checks for `format` (valijson's use std::regex too, and
// throw on non-strings)

bool Digits(std::string_view s, size_t pos, size_t n, int* value) {
  if (pos + n > s.size()) return false;
  *value = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    *value = *value * 10 + (s[i] - '0');
  }
  return true;
}

bool IsDate(std::string_view s) {
  int y, m, d;
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  if (!Digits(s, 0, 4, &y) || !Digits(s, 5, 2, &m) || !Digits(s, 8, 2, &d)) {
    return false;
  }
  static const int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m < 1 || m > 12 || d < 1 || d > kDays[m - 1]) return false;
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return !(m == 2 && d == 29 && !leap);
}

// HH:MM:SS[.frac](Z|+HH:MM|-HH:MM)
bool IsTime(std::string_view s) {
  int h, m, sec;
  if (s.size() < 9 || s[2] != ':' || s[5] != ':') return false;
  if (!Digits(s, 0, 2, &h) || !Digits(s, 3, 2, &m) || !Digits(s, 6, 2, &sec) ||
      h > 23 || m > 59 || sec > 60) {
    return false;
  }
  size_t i = 8;
  if (i < s.size() && s[i] == '.') {
    size_t start = ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == start) return false;
  }
  std::string_view zone = s.substr(i);
  if (zone == "Z" || zone == "z") return true;
  int zh, zm;
  return zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') &&
         zone[3] == ':' && Digits(zone, 1, 2, &zh) && Digits(zone, 4, 2, &zm) &&
         zh <= 23 && zm <= 59;
}

bool IsDateTime(std::string_view s) {
  return s.size() > 11 && (s[10] == 'T' || s[10] == 't') &&
         IsDate(s.substr(0, 10)) && IsTime(s.substr(11));
}

// ---------------------------------------------------------------------------
// wizq's own `pattern` and `format` constraints for valijson

// Schema keywords the originals are renamed to before valijson sees them.
constexpr char kPatternKey[] = "$wizq:pattern";
constexpr char kFormatKey[] = "$wizq:format";

using valijson::ValidationResults;
using valijson::adapters::Adapter;
using valijson::constraints::Constraint;
using valijson::constraints::PolyConstraint;

class PatternConstraint : public PolyConstraint {
 public:
  // Throws std::regex_error if `pattern` is not an ECMAScript regex.
  explicit PatternConstraint(const std::string& pattern)
      : pattern_(pattern),
        regex_(std::make_shared<const std::regex>(pattern)) {}

  bool validate(const Adapter& target, const std::vector<std::string>& context,
                ValidationResults* results) const override {
    if (!target.isString()) return true;
    bool matched = false;
    std::string error;
    if (SafeRegexSearch(*regex_, target.getString(), &matched, &error) &&
        matched) {
      return true;
    }
    if (results) {
      results->pushError(context, error.empty()
                                      ? "String does not match the pattern " +
                                            Quote(pattern_) + "."
                                      : error);
    }
    return false;
  }

 private:
  Constraint* cloneInto(void* p) const override {
    return new (p) PatternConstraint(*this);
  }
  size_t sizeOf() const override { return sizeof(PatternConstraint); }

  std::string pattern_;
  std::shared_ptr<const std::regex> regex_;  // immutable, shared by clones
};

// Checks "date", "time" and "date-time" (RFC 3339); other formats are
// annotations only, as JSON Schema allows.
class FormatConstraint : public PolyConstraint {
 public:
  explicit FormatConstraint(const std::string& format) : format_(format) {}

  bool validate(const Adapter& target, const std::vector<std::string>& context,
                ValidationResults* results) const override {
    if (!target.isString()) return true;
    std::string s = target.getString();
    bool ok = true;
    if (format_ == "date") ok = IsDate(s);
    if (format_ == "time") ok = IsTime(s);
    if (format_ == "date-time") ok = IsDateTime(s);
    if (!ok && results) {
      results->pushError(context,
                         "String is not a valid " + format_ + " (RFC 3339).");
    }
    return ok;
  }

 private:
  Constraint* cloneInto(void* p) const override {
    return new (p) FormatConstraint(*this);
  }
  size_t sizeOf() const override { return sizeof(FormatConstraint); }

  std::string format_;
};

template <typename C>
class StringConstraintBuilder : public valijson::ConstraintBuilder {
 public:
  Constraint* make(const Adapter& node) const override {
    return new C(node.getString());
  }
};

// ---------------------------------------------------------------------------
// value_schema compilation and validation

struct CompiledSchema {
  std::unique_ptr<valijson::Schema> schema;
  bool has_pattern_properties = false;
};

// Keywords whose values are data, not subschemas.
bool IsDataKeyword(const std::string& key) {
  return key == "enum" || key == "const" || key == "default" ||
         key == "examples";
}

// Renames string-valued `pattern`/`format` keywords to wizq's own, and
// checks the regexes of `patternProperties` (which valijson compiles only
// when it first validates). Walks every non-data object, so schemas reached
// through $ref from anywhere are covered.
Status PrepareSchema(Json* node, bool* has_pattern_properties) {
  if (node->is_array()) {
    for (Json& item : *node) {
      WIZQ_RETURN_IF_ERROR(PrepareSchema(&item, has_pattern_properties));
    }
    return Status::OK();
  }
  if (!node->is_object()) return Status::OK();
  for (auto& [key, value] : node->items()) {
    if (IsDataKeyword(key)) continue;
    WIZQ_RETURN_IF_ERROR(PrepareSchema(&value, has_pattern_properties));
  }
  auto pp = node->find("patternProperties");
  if (pp != node->end() && pp->is_object()) {
    *has_pattern_properties = true;
    for (auto& [regex, unused] : pp->items()) {
      try {
        std::regex compiled(regex);
      } catch (const std::regex_error& e) {
        return Status::InvalidArgument("patternProperties key " + Quote(regex) +
                                       " is not a valid regex: " + e.what());
      }
    }
  }
  for (auto [from, to] :
       {std::pair{"pattern", kPatternKey}, std::pair{"format", kFormatKey}}) {
    auto it = node->find(from);
    if (it == node->end() || !it->is_string()) continue;
    Json value = *it;
    node->erase(it);
    (*node)[to] = std::move(value);
  }
  return Status::OK();
}

// The $ref of a schema node as valijson reads it (a string member "$ref").
bool RefOf(const valijson::adapters::NlohmannJsonAdapter& node,
           std::string* ref) {
  if (!node.isObject()) return false;
  const auto obj = node.getObject();
  const auto it = obj.find("$ref");
  return it != obj.end() && it->second.getString(*ref);
}

// valijson resolves a schema that is a $ref by recursing into its target
// without noticing when a chain of such schemas comes back to itself
// ({"$ref": "#"}, or a -> b -> a): the stack overflows (its own "TODO:
// Need to detect degenerate circular references"). Follows every chain the
// way valijson does (local references only: it refuses remote ones) and
// reports a cycle. A $ref inside a real schema ({"items": {"$ref": "#"}})
// is fine: valijson caches those.
Status CheckRefCycles(const Json& root, const Json& node) {
  if (node.is_array()) {
    for (const Json& item : node) {
      WIZQ_RETURN_IF_ERROR(CheckRefCycles(root, item));
    }
    return Status::OK();
  }
  if (!node.is_object()) return Status::OK();
  for (auto& [key, value] : node.items()) {
    if (IsDataKeyword(key)) continue;
    WIZQ_RETURN_IF_ERROR(CheckRefCycles(root, value));
  }
  namespace ref = valijson::internal::json_reference;
  const valijson::adapters::NlohmannJsonAdapter root_adapter(root);
  // Not assignable: re-seated with emplace.
  std::optional<valijson::adapters::NlohmannJsonAdapter> cur(std::in_place,
                                                             node);
  std::set<std::string> seen;
  std::string r;
  while (RefOf(*cur, &r)) {
    const auto uri = ref::getJsonReferenceUri(r);
    if (uri && (valijson::internal::uri::isUriAbsolute(*uri) ||
                valijson::internal::uri::isUrn(*uri))) {
      return Status::OK();  // remote: valijson refuses it
    }
    std::string pointer = ref::getJsonReferencePointer(r).value_or("");
    pointer.erase(pointer.find_last_not_of('/') + 1);  // as valijson does
    if (!seen.insert(pointer).second) {
      return Status::InvalidArgument(
          "has a $ref cycle: " + Quote(r) +
          " leads back to itself through schemas that are only $refs");
    }
    try {
      cur.emplace(valijson::internal::json_pointer::resolveJsonPointer(
          root_adapter, pointer));
    } catch (const std::exception&) {
      return Status::OK();  // unresolvable: valijson reports it
    }
  }
  return Status::OK();
}

valijson::SchemaParser::Version DraftOf(const Json& schema) {
  if (schema.is_object() && schema.contains("$schema") &&
      schema["$schema"].is_string() &&
      schema["$schema"].get<std::string>().find("draft-04") !=
          std::string::npos) {
    return valijson::SchemaParser::kDraft4;
  }
  return valijson::SchemaParser::kDraft7;
}

// Compiles a value_schema. InvalidArgument says what is wrong with it.
Status CompileSchema(const Json& source, CompiledSchema* out) {
  if (!source.is_object() && !source.is_boolean()) {
    return Status::InvalidArgument(
        "must be a JSON Schema object (or true/false), " + Got(source));
  }
  Json prepared = source;
  WIZQ_RETURN_IF_ERROR(PrepareSchema(&prepared, &out->has_pattern_properties));
  WIZQ_RETURN_IF_ERROR(CheckRefCycles(prepared, prepared));
  valijson::SchemaParser parser(DraftOf(source));
  // The parser takes ownership of the builders.
  parser.addConstraintBuilder(kPatternKey,
                              new StringConstraintBuilder<PatternConstraint>);
  parser.addConstraintBuilder(kFormatKey,
                              new StringConstraintBuilder<FormatConstraint>);
  out->schema = std::make_unique<valijson::Schema>();
  try {
    valijson::adapters::NlohmannJsonAdapter adapter(prepared);
    parser.populateSchema(adapter, *out->schema);
  } catch (const std::regex_error& e) {
    return Status::InvalidArgument(
        std::string("has a 'pattern' that is not a valid regex: ") + e.what());
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("is not a valid JSON Schema: ") +
                                   e.what());
  }
  return Status::OK();
}

// The longest object key anywhere in `v` (patternProperties regexes run on
// keys with valijson's own, stack-hungry, matcher).
size_t LongestKey(const Json& v) {
  size_t longest = 0;
  if (v.is_object()) {
    for (auto& [key, child] : v.items()) {
      longest = std::max({longest, key.size(), LongestKey(child)});
    }
  } else if (v.is_array()) {
    for (const Json& child : v) longest = std::max(longest, LongestKey(child));
  }
  return longest;
}

// The JSON path (and the value, if found) that a valijson error context
// ("<root>", "[name]", "[0]", ...) points at inside `value`.
std::string ContextPath(const std::vector<std::string>& context,
                        const Json& value, const Json** node) {
  std::string path = "$";
  *node = &value;
  for (size_t i = 1; i < context.size(); ++i) {
    const std::string& c = context[i];
    std::string token = c.size() >= 2 ? c.substr(1, c.size() - 2) : c;
    const Json* cur = *node;
    *node = nullptr;
    if (cur && cur->is_array() && !token.empty() && token.size() <= 9 &&
        token.find_first_not_of("0123456789") == std::string::npos) {
      size_t index = std::stoul(token);
      path = IndexPath(path, index);
      if (index < cur->size()) *node = &(*cur)[index];
    } else {
      path = KeyPath(path, token);
      if (cur && cur->is_object() && cur->contains(token)) {
        *node = &(*cur)[token];
      }
    }
  }
  return path;
}

// valijson reports "Failed to validate item #2" etc. above the real error.
bool IsWrapperError(const std::string& description) {
  return description.rfind("Failed to validate item #", 0) == 0 ||
         description.rfind("Failed to validate against schema associated", 0) ==
             0 ||
         description.rfind("Failed to validate against additional properties",
                           0) == 0;
}

bool IsStrictPrefix(const std::vector<std::string>& a,
                    const std::vector<std::string>& b) {
  return a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// "at $.file: <description> (got 3); at $: ..." for the useful errors.
// Looks at the first kMaxExamined errors only (the wrapper test is
// quadratic, and a huge bad array has an error per element).
std::string DescribeErrors(const ValidationResults& results,
                           const Json& value) {
  constexpr size_t kMaxListed = 5;
  constexpr size_t kMaxExamined = 1000;
  auto end = results.begin() + std::min(results.numErrors(), kMaxExamined);
  std::vector<std::string> lines;
  for (auto it = results.begin(); it != end; ++it) {
    const auto& error = *it;
    bool hidden = IsWrapperError(error.description) &&
                  std::any_of(results.begin(), end, [&](auto& o) {
                    return IsStrictPrefix(error.context, o.context);
                  });
    if (hidden) continue;
    const Json* node = nullptr;
    std::string description = error.description;
    if (!description.empty() && description.back() == '.') {
      description.pop_back();
    }
    std::string line =
        "at " + ContextPath(error.context, value, &node) + ": " + description;
    if (node && !node->is_object() && !node->is_array()) {
      line += " (" + Got(*node) + ")";
    }
    lines.push_back(std::move(line));
  }
  std::string out;
  for (size_t i = 0; i < lines.size() && i < kMaxListed; ++i) {
    out += (i ? "; " : "") + lines[i];
  }
  if (results.numErrors() > kMaxExamined) {
    out += "; and more";
  } else if (lines.size() > kMaxListed) {
    out += "; and " + std::to_string(lines.size() - kMaxListed) + " more";
  }
  return out;
}

// Validates a parsed value. The message is the list of violations.
Status ValidateAgainst(const CompiledSchema& compiled, const Json& value) {
  if (compiled.has_pattern_properties && LongestKey(value) > kMaxRegexSubject) {
    return Status::InvalidArgument(
        "has an object key longer than " + std::to_string(kMaxRegexSubject) +
        " bytes, too long to check against 'patternProperties'");
  }
  valijson::Validator validator;  // per call: its regex cache is not shared
  ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter adapter(value);
  try {
    if (validator.validate(*compiled.schema, adapter, &results)) {
      return Status::OK();
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument(
        std::string("could not be checked against the schema: ") + e.what());
  }
  return Status::InvalidArgument(DescribeErrors(results, value));
}

// ---------------------------------------------------------------------------
// JSON parsing with duplicate-key detection

// A nlohmann parser callback that tracks where the parser is and reports
// keys that appear twice in one object (nlohmann would keep the last).
class DuplicateKeyFinder {
 public:
  explicit DuplicateKeyFinder(std::vector<Finding>* findings)
      : findings_(findings) {}

  bool OnEvent(Json::parse_event_t event, const Json& parsed) {
    using E = Json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        PushFrame(event == E::array_start);
        break;
      case E::key:
        OnKey(parsed.get<std::string>());
        break;
      case E::object_end:
      case E::array_end:
        stack_.pop_back();
        AfterValue();
        break;
      case E::value:
        AfterValue();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_array = false;
    std::string path;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };

  void PushFrame(bool is_array) {
    Frame frame;
    frame.is_array = is_array;
    frame.path = ChildPath();
    stack_.push_back(std::move(frame));
  }

  std::string ChildPath() const {
    if (stack_.empty()) return "$";
    const Frame& top = stack_.back();
    return top.is_array ? IndexPath(top.path, top.index)
                        : KeyPath(top.path, top.key);
  }

  void OnKey(const std::string& key) {
    Frame& top = stack_.back();
    top.key = key;
    if (!top.keys.insert(key).second) {
      findings_->push_back(
          {KeyPath(top.path, key),
           "duplicate key " + Quote(key) +
               " in one object; keep only one (JSON parsers would silently "
               "use the last)"});
    }
  }

  void AfterValue() {
    if (!stack_.empty() && stack_.back().is_array) ++stack_.back().index;
  }

  std::vector<Finding>* findings_;
  std::vector<Frame> stack_;
};

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, ..."
// without the id, made safe for any bytes it quotes from the input.
std::string ParseErrorMessage(const Json::exception& e) {
  std::string what = e.what();
  size_t bracket = what.find("] ");
  if (bracket != std::string::npos) what = what.substr(bracket + 2);
  return Excerpt(what, 500);
}

// Strips comments and parses `text`. Problems become findings at "$" (or at
// the duplicate key's path).
bool ParseJsonc(std::string_view text, Json* root,
                std::vector<Finding>* findings) {
  std::string json;
  Status s = StripJsonc(text, &json);
  if (s.ok()) s = CheckJsonDepth(json);
  if (!s.ok()) {
    findings->push_back({"$", s.message()});
    return false;
  }
  DuplicateKeyFinder dups(findings);
  try {
    *root = Json::parse(json,
                        [&dups](int, Json::parse_event_t event, Json& parsed) {
                          return dups.OnEvent(event, parsed);
                        });
  } catch (const Json::exception& e) {
    findings->push_back({"$", "not valid JSON: " + ParseErrorMessage(e)});
    return false;
  }
  return true;  // duplicate keys aside, the document is usable
}

// What Parse builds: the workflow and its compiled schemas.
struct WorkflowData {
  std::string entrypoint;
  std::vector<Step> steps;
  // Parallel to steps; null where the step has no value_schema.
  std::vector<std::unique_ptr<CompiledSchema>> schemas;
  std::map<std::string, size_t, std::less<>> index;
  StepOptions default_options;
  std::string frozen_json;
  std::string base_dir;
};

// Walks a workflow DOM, filling a Workflow::Impl and a list of findings.
class WorkflowChecker {
 public:
  WorkflowChecker(WorkflowData* wf, std::vector<Finding>* findings)
      : wf_(wf), findings_(findings) {}

  void Check(const Json& root) {
    if (!root.is_object()) {
      Add("$",
          "a workflow must be a JSON object with \"entrypoint\" and "
          "\"steps\", " +
              Got(root));
      return;
    }
    CheckFields(root, "$", {"$schema", "entrypoint", "options", "steps"},
                "the workflow");
    const Json* schema = Find(root, "$schema");
    if (schema && !schema->is_string()) {
      Add("$.$schema",
          "must be a string (a JSON Schema URL for editors), " + Got(*schema));
    }
    ParseOptions(Find(root, "options"), "$.options", StepOptions(),
                 &wf_->default_options);
    CheckSteps(root);
    CheckEntrypoint(root);
  }

 private:
  using Fields = std::vector<std::string>;

  void Add(std::string path, std::string message) {
    findings_->push_back({std::move(path), std::move(message)});
  }

  static const Json* Find(const Json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  void CheckFields(const Json& obj, const std::string& path,
                   const Fields& allowed, const std::string& what) {
    for (auto& [key, unused] : obj.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) {
        continue;
      }
      Add(KeyPath(path, key), "unknown field " + Quote(key) + " in " + what +
                                  Suggest(key, allowed) +
                                  "; allowed fields: " + Join(allowed));
    }
  }

  // A required non-empty string field. False (with a finding) if not.
  bool GetString(const Json& obj, const std::string& path, const char* key,
                 const std::string& hint, std::string* out) {
    const Json* v = Find(obj, key);
    if (!v) {
      Add(path, std::string("missing required field \"") + key + "\"" + hint);
      return false;
    }
    if (!v->is_string() || v->get_ref<const std::string&>().empty()) {
      Add(KeyPath(path, key), "must be a non-empty string, " + Got(*v));
      return false;
    }
    *out = v->get<std::string>();
    return true;
  }

  // --- options ---

  void ParseOptions(const Json* opts, const std::string& path,
                    const StepOptions& base, StepOptions* out) {
    *out = base;
    if (!opts) return;
    if (!opts->is_object()) {
      Add(path, "must be an object of options, " + Got(*opts));
      return;
    }
    CheckFields(*opts, path,
                {"max_retries", "timeout", "max_concurrency",
                 "retry_on_timeout", "retry_on_invalid_response"},
                "options");
    for (auto& [key, v] : opts->items()) {
      ParseOption(key, v, KeyPath(path, key), out);
    }
  }

  void ParseOption(const std::string& key, const Json& v,
                   const std::string& path, StepOptions* out) {
    if (key == "max_retries") {
      int64_t n;
      if (GetInt(v, 0, StepOptions::kMaxCount, &n)) {
        out->max_retries = static_cast<int>(n);
      } else {
        Add(path, "must be an integer from 0 to " +
                      std::to_string(StepOptions::kMaxCount) +
                      " (attempts = max_retries + 1), " + Got(v));
      }
    } else if (key == "timeout") {
      ParseTimeout(v, path, out);
    } else if (key == "max_concurrency") {
      ParseMaxConcurrency(v, path, out);
    } else if (key == "retry_on_timeout" ||
               key == "retry_on_invalid_response") {
      if (!v.is_boolean()) {
        Add(path, "must be true or false, " + Got(v));
      } else {
        (key == "retry_on_timeout" ? out->retry_on_timeout
                                   : out->retry_on_invalid_response) =
            v.get<bool>();
      }
    }
  }

  static bool GetInt(const Json& v, int64_t lo, int64_t hi, int64_t* out) {
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) return false;
      *out = static_cast<int64_t>(u);
    } else if (v.is_number_integer()) {
      *out = v.get<int64_t>();
    } else {
      return false;
    }
    return *out >= lo && *out <= hi;
  }

  void ParseTimeout(const Json& v, const std::string& path, StepOptions* out) {
    if (v.is_null()) {
      out->timeout_seconds.reset();
    } else if (v.is_number() && v.get<double>() > 0 &&
               v.get<double>() <= StepOptions::kMaxTimeoutSeconds) {
      out->timeout_seconds = v.get<double>();
    } else {
      Add(path,
          "must be a number of seconds greater than 0 (at most 1e9), "
          "or null for no timeout, " +
              Got(v));
    }
  }

  void ParseMaxConcurrency(const Json& v, const std::string& path,
                           StepOptions* out) {
    int64_t n;
    if (v.is_null()) {
      out->max_concurrency = StepOptions::kUnlimited;
    } else if (GetInt(v, 1, StepOptions::kMaxCount, &n)) {
      out->max_concurrency = static_cast<int>(n);
    } else {
      Add(path, "must be an integer from 1 to 1000000, or null for no limit, " +
                    Got(v));
    }
  }

  // --- actions ---

  // `finally` hooks may only be Commands.
  bool ParseAction(const Json& v, const std::string& path, bool is_hook,
                   Action* out) {
    const char* what = is_hook ? "a finally hook" : "an action";
    if (!v.is_object()) {
      Add(path, std::string("must be ") + what +
                    " object like {\"kind\": \"Command\", \"script\": "
                    "\"./run.sh\"}, " +
                    Got(v));
      return false;
    }
    std::string kind;
    if (!GetString(v, path, "kind", " (\"Command\" or \"Pool\")", &kind)) {
      return false;
    }
    if (kind == "Command") return ParseCommand(v, path, what, out);
    if (kind == "Pool" && !is_hook) return ParsePool(v, path, out);
    std::string hint = is_hook ? "a finally hook must be {\"kind\": "
                                 "\"Command\", \"script\": ...}"
                               : "use \"Command\" (with \"script\") or "
                                 "\"Pool\" (with \"instructions\")";
    std::vector<std::string> kinds = {"Command"};
    if (!is_hook) kinds.push_back("Pool");
    Add(KeyPath(path, "kind"),
        "unknown " + std::string(is_hook ? "hook" : "action") + " kind " +
            Quote(kind) + Suggest(kind, kinds) + "; " + hint);
    return false;
  }

  bool ParseCommand(const Json& v, const std::string& path, const char* what,
                    Action* out) {
    CheckFields(v, path, {"kind", "script"},
                std::string(what) + " of kind Command");
    out->kind = Action::Kind::kCommand;
    if (!GetString(v, path, "script", " (the shell command to run)",
                   &out->script)) {
      return false;
    }
    // Linux caps one argument of exec at 128 KiB (MAX_ARG_STRLEN).
    constexpr size_t kMaxScript = 128 * 1024 - 1;
    if (out->script.size() > kMaxScript) {
      Add(KeyPath(path, "script"),
          "is " + std::to_string(out->script.size()) +
              " bytes; a script passed to sh -c can be at most " +
              std::to_string(kMaxScript) +
              " bytes: put the commands in a file and run that file");
      return false;
    }
    return true;
  }

  bool ParsePool(const Json& v, const std::string& path, Action* out) {
    CheckFields(v, path, {"kind", "instructions"}, "an action of kind Pool");
    out->kind = Action::Kind::kPool;
    return GetString(v, path, "instructions", " (markdown for the agent)",
                     &out->instructions);
  }

  // --- steps ---

  void CheckSteps(const Json& root) {
    const Json* steps = Find(root, "steps");
    if (!steps) {
      Add("$",
          "missing required field \"steps\" (a non-empty array of "
          "steps)");
      return;
    }
    if (!steps->is_array() || steps->empty()) {
      Add("$.steps", "must be a non-empty array of steps, " + Got(*steps));
      return;
    }
    for (size_t i = 0; i < steps->size(); ++i) {
      ParseStep((*steps)[i], IndexPath("$.steps", i));
    }
    for (size_t i = 0; i < wf_->steps.size(); ++i) CheckNext(i);
  }

  void ParseStep(const Json& v, const std::string& path) {
    if (!v.is_object()) {
      Add(path,
          "a step must be an object with \"name\" and \"action\", " + Got(v));
      return;
    }
    CheckFields(
        v, path,
        {"name", "action", "next", "value_schema", "options", "finally"},
        "a step");
    Step step;
    GetString(v, path, "name", "", &step.name);
    if (const Json* action = Find(v, "action")) {
      ParseAction(*action, KeyPath(path, "action"), false, &step.action);
    } else {
      Add(path, "missing required field \"action\"");
    }
    const Json* hook = Find(v, "finally");
    if (hook && !hook->is_null()) {  // null = none, as in Barnum
      step.finally_hook.emplace();
      ParseAction(*hook, KeyPath(path, "finally"), true, &*step.finally_hook);
    }
    ParseOptions(Find(v, "options"), KeyPath(path, "options"),
                 wf_->default_options, &step.options);
    ParseNextList(Find(v, "next"), KeyPath(path, "next"), &step.next);
    auto schema =
        ParseSchema(Find(v, "value_schema"), KeyPath(path, "value_schema"),
                    &step.value_schema_json);
    AddStep(path, std::move(step), std::move(schema));
  }

  void ParseNextList(const Json* next, const std::string& path,
                     std::vector<std::string>* out) {
    if (!next) return;  // Barnum's default: [] (terminal)
    if (!next->is_array()) {
      Add(path, "must be an array of step names ([] for a terminal step), " +
                    Got(*next));
      return;
    }
    for (size_t j = 0; j < next->size(); ++j) {
      const Json& n = (*next)[j];
      if (n.is_string()) {
        out->push_back(n.get<std::string>());
        next_paths_.push_back(IndexPath(path, j));
      } else {
        Add(IndexPath(path, j), "must be a step name (string), " + Got(n));
      }
    }
  }

  std::unique_ptr<CompiledSchema> ParseSchema(const Json* v,
                                              const std::string& path,
                                              std::string* json) {
    if (!v || v->is_null()) return nullptr;  // null = none, as in Barnum
    auto compiled = std::make_unique<CompiledSchema>();
    Status s = CompileSchema(*v, compiled.get());
    if (!s.ok()) {
      Add(path, s.message());
      return nullptr;
    }
    *json = v->dump();
    return compiled;
  }

  void AddStep(const std::string& path, Step step,
               std::unique_ptr<CompiledSchema> schema) {
    if (!step.name.empty()) {
      auto [it, inserted] = wf_->index.emplace(step.name, wf_->steps.size());
      if (!inserted) {
        Add(KeyPath(path, "name"), "duplicate step name " + Quote(step.name) +
                                       " (also at " +
                                       IndexPath("$.steps", it->second) +
                                       "); step names must be unique");
      }
    }
    step_next_paths_.push_back(std::move(next_paths_));
    next_paths_.clear();
    wf_->steps.push_back(std::move(step));
    wf_->schemas.push_back(std::move(schema));
  }

  std::vector<std::string> StepNames() const {
    std::vector<std::string> names;
    for (size_t i = 0; i < wf_->steps.size(); ++i) {
      const std::string& name = wf_->steps[i].name;
      auto it = wf_->index.find(name);
      if (it != wf_->index.end() && it->second == i) names.push_back(name);
    }
    return names;
  }

  std::string Undefined(const std::string& name) const {
    std::vector<std::string> names = StepNames();
    return "step " + Quote(name) + " is not defined" + Suggest(name, names) +
           "; defined steps are: " + Join(names);
  }

  void CheckNext(size_t i) {
    const Step& step = wf_->steps[i];
    for (size_t j = 0; j < step.next.size(); ++j) {
      if (wf_->index.count(step.next[j]) == 0) {
        Add(step_next_paths_[i][j], Undefined(step.next[j]));
      }
    }
  }

  void CheckEntrypoint(const Json& root) {
    const Json* entry = Find(root, "entrypoint");
    if (!entry) {
      Add("$",
          "missing required field \"entrypoint\": name the step that "
          "receives --input (one of: " +
              Join(StepNames()) + ")");
      return;
    }
    if (!entry->is_string()) {
      Add("$.entrypoint", "must be a step name (string), " + Got(*entry));
      return;
    }
    wf_->entrypoint = entry->get<std::string>();
    // With no usable steps, the "steps" finding already says it all.
    if (!wf_->steps.empty() && wf_->index.count(wf_->entrypoint) == 0) {
      Add("$.entrypoint", Undefined(wf_->entrypoint));
    }
  }

  WorkflowData* wf_;
  std::vector<Finding>* findings_;
  std::vector<std::string> next_paths_;  // of the step being parsed
  std::vector<std::vector<std::string>> step_next_paths_;
};

std::string FormatFindings(const std::string& source,
                           const std::vector<Finding>& findings) {
  std::string msg = source + ": " + std::to_string(findings.size()) +
                    (findings.size() == 1 ? " problem:" : " problems:");
  for (const Finding& f : findings) msg += "\n  " + f.path + ": " + f.message;
  return msg;
}

}  // namespace

struct Workflow::Impl : WorkflowData {};

Workflow::Workflow(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Workflow::~Workflow() = default;

Status Workflow::Parse(std::string_view text, const std::string& source,
                       std::unique_ptr<Workflow>* out,
                       std::vector<Finding>* findings) {
  std::vector<Finding> found;
  auto impl = std::make_unique<Impl>();
  Json root;
  if (ParseJsonc(text, &root, &found)) {
    WorkflowChecker(impl.get(), &found).Check(root);
  }
  if (findings) *findings = found;
  if (!found.empty()) {
    return Status::InvalidArgument(FormatFindings(source, found));
  }
  impl->frozen_json = root.dump();
  out->reset(new Workflow(std::move(impl)));
  return Status::OK();
}

Status Workflow::Load(const std::string& path, std::unique_ptr<Workflow>* out,
                      std::vector<Finding>* findings) {
  if (findings) findings->clear();
  std::string text;
  WIZQ_RETURN_IF_ERROR(Env::Posix()->ReadFile(path, &text));
  std::string dir = DirName(path);
  char* real = realpath(dir.c_str(), nullptr);
  if (!real) return Status::IOErrorFromErrno("realpath", dir, errno);
  std::string base_dir(real);
  free(real);
  std::unique_ptr<Workflow> wf;
  WIZQ_RETURN_IF_ERROR(Parse(text, path, &wf, findings));
  wf->set_base_dir(std::move(base_dir));
  *out = std::move(wf);
  return Status::OK();
}

const std::string& Workflow::entrypoint() const { return impl_->entrypoint; }
const std::vector<Step>& Workflow::steps() const { return impl_->steps; }

const Step* Workflow::FindStep(std::string_view name) const {
  auto it = impl_->index.find(name);
  return it == impl_->index.end() ? nullptr : &impl_->steps[it->second];
}

const StepOptions& Workflow::default_options() const {
  return impl_->default_options;
}
const std::string& Workflow::frozen_json() const { return impl_->frozen_json; }
const std::string& Workflow::base_dir() const { return impl_->base_dir; }
void Workflow::set_base_dir(std::string dir) {
  impl_->base_dir = std::move(dir);
}

Status Workflow::ValidateValue(std::string_view step,
                               std::string_view value_json) const {
  auto it = impl_->index.find(step);
  if (it == impl_->index.end()) {
    return Status::InvalidArgument("unknown step " + Quote(step));
  }
  const CompiledSchema* schema = impl_->schemas[it->second].get();
  WIZQ_RETURN_IF_ERROR(CheckJsonDepth(value_json));
  Json value;
  try {
    value = Json::parse(value_json);
  } catch (const Json::exception& e) {
    return Status::InvalidArgument("value is not valid JSON: " +
                                   ParseErrorMessage(e));
  }
  if (!schema) return Status::OK();
  Status s = ValidateAgainst(*schema, value);
  if (s.ok()) return s;
  return Status::InvalidArgument("does not match the value_schema of step " +
                                 Quote(step) + ": " + s.message());
}

}  // namespace wizq
