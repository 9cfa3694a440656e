// Canonical JSON (RFC 8785 style), used for <type, inputs> dedup keys.
//
// Two JSON texts that mean the same value produce the same canonical text:
// object keys sorted by their UTF-16 code units, no insignificant
// whitespace, strings with the minimal escaping, numbers in the shortest
// ECMAScript form (1.0, 1e0 and 1 are all "1"; 0.10 is "0.1").
//
// One deliberate difference from RFC 8785: integers that fit in 64 bits are
// written exactly rather than rounded through a double, so 2^63-1 and
// 2^63-2 stay distinct keys.
#ifndef WIZQ_UTIL_CANONICAL_JSON_H_
#define WIZQ_UTIL_CANONICAL_JSON_H_

#include <string>
#include <string_view>

#include "util/status.h"

namespace wizq {

// Parses `json` and writes its canonical form to *out. InvalidArgument if
// `json` is not valid JSON (the message gives simdjson's reason) or if an
// object in it has the same key twice (whose meaning JSON leaves open).
Status CanonicalizeJson(std::string_view json, std::string* out);

// InvalidArgument naming the key if an object in `json` repeats a key; OK
// otherwise, including for text that is not JSON (left to the caller's
// parser, which can say where it breaks).
Status CheckKeysUnique(std::string_view json);

// True if CanonicalizeJson would accept `json`: valid JSON in which no
// object repeats a key. Much cheaper than CanonicalizeJson: one reused
// parser per thread and no output, for checking many small texts (a
// snapshot's task inputs).
bool IsValidJson(std::string_view json);

// ECMAScript Number::toString of a finite double ("-0" prints as "0").
std::string FormatDoubleEs6(double v);

}  // namespace wizq

#endif  // WIZQ_UTIL_CANONICAL_JSON_H_
