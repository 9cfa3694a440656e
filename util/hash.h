// Hashing for identifiers derived from content (run ids, dedup keys,
// idempotency keys). XXH3-128 from the Debian libxxhash package: fast, and
// 128 bits make an accidental collision within one run negligible. Not a
// cryptographic hash: nothing here defends against a chosen collision.
#ifndef WIZQ_UTIL_HASH_H_
#define WIZQ_UTIL_HASH_H_

#include <string>
#include <string_view>

namespace wizq {

// 32 lowercase hex digits.
std::string Hash128Hex(std::string_view data);

}  // namespace wizq

#endif  // WIZQ_UTIL_HASH_H_
