// "Did you mean ...?": the closest of a list of names to a word that is
// none of them (a mistyped command, flag or step name).
#ifndef WIZQ_UTIL_CLOSEST_MATCH_H_
#define WIZQ_UTIL_CLOSEST_MATCH_H_

#include <cstddef>
#include <string>
#include <vector>

namespace wizq {

// The edit distance between a and b: insertions, deletions, substitutions
// and swaps of two neighbouring bytes count one each.
size_t EditDistance(const std::string& a, const std::string& b);

// The candidate closest to `word`, if it is close enough to be a typo (at
// most a third of the word's length away, and at least 1), else "".
std::string ClosestMatch(const std::string& word,
                         const std::vector<std::string>& candidates);

}  // namespace wizq

#endif  // WIZQ_UTIL_CLOSEST_MATCH_H_
