// JSON text utilities used before and after nlohmann/json parses a document:
// JSONC comment stripping, a nesting-depth guard, and safe excerpts of
// untrusted text for error messages.
//
// JSONC is JSON plus `//` line comments, `/* */` block comments and trailing
// commas before `]` or `}` (what editors accept in .jsonc files). StripJsonc
// turns it into plain JSON of the same length: every removed byte becomes a
// space, except newlines, which are kept. Byte offsets, line and column
// numbers in the result are therefore those of the original text, so a later
// parse error points at the right place in the user's file.
//
// All functions are pure and thread-safe.
#ifndef WIZQ_TASKS_JSONC_H_
#define WIZQ_TASKS_JSONC_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "util/status.h"
#include "util/utf8.h"  // FirstInvalidUtf8, used with these helpers

namespace wizq {

// The deepest nesting of arrays and objects wizq accepts in any JSON it
// parses (workflows, responses, inputs). nlohmann/json parses iteratively,
// but dumping, schema validation and our own walks recurse.
inline constexpr int kMaxJsonDepth = 256;

// Writes `text` with comments and trailing commas blanked out to *out (same
// length as `text`). Text inside strings is never touched. An unterminated
// block comment is InvalidArgument naming its line and column; anything else
// that is not valid JSON is left for the JSON parser to report.
Status StripJsonc(std::string_view text, std::string* out);

// InvalidArgument if arrays/objects in `json` nest deeper than `max_depth`
// (brackets inside strings do not count). Runs in O(n) with O(1) memory and
// no recursion, so it is safe on any input; call it before parsing.
Status CheckJsonDepth(std::string_view json, int max_depth = kMaxJsonDepth);

// "line L, column C" (both 1-based; columns count bytes) of byte `offset`.
std::string LineColumn(std::string_view text, size_t offset);

// At most `max_bytes` of `text` made safe to embed in a message: printable
// ASCII and valid UTF-8 are kept, other bytes become \xNN, control
// characters \n, \t, \r, \xNN; "..." marks a cut. Trailing white space
// is left out.
std::string Excerpt(std::string_view text, size_t max_bytes = 80);

}  // namespace wizq

#endif  // WIZQ_TASKS_JSONC_H_
