// Tests of util/canonical_json.h: the RFC 8785 canonical form that the
// <type, inputs> dedup keys are computed from.
#include "util/canonical_json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace wizq {
namespace {

double FromBits(uint64_t bits) {
  double d;
  static_assert(sizeof(d) == sizeof(bits));
  std::memcpy(&d, &bits, sizeof(d));
  return d;
}

std::string Canonical(const std::string& json) {
  std::string out;
  Status s = CanonicalizeJson(json, &out);
  EXPECT_TRUE(s.ok()) << json << ": " << s.ToString();
  return out;
}

// RFC 8785 Appendix B: IEEE 754 bit patterns and their ECMAScript form.
TEST(CanonicalJsonTest, Rfc8785NumberExamples) {
  const struct {
    uint64_t bits;
    const char* expected;
  } kCases[] = {
      {0x0000000000000000, "0"},
      {0x8000000000000000, "0"},  // -0
      {0x0000000000000001, "5e-324"},
      {0x8000000000000001, "-5e-324"},
      {0x7fefffffffffffff, "1.7976931348623157e+308"},
      {0xffefffffffffffff, "-1.7976931348623157e+308"},
      {0x4340000000000000, "9007199254740992"},
      {0xc340000000000000, "-9007199254740992"},
      {0x4430000000000000, "295147905179352830000"},
      {0x44b52d02c7e14af5, "9.999999999999997e+22"},
      {0x44b52d02c7e14af6, "1e+23"},
      {0x44b52d02c7e14af7, "1.0000000000000001e+23"},
      {0x444b1ae4d6e2ef4e, "999999999999999700000"},
      {0x444b1ae4d6e2ef4f, "999999999999999900000"},
      {0x444b1ae4d6e2ef50, "1e+21"},
      {0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
      {0x3eb0c6f7a0b5ed8d, "0.000001"},
      {0x41b3de4355555553, "333333333.3333332"},
      {0x41b3de4355555554, "333333333.33333325"},
      {0x41b3de4355555555, "333333333.3333333"},
      {0x41b3de4355555556, "333333333.3333334"},
      {0x41b3de4355555557, "333333333.33333343"},
      {0xbecbf647612f3696, "-0.0000033333333333333333"},
      {0x43143ff3c1cb0959, "1424953923781206.2"},
  };
  for (const auto& c : kCases) {
    EXPECT_EQ(FormatDoubleEs6(FromBits(c.bits)), c.expected)
        << std::hex << c.bits;
  }
}

TEST(CanonicalJsonTest, NumberTextsThroughTheParser) {
  const struct {
    const char* in;
    const char* out;
  } kCases[] = {
      {"1e21", "1e+21"},
      {"1E21", "1e+21"},
      {"1e20", "100000000000000000000"},
      {"1e-7", "1e-7"},
      {"0.000001", "0.000001"},
      {"0.0000001", "1e-7"},
      {"123456789012345678901", "123456789012345680000"},
      {"123456789012345680000", "123456789012345680000"},
      {"-0", "0"},
      {"-0.0", "0"},
      {"0e10", "0"},
      {"1.0", "1"},
      {"1e0", "1"},
      {"10E-1", "1"},
      {"0.10", "0.1"},
      {"4.50", "4.5"},
      {"2e-3", "0.002"},
      {"1E30", "1e+30"},
      {"-1.5e-9", "-1.5e-9"},
      {"333333333.33333329", "333333333.3333333"},
      {"0.000000000000000000000000001", "1e-27"},
      // 64-bit integers are kept exact (a documented departure from 8785).
      {"9223372036854775807", "9223372036854775807"},
      {"9223372036854775806", "9223372036854775806"},
      {"-9223372036854775808", "-9223372036854775808"},
      {"18446744073709551615", "18446744073709551615"},
      // Integers beyond 64 bits are valid JSON: read as doubles (8785).
      {"18446744073709551616", "18446744073709552000"},
      {"-9223372036854775809", "-9223372036854776000"},
      {"-123456789012345678901", "-123456789012345680000"},
      {"100000000000000000000", "100000000000000000000"},
      {"[1,123456789012345678901,{\"123456789012345678901\":\"9999999999999"
       "9999999\"}]",
       "[1,123456789012345680000,{\"123456789012345678901\":\"9999999999999"
       "9999999\"}]"},
      {"[1e-99999999999999999999,123456789012345678901]",
       "[0,123456789012345680000]"},
  };
  for (const auto& c : kCases) {
    EXPECT_EQ(Canonical(c.in), c.out) << c.in;
  }
}

TEST(CanonicalJsonTest, Rfc8785Example) {
  // RFC 8785 §3.2.2 (input) and §3.2.3 (output).
  const std::string in = R"({
    "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
    "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
    "literals": [null, true, false]
  })";
  const std::string expected =
      "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,"
      "4.5,0.002,1e-27],\"string\":\"\xE2\x82\xAC$\\u000f\\nA'B\\\"\\\\\\\\"
      "\\\"/\"}";
  EXPECT_EQ(Canonical(in), expected);
}

