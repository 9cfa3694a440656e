// UTF-8 validation shared by the JSON writer, the state-file decoders and
// the workflow/response parsers.
#ifndef WIZQ_UTIL_UTF8_H_
#define WIZQ_UTIL_UTF8_H_

#include <cstddef>
#include <string_view>

namespace wizq {

// Length of the valid UTF-8 sequence starting at text[i], or 0 if the bytes
// there are not one (overlongs, surrogates and code points above U+10FFFF
// are invalid).
size_t Utf8SequenceLength(std::string_view text, size_t i);

// The offset of the first byte of `text` that is not part of valid UTF-8,
// or std::string_view::npos.
size_t FirstInvalidUtf8(std::string_view text);

}  // namespace wizq

#endif  // WIZQ_UTIL_UTF8_H_
