#include "util/random.h"

#include <errno.h>
#include <sys/random.h>

#include <cstdio>
#include <random>

namespace wizq {
namespace {

// Fills `buf` from getrandom(2); from std::random_device if the kernel
// cannot (a seccomp filter or a kernel older than 3.17 refusing it).
void Fill(unsigned char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = getrandom(buf + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0 || errno != EINTR) {
      break;
    }
  }
  if (got == n) return;
  std::random_device rd;
  for (size_t i = got; i < n; i++) buf[i] = static_cast<unsigned char>(rd());
}

}  // namespace

std::string RandomHex128() {
  unsigned char bytes[16];
  Fill(bytes, sizeof(bytes));
  static const char kHex[] = "0123456789abcdef";
  std::string out(32, '0');
  for (size_t i = 0; i < sizeof(bytes); i++) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 0xf];
  }
  return out;
}

uint32_t Random32() {
  unsigned char b[4];
  Fill(b, sizeof(b));
  return static_cast<uint32_t>(b[0]) << 24 | static_cast<uint32_t>(b[1]) << 16 |
         static_cast<uint32_t>(b[2]) << 8 | b[3];
}

}  // namespace wizq