TEST(CanonicalJsonTest, KeysSortByUtf16CodeUnits) {
  // RFC 8785 §3.2.3 sorting example.
  const std::string in = R"({
    "\u20ac": "Euro Sign",
    "\r": "Carriage Return",
    "\ufb33": "Hebrew Letter Dalet With Dagesh",
    "1": "One",
    "\ud83d\ude00": "Emoji: Grinning Face",
    "\u0080": "Control",
    "\u00f6": "Latin Small Letter O With Diaeresis"
  })";
  const std::string expected =
      "{\"\\r\":\"Carriage Return\","
      "\"1\":\"One\","
      "\"\xC2\x80\":\"Control\","
      "\"\xC3\xB6\":\"Latin Small Letter O With Diaeresis\","
      "\"\xE2\x82\xAC\":\"Euro Sign\","
      "\"\xF0\x9F\x98\x80\":\"Emoji: Grinning Face\","
      "\"\xEF\xAC\xB3\":\"Hebrew Letter Dalet With Dagesh\"}";
  EXPECT_EQ(Canonical(in), expected);
}

TEST(CanonicalJsonTest, SupplementaryPlaneSortsBeforeHighBmp) {
  // U+1F600 is D83D DE00 in UTF-16, so it sorts before U+FF61 and U+FFFF
  // even though its UTF-8 (F0 ...) sorts after theirs (EF ...).
  const std::string in =
      "{\"\xEF\xBF\xBF\":3,\"\xEF\xBD\xA1\":2,\"\xF0\x9F\x98\x80\":1,"
      "\"\xED\x9F\xBF\":0}";
  EXPECT_EQ(Canonical(in),
            "{\"\xED\x9F\xBF\":0,\"\xF0\x9F\x98\x80\":1,\"\xEF\xBD\xA1\":2,"
            "\"\xEF\xBF\xBF\":3}");
  // The same keys written with \u escapes give the same text.
  EXPECT_EQ(Canonical("{\"\\uffff\":3,\"\\uff61\":2,\"\\ud83d\\ude00\":1,"
                      "\"\\ud7ff\":0}"),
            Canonical(in));
}

TEST(CanonicalJsonTest, KeysSortedRecursivelyAndPrefixesFirst) {
  EXPECT_EQ(Canonical(R"({"b":{"z":1,"a":[{"y":1,"x":2}]},"a":0,"ab":1,"":2})"),
            R"({"":2,"a":0,"ab":1,"b":{"a":[{"x":2,"y":1}],"z":1}})");
  // Array order is significant and kept.
  EXPECT_EQ(Canonical("[3,1,2]"), "[3,1,2]");
}

