#include "tasks/workflow/value_schema.h"

#include <pthread.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/constraint_builder.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>
#include <vector>

#include "tasks/workflow/json_messages.h"
#include "tasks/workflow/workflow.h"

// Without exceptions valijson calls abort() on a malformed schema.
#if !VALIJSON_USE_EXCEPTIONS
#error "build with VALIJSON_USE_EXCEPTIONS=1 (link the valijson CMake target)"
#endif

namespace wizq {

namespace {

using Json = nlohmann::json;

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

// Compiling a schema: a $ref link takes at least ~60 bytes of schema text
// and ~1.3 KB of stack (measured in Release), so 64 bytes of stack per byte
// of schema leaves room. AddressSanitizer's frames are several times larger.
constexpr size_t kMaxSchemaBytes = 16 << 20;
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kSchemaStackPerByte = 512;
#else
constexpr size_t kSchemaStackPerByte = 64;
#endif
constexpr size_t kSchemaStackBase = 8 << 20;

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
// is fine: valijson caches those. `ends` holds the pointers already known
// to lead to a real schema, so each chain is followed once.
Status CheckRefCycles(const Json& root, const Json& node,
                      std::set<std::string>* ends) {
  if (node.is_array()) {
    for (const Json& item : node) {
      WIZQ_RETURN_IF_ERROR(CheckRefCycles(root, item, ends));
    }
    return Status::OK();
  }
  if (!node.is_object()) return Status::OK();
  for (auto& [key, value] : node.items()) {
    if (IsDataKeyword(key)) continue;
    WIZQ_RETURN_IF_ERROR(CheckRefCycles(root, value, ends));
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
      break;  // remote: valijson refuses it
    }
    std::string pointer = ref::getJsonReferencePointer(r).value_or("");
    pointer.erase(pointer.find_last_not_of('/') + 1);  // as valijson does
    if (ends->count(pointer)) break;
    if (!seen.insert(pointer).second) {
      return Status::InvalidArgument(
          "has a $ref cycle: " + Quote(r) +
          " leads back to itself through schemas that are only $refs");
    }
    try {
      cur.emplace(valijson::internal::json_pointer::resolveJsonPointer(
          root_adapter, pointer));
    } catch (const std::exception&) {
      break;  // unresolvable: valijson reports it
    }
  }
  ends->insert(seen.begin(), seen.end());
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

}  // namespace

ValueSchema::ValueSchema() = default;
ValueSchema::~ValueSchema() = default;

Status ValueSchema::Compile(const Json& source,
                            std::unique_ptr<ValueSchema>* out) {
  if (!source.is_object() && !source.is_boolean()) {
    return Status::InvalidArgument(
        "must be a JSON Schema object (or true/false), " + Got(source));
  }
  std::unique_ptr<ValueSchema> compiled(new ValueSchema);
  Json prepared = source;
  WIZQ_RETURN_IF_ERROR(
      PrepareSchema(&prepared, &compiled->has_pattern_properties_));
  std::set<std::string> ref_ends;
  WIZQ_RETURN_IF_ERROR(CheckRefCycles(prepared, prepared, &ref_ends));
  valijson::SchemaParser parser(DraftOf(source));
  // The parser takes ownership of the builders.
  parser.addConstraintBuilder(kPatternKey,
                              new StringConstraintBuilder<PatternConstraint>);
  parser.addConstraintBuilder(kFormatKey,
                              new StringConstraintBuilder<FormatConstraint>);
  compiled->schema_ = std::make_unique<valijson::Schema>();
  // valijson's parser recurses once per $ref it follows through a real
  // schema (~1.3 KB of stack per link in Release): a chain of 6,000 links
  // overflowed the 8 MiB main stack. Parse on a thread whose stack grows
  // with the schema's size, and refuse schemas too large for that.
  const size_t bytes = prepared.dump().size();
  if (bytes > kMaxSchemaBytes) {
    return Status::InvalidArgument("is " + std::to_string(bytes) +
                                   " bytes of JSON Schema; the limit is " +
                                   std::to_string(kMaxSchemaBytes) + " bytes");
  }
  Status parsed;
  auto populate = [&] {
    try {
      valijson::adapters::NlohmannJsonAdapter adapter(prepared);
      parser.populateSchema(adapter, *compiled->schema_);
    } catch (const std::regex_error& e) {
      parsed = Status::InvalidArgument(
          std::string("has a 'pattern' that is not a valid regex: ") +
          e.what());
    } catch (const std::exception& e) {
      parsed = Status::InvalidArgument(
          std::string("is not a valid JSON Schema: ") + e.what());
    }
  };
  if (!RunOnLargeStack(kSchemaStackBase + kSchemaStackPerByte * bytes,
                       populate)) {
    return Status::IOError(
        "could not start a thread to compile the value_schema");
  }
  WIZQ_RETURN_IF_ERROR(parsed);
  *out = std::move(compiled);
  return Status::OK();
}

Status ValueSchema::Validate(const Json& value) const {
  if (has_pattern_properties_ && LongestKey(value) > kMaxRegexSubject) {
    return Status::InvalidArgument(
        "has an object key longer than " + std::to_string(kMaxRegexSubject) +
        " bytes, too long to check against 'patternProperties'");
  }
  valijson::Validator validator;  // per call: its regex cache is not shared
  ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter adapter(value);
  try {
    if (validator.validate(*schema_, adapter, &results)) {
      return Status::OK();
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument(
        std::string("could not be checked against the schema: ") + e.what());
  }
  return Status::InvalidArgument(DescribeErrors(results, value));
}

Status ValidateStepValue(const Step& step, const Json& value) {
  if (!step.value_schema) return Status::OK();
  Status s = step.value_schema->Validate(value);
  if (s.ok()) return s;
  return Status::InvalidArgument("does not match the value_schema of step " +
                                 Quote(step.name) + ": " + s.message());
}

}  // namespace wizq
