// Fuzz target: audit.jsonl, the event log (audit/log.h, queue/dir/state.h).
//
// The input is read as a log twice:
//  1. as is: ParseLog must split any bytes into a committed prefix and a
//     torn tail, or report Corruption naming the file; never crash. Its
//     result must be consistent (seqs rising by one, every record a
//     checksummed line inside the input, nothing but padding after the
//     torn tail);
//  2. with every line's crc recomputed (so that mutated lines still pass the
//     checksum and reach the event decoder): the committed records are
//     applied in order to a fresh QueueState, as a reader of the log does,
//     stopping at the first error. ApplyEvent must return errors, never
//     crash; the state it leaves after each accepted event keeps its
//     invariants, and a checkpoint of the final state reads back the same.
#include <cstddef>
#include <cstdint>

#include "audit/log.h"
#include "fuzz/fuzz_util.h"
#include "queue/dir/state.h"

namespace {

using namespace wizq;

const std::string kPath = "/x/.wizard/audit.jsonl";

void CheckParse(std::string_view data, uint64_t base, int64_t expected_seq,
                const LogParseResult& r) {
  uint64_t last_end = base;
  int64_t prev = 0;
  for (const LogRecord& rec : r.records) {
    FUZZ_CHECK(
        rec.line.data() >= data.data() &&
            rec.line.data() + rec.line.size() < data.data() + data.size(),
        "a record outside the input");
    FUZZ_CHECK(rec.offset ==
                   base + static_cast<uint64_t>(rec.line.data() - data.data()),
               "record offset");
    FUZZ_CHECK(rec.offset >= last_end, "records overlap");
    FUZZ_CHECK(data[rec.offset - base + rec.line.size()] == '\n',
               "a record not ended by a newline");
    FUZZ_CHECK(LineChecksumOk(rec.line), "a record with a bad checksum");
    if (prev != 0) FUZZ_CHECK(rec.seq == prev + 1, "seq gap");
    if (prev == 0 && expected_seq != 0) {
      FUZZ_CHECK(rec.seq == expected_seq, "first seq");
    }
    prev = rec.seq;
    last_end = rec.offset + rec.line.size() + 1;
  }
  FUZZ_CHECK(r.committed_end == last_end, "committed_end");
  // After the torn tail only free space (padding) is left.
  const uint64_t torn_end = r.committed_end + r.torn_bytes;
  FUZZ_CHECK(torn_end <= base + data.size(), "torn tail past the input");
  FUZZ_CHECK(data.substr(torn_end - base)
                     .find_first_not_of(std::string_view("\n\0", 2)) ==
                 std::string_view::npos,
             "bytes that are not padding after the torn tail");
  FUZZ_CHECK(r.torn_bytes == 0 || data[torn_end - base - 1] == '\n' ||
                 data.substr(torn_end - base - 1, 1)
                         .find_first_of(std::string_view("\n\0", 2)) ==
                     std::string_view::npos,
             "a torn tail that ends in padding other than one newline");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view raw = fuzz::AsText(data, size);

  LogParseResult r;
  Status s = ParseLog(kPath, raw, 0, 0, &r);
  if (s.ok()) {
    CheckParse(raw, 0, 0, r);
  } else {
    FUZZ_CHECK(s.IsCorruption() && fuzz::Contains(s.message(), kPath),
               s.ToString());
  }
  // The same bytes as the tail of a log read from offset 1000, seq 1 on.
  s = ParseLog(kPath, raw, 1000, 1, &r);
  if (s.ok()) CheckParse(raw, 1000, 1, r);

  const std::string fixed = fuzz::Rechecksum(raw);
  s = ParseLog(kPath, fixed, 0, 0, &r);
  if (!s.ok()) return 0;
  CheckParse(fixed, 0, 0, r);
  QueueState state;
  for (const LogRecord& rec : r.records) {
    Status a = state.ApplyEvent(rec.line);
    if (!a.ok()) {
      FUZZ_CHECK(a.IsCorruption(), a.ToString());
      return 0;
    }
    fuzz::CheckStateInvariants(state);
  }
  if (state.started()) fuzz::CheckSnapshotRoundTrip(state, r.committed_end);
  return 0;
}