TEST(CanonicalJsonTest, StringEscapingIsMinimal) {
  // Control characters: the short forms where JSON has them, else \u00xx
  // in lowercase; '/' and DEL and non-ASCII are written as they are.
  EXPECT_EQ(Canonical(R"("\u0000\u0001\b\t\n\u000b\f\r\u001f \/ \u007f")"),
            "\"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f / \x7F\"");
  EXPECT_EQ(Canonical(R"("\"\\")"), R"("\"\\")");
  EXPECT_EQ(Canonical(R"("\u00e9\u20AC")"), "\"\xC3\xA9\xE2\x82\xAC\"");
  EXPECT_EQ(Canonical(R"("\u0041")"), "\"A\"");
}

TEST(CanonicalJsonTest, EquivalentTextsAreEqual) {
  const std::vector<std::vector<std::string>> kGroups = {
      {R"({"a":1,"b":2})", R"({"b":2,"a":1})",
       " { \"b\" : 2 ,\n\t\"a\" : 1 } "},
      {"1", "1.0", "1e0", "10e-1", "0.1e1"},
      {R"("A")", R"("\u0041")"},
      {R"({"x":{"p":[1,{"r":true,"q":null}],"o":"s"}})",
       R"({"x":{"o":"s","p":[1.0,{"q":null,"r":true}]}})"},
  };
  for (const auto& group : kGroups) {
    for (const std::string& text : group) {
      EXPECT_EQ(Canonical(text), Canonical(group[0]))
          << text << " vs " << group[0];
    }
  }
}

TEST(CanonicalJsonTest, DifferentValuesStayDifferent) {
  const std::vector<std::string> kTexts = {
      "1",     "2",      "\"1\"", "[1,2]",         "[2,1]",  "{\"a\":1}",
      "{}",    "[]",     "null",  "true",          "false",  "\"\"",
      "1.5",   "-1",     "0.1",   "{\"a\":\"1\"}", "[[]]",   "[{}]",
      "\"a\"", "\"a \"", "\"A\"", "{\"A\":1}",     "[null]", "0",
  };
  for (size_t i = 0; i < kTexts.size(); i++) {
    for (size_t j = i + 1; j < kTexts.size(); j++) {
      EXPECT_NE(Canonical(kTexts[i]), Canonical(kTexts[j]))
          << kTexts[i] << " vs " << kTexts[j];
    }
  }
}

TEST(CanonicalJsonTest, CanonicalFormIsAFixedPoint) {
  const std::vector<std::string> kTexts = {
      R"({"b":[1.50,2e-9,{"d":1,"c":"\u00e9\n"}],"a":-0.0})",
      "1e300",
      "1e20",
      "-1e20",
      R"(["\ud83d\ude00",{"\u0080":1,"1":2}])",
  };
  for (const std::string& text : kTexts) {
    const std::string once = Canonical(text);
    EXPECT_EQ(Canonical(once), once) << text;
  }
}

TEST(CanonicalJsonTest, InvalidJsonIsInvalidArgument) {
  for (const char* bad :
       {"", "{", "{\"a\":}", "[1,]", "nul", "{\"a\" 1}", "\"abc", "01", "1 2",
        "{'a':1}", "\"\xFF\"", "NaN", "[1]]"}) {
    std::string out;
    Status s = CanonicalizeJson(bad, &out);
    EXPECT_TRUE(s.IsInvalidArgument()) << "'" << bad << "': " << s.ToString();
  }
}

// IsValidJson is the cheap form of "CanonicalizeJson accepts it", which is
// how the snapshot and the log check stored task inputs: the two must agree,
// duplicate keys (at any depth, however escaped) and 65-bit integers
// included.
TEST(CanonicalJsonTest, IsValidJsonAgreesWithCanonicalizeJson) {
  for (const char* text :
       {"{}", "[]", "1", "\"a\"",
        "{\"a\":{\"a\":1},\"b\":[{\"a\":1},{\"a\":2}]}", "{\"a\":1,\"a\":2}",
        "{\"a\":1,\"\\u0061\":2}", "[{\"x\":{\"y\":1,\"z\":2,\"y\":3}}]",
        "{\"k\":[1,{\"q\":1,\"q\":1}]}", "18446744073709551616",
        "{\"n\":18446744073709551616,\"n\":1}", "", "{", "[1,]", "NaN",
        "{\"a\":1}x"}) {
    std::string out;
    EXPECT_EQ(IsValidJson(text), CanonicalizeJson(text, &out).ok()) << text;
  }
  EXPECT_TRUE(IsValidJson("{\"a\":{\"a\":1},\"b\":[{\"a\":1},{\"a\":2}]}"));
  EXPECT_FALSE(IsValidJson("{\"a\":1,\"\\u0061\":2}"));
}

}  // namespace
}  // namespace wizq
