// Random identifiers: claim and lease tokens, worker ids. From the
// kernel's CSPRNG (getrandom(2)), one system call each: a token is made
// for every claim, so it is on a worker's hot path (docs/BENCHMARKS.md,
// "PostgreSQL store").
#ifndef WIZQ_UTIL_RANDOM_H_
#define WIZQ_UTIL_RANDOM_H_

#include <cstdint>
#include <string>

namespace wizq {

// 128 random bits as 32 lowercase hex digits.
std::string RandomHex128();

// 32 random bits.
uint32_t Random32();

}  // namespace wizq

#endif  // WIZQ_UTIL_RANDOM_H_
