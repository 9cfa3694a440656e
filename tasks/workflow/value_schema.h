// ValueSchema: the `value_schema` of a workflow step, compiled once when the
// workflow is parsed and checked against every value a task of that step
// gets (its entry input, or the value a response gives it).
//
// A schema is JSON Schema draft 7, or draft 4 when its "$schema" names
// draft-04, checked by valijson. Two keywords are wizq's own rather than
// valijson's: `pattern`, an ECMAScript std::regex whose matcher recurses
// once or more per subject byte, so a long subject is matched on a thread
// with a stack sized for it (and one over 64 KiB fails the keyword with a
// message saying so); and `format`, which checks date, time and date-time
// (RFC 3339) and ignores other formats. Compiling also rejects what would
// crash valijson later: a chain of $refs that leads back to itself, and a
// `patternProperties` key that is not a valid regex.
//
// Messages are meant for the user who wrote the schema or the value:
// Compile's say what is wrong with the schema (they become findings at the
// step's value_schema); Validate's list the violations, each at its JSON
// path inside the value, e.g. `at $.file: Value type not permitted by
// 'type' constraint (got 3)`.
//
// Thread-safety: a ValueSchema is immutable; Validate may be called from
// several threads at once.
#ifndef WIZQ_TASKS_VALUE_SCHEMA_H_
#define WIZQ_TASKS_VALUE_SCHEMA_H_

#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "util/status.h"

namespace valijson {
class Schema;
}  // namespace valijson

namespace wizq {

struct Step;

class ValueSchema {
 public:
  ~ValueSchema();
  ValueSchema(const ValueSchema&) = delete;
  ValueSchema& operator=(const ValueSchema&) = delete;

  // Compiles `schema` (a JSON Schema object, or true or false). On failure
  // returns InvalidArgument saying what is wrong with it, and leaves *out
  // untouched.
  static Status Compile(const nlohmann::json& schema,
                        std::unique_ptr<ValueSchema>* out);

  // OK if `value` matches the schema. Otherwise InvalidArgument whose
  // message lists the violations ("at $.file: ... (got 3); at $: ...", at
  // most five, then "and N more").
  Status Validate(const nlohmann::json& value) const;

 private:
  ValueSchema();

  std::unique_ptr<valijson::Schema> schema_;
  // patternProperties regexes run on object keys with valijson's own
  // matcher, so Validate bounds the length of keys.
  bool has_pattern_properties_ = false;
};

// Checks `value` against the value_schema of `step`: OK if the step has
// none, else as ValueSchema::Validate with the message prefixed by `does not
// match the value_schema of step "<name>": `.
Status ValidateStepValue(const Step& step, const nlohmann::json& value);

}  // namespace wizq

#endif  // WIZQ_TASKS_VALUE_SCHEMA_H_
