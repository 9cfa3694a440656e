// util/random.h: tokens are 128 bits of hex and do not repeat.
#include "util/random.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace wizq {
namespace {

TEST(RandomTest, TokensAre32HexDigitsAndDistinct) {
  std::set<std::string> seen;
  std::set<char> digits;
  for (int i = 0; i < 1000; i++) {
    const std::string t = RandomHex128();
    ASSERT_EQ(t.size(), 32u) << t;
    for (char c : t) {
      ASSERT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << t;
      digits.insert(c);
    }
    EXPECT_TRUE(seen.insert(t).second) << "repeated: " << t;
  }
  EXPECT_EQ(digits.size(), 16u);  // every digit turns up in 32,000
}

TEST(RandomTest, Random32VariesInEveryByte) {
  uint32_t any_or = 0, all_and = ~0u;
  std::set<uint32_t> seen;
  for (int i = 0; i < 1000; i++) {
    const uint32_t r = Random32();
    any_or |= r;
    all_and &= r;
    seen.insert(r);
  }
  EXPECT_EQ(any_or, ~0u);
  EXPECT_EQ(all_and, 0u);
  EXPECT_GT(seen.size(), 990u);
}

}  // namespace
}  // namespace wizq
