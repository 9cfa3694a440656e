// ShellQuote: a word as POSIX sh reads it back unchanged, for the commands
// wizq prints for the user to copy (resume, answer, start an agent).
#ifndef WIZQ_UTIL_SHELL_QUOTE_H_
#define WIZQ_UTIL_SHELL_QUOTE_H_

#include <string>

namespace wizq {

// `s` itself when it has only characters sh never interprets, otherwise
// `s` in single quotes (an embedded ' becomes '\'').
std::string ShellQuote(const std::string& s);

}  // namespace wizq

#endif  // WIZQ_UTIL_SHELL_QUOTE_H_
