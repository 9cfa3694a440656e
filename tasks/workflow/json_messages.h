// Pieces of the messages wizq writes about the JSON it checks (workflow
// findings, value_schema violations, invalid responses): the JSON path of
// an offending value ($.steps[2].next[0], $.env["a b"]), strings quoted as
// JSON literals, and what was found where something else was expected
// ("got 5", "got an object"), and "did you mean" for a misspelt name.
//
// Every function is thread-safe and safe on any bytes: invalid UTF-8 is
// replaced, and Got cuts long values.
#ifndef WIZQ_TASKS_JSON_MESSAGES_H_
#define WIZQ_TASKS_JSON_MESSAGES_H_

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace wizq {

// `s` as a JSON string literal.
std::string Quote(std::string_view s);

// The path of member `key` of the value at path `base`: base.key when the
// key is an identifier, else base["key"].
std::string KeyPath(const std::string& base, const std::string& key);

// The path of element `index` of the array at path `base`: base[index].
std::string IndexPath(const std::string& base, size_t index);

// "got 5", "got \"x\"", "got an object" -- for type mismatch messages.
std::string Got(const nlohmann::json& v);

// " (did you mean \"x\"?)" for the candidate closest to `name` (case
// aside) if it is close enough to be a typo (at most a third of its length
// away), else "". For misspelt workflow fields, steps and response kinds.
std::string Suggest(std::string_view name,
                    const std::vector<std::string>& candidates);

}  // namespace wizq

#endif  // WIZQ_TASKS_JSON_MESSAGES_H_
