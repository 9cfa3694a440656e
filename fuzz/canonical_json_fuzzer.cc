// Fuzz target: canonical JSON, the text dedup keys hash
// (util/canonical_json.h).
//
// Any bytes: CanonicalizeJson returns InvalidArgument or a canonical text.
// Properties of an accepted input:
//  - the output is JSON (simdjson and nlohmann/json both parse it) and means
//    the same value as the input (nlohmann/json compares them equal);
//  - canonicalizing the output again gives the same text (idempotence);
//  - DedupKey accepts it, and gives the input and the output one key.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_util.h"
#include "queue/dir/queue.h"
#include "util/canonical_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wizq;
  const std::string_view in = fuzz::AsText(data, size);
  std::string out;
  Status s = CanonicalizeJson(in, &out);
  if (!s.ok()) {
    FUZZ_CHECK(s.IsInvalidArgument(), s.ToString());
    return 0;
  }
  std::string again;
  s = CanonicalizeJson(out, &again);
  FUZZ_CHECK(s.ok(), "canonical output does not canonicalize: " + s.ToString() +
                         "\n" + out);
  FUZZ_CHECK(again == out, "not idempotent:\n" + out + "\n" + again);

  simdjson::dom::parser parser;
  simdjson::dom::element root;
  auto err = parser.parse(simdjson::padded_string(out)).get(root);
  // simdjson refuses integers beyond 64 bits (CanonicalizeJson reads them as
  // doubles and may print them as long integers again).
  FUZZ_CHECK(!err || err == simdjson::NUMBER_ERROR,
             std::string("simdjson refuses the output: ") +
                 simdjson::error_message(err) + "\n" + out);

  nlohmann::json a, b;
  try {
    b = nlohmann::json::parse(out);
  } catch (const nlohmann::json::exception& e) {
    fuzz::Fail(__FILE__, __LINE__, "parse(out)",
               std::string(e.what()) + "\n" + out);
  }
  bool in_ok = true;
  try {
    a = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    in_ok = false;  // e.g. nesting nlohmann/json refuses; nothing to compare
  }
  if (in_ok) {
    FUZZ_CHECK(a == b, "the canonical form means another value:\n" +
                           std::string(in) + "\n" + out);
  }

  std::string k1, k2;
  FUZZ_CHECK(DedupKey("Step", in, &k1).ok(), "DedupKey refused the input");
  FUZZ_CHECK(DedupKey("Step", out, &k2).ok(), "DedupKey refused the output");
  FUZZ_CHECK(k1 == k2, "input and canonical output have different keys");
  return 0;
}
