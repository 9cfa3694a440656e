// Tests of util/json_writer.h: the writer of every line wizq stores.
#include "util/json_writer.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace wizq {
namespace {

std::string Quote(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

// Parses `json` (a JSON string literal) with simdjson and returns its value;
// fails the test if it is not valid JSON.
std::string ParseString(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  auto err = parser.parse(json).get(doc);
  EXPECT_FALSE(err) << json << ": " << simdjson::error_message(err);
  if (err) return "<invalid>";
  std::string_view s;
  EXPECT_FALSE(doc.get_string().get(s)) << json;
  return std::string(s);
}

TEST(JsonWriterTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(Quote(""), "\"\"");
  EXPECT_EQ(Quote("plain text / ok"), "\"plain text / ok\"");
  EXPECT_EQ(Quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(Quote("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(Quote(std::string("\0\x01\x1f\x7f", 4)),
            "\"\\u0000\\u0001\\u001f\x7f\"");
  // Every control character is escaped, and the result parses back.
  for (int c = 0; c < 0x20; c++) {
    const std::string in(1, static_cast<char>(c));
    const std::string out = Quote(in);
    for (char o : out) {
      EXPECT_GE(static_cast<unsigned char>(o), 0x20) << "control " << c;
    }
    EXPECT_EQ(ParseString(out), in) << "control " << c;
  }
}

TEST(JsonWriterTest, ValidUtf8PassesThrough) {
  const std::string s =
      "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBF";
  EXPECT_EQ(Quote(s), "\"" + s + "\"");
  EXPECT_EQ(ParseString(Quote(s)), s);
}

TEST(JsonWriterTest, InvalidUtf8BecomesReplacementCharacter) {
  const std::string kFffd = "\xEF\xBF\xBD";
  // A single bad byte is replaced by exactly one U+FFFD.
  EXPECT_EQ(Quote("a\xFF"
                  "b"),
            "\"a" + kFffd + "b\"");
  EXPECT_EQ(Quote("a\x80"
                  "b"),
            "\"a" + kFffd + "b\"");
  EXPECT_EQ(Quote("\xC3"), "\"" + kFffd + "\"");  // cut short at the end
  const std::vector<std::string> kBad = {
      "\xC3(",                 // lead byte without its continuation
      "\xE2\x82",              // 3-byte sequence cut short
      "\xF0\x9F\x98",          // 4-byte sequence cut short
      "\xC0\xAF",              // overlong '/'
      "\xE0\x80\xAF",          // overlong, 3 bytes
      "\xED\xA0\x80",          // UTF-16 surrogate D800
      "\xED\xBF\xBF",          // surrogate DFFF
      "\xF4\x90\x80\x80",      // above U+10FFFF
      "\xF8\x88\x80\x80\x80",  // 5-byte form
      "\xFE\xFF",
  };
  for (const std::string& bad : kBad) {
    const std::string in = "x" + bad + "y";
    const std::string out = Quote(in);
    EXPECT_TRUE(simdjson::validate_utf8(out.data(), out.size())) << out;
    const std::string back = ParseString(out);
    EXPECT_NE(back.find(kFffd), std::string::npos) << out;
    EXPECT_EQ(back.front(), 'x');
    EXPECT_EQ(back.back(), 'y');
    // What is kept of the input is only valid text.
    EXPECT_TRUE(simdjson::validate_utf8(back.data(), back.size()));
  }
}

TEST(JsonWriterTest, RandomBytesAlwaysGiveValidJson) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> len_dist(0, 24);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  for (int i = 0; i < 5000; i++) {
    std::string in;
    const int len = len_dist(rng);
    for (int k = 0; k < len; k++)
      in.push_back(static_cast<char>(byte_dist(rng)));
    const std::string out = Quote(in);
    ASSERT_TRUE(simdjson::validate_utf8(out.data(), out.size()));
    const std::string back = ParseString(out);
    if (simdjson::validate_utf8(in.data(), in.size())) {
      EXPECT_EQ(back, in);  // valid text round-trips exactly
    }
  }
}

TEST(JsonWriterTest, StructureAndCommas) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Field("s", "x").Field("i", int64_t{-5}).Field("n", 7).Field("b", true);
  w.Key("a").BeginArray().Int(1).BeginObject().EndObject().BeginArray();
  w.EndArray().Null().EndArray();
  w.Key("o").BeginObject().Key("k").Bool(false).EndObject();
  w.Key("raw").RawValue("{\"x\":[1,2]}");
  w.Key("empty_raw").RawValue("");
  w.EndObject();
  EXPECT_EQ(out,
            "{\"s\":\"x\",\"i\":-5,\"n\":7,\"b\":true,\"a\":[1,{},[],null],"
            "\"o\":{\"k\":false},\"raw\":{\"x\":[1,2]},\"empty_raw\":null}");
}

TEST(JsonWriterTest, TopLevelValuesInSequenceAreCommaSeparated) {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  w.String("a").String("b");
  w.EndArray();
  EXPECT_EQ(out, "[\"a\",\"b\"]");
}

TEST(JsonWriterTest, Numbers) {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  w.Int(std::numeric_limits<int64_t>::min());
  w.Int(std::numeric_limits<int64_t>::max());
  w.Uint(std::numeric_limits<uint64_t>::max());
  w.Double(0.1).Double(-2.5).Double(1e300).Double(5e-324);
  w.Double(std::numeric_limits<double>::quiet_NaN());
  w.Double(std::numeric_limits<double>::infinity());
  w.Double(-std::numeric_limits<double>::infinity());
  w.EndArray();
  EXPECT_EQ(out,
            "[-9223372036854775808,9223372036854775807,18446744073709551615,"
            "0.1,-2.5,1e+300,5e-324,null,null,null]");
}

TEST(JsonWriterTest, RoundTripsThroughSimdjson) {
  const std::string weird =
      std::string("q\"\\\n\t\0\x1f/", 8) + "\xC3\xA9\xF0\x9F\x98\x80";
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Field(weird, weird);
  w.Key("int").Int(-1234567890123);
  w.Key("uint").Uint(18446744073709551615ull);
  w.Key("dbl").Double(3.141592653589793);
  w.Key("tiny").Double(1e-310);
  w.Key("list").BeginArray().Bool(true).Bool(false).Null().EndArray();
  w.EndObject();

  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  ASSERT_FALSE(parser.parse(out).get(obj)) << out;
  std::string_view sv;
  ASSERT_FALSE(obj[weird].get(sv));
  EXPECT_EQ(sv, weird);
  int64_t i = 0;
  ASSERT_FALSE(obj["int"].get(i));
  EXPECT_EQ(i, -1234567890123);
  uint64_t u = 0;
  ASSERT_FALSE(obj["uint"].get(u));
  EXPECT_EQ(u, 18446744073709551615ull);
  double d = 0;
  ASSERT_FALSE(obj["dbl"].get(d));
  EXPECT_EQ(d, 3.141592653589793);  // shortest form reads back exactly
  ASSERT_FALSE(obj["tiny"].get(d));
  EXPECT_EQ(d, 1e-310);
  simdjson::dom::array list;
  ASSERT_FALSE(obj["list"].get(list));
  EXPECT_EQ(list.size(), 3u);
}

TEST(JsonWriterTest, LargeIntegralDoublesStayReadable) {
  // Such doubles must not come out as integer literals beyond 64 bits,
  // which simdjson (and so wizq's own reader) refuses.
  for (double d : {1e19, 1e20, -1e20, 1.8446744073709552e19,
                   -4334270042473571549184.0, 1e300, 9.3e18, -9.3e18}) {
    std::string out;
    JsonWriter(&out).Double(d);
    simdjson::dom::parser parser;
    double back = 0;
    ASSERT_FALSE(parser.parse(out).get(back)) << out;
    EXPECT_EQ(back, d) << out;
  }
}

TEST(JsonWriterTest, DoublesRoundTripExactly) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; i++) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    if (!std::isfinite(d)) continue;
    std::string out;
    JsonWriter(&out).Double(d);
    simdjson::dom::parser parser;
    double back = 0;
    ASSERT_FALSE(parser.parse(out).get(back)) << out;
    EXPECT_EQ(back, d) << out;
  }
}

}  // namespace
}  // namespace wizq
