// Fuzz target: queue.json, the snapshot (queue/dir/snapshot.h).
//
// DecodeSnapshot must turn any bytes into either a state or a Corruption
// naming the file; never crash. A state it accepts (format version 1) must
// keep QueueState's invariants and survive a checkpoint: EncodeSnapshot of
// it decodes to the same state, and encodes to the same text again.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "queue/dir/snapshot.h"
#include "queue/dir/state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wizq;
  const std::string_view text = fuzz::AsText(data, size);
  SnapshotHeader header;
  QueueState state;
  Status s = DecodeSnapshot("/x/.wizard/queue.json", std::string(text), &header,
                            &state);
  if (!s.ok()) {
    FUZZ_CHECK(s.IsCorruption(), s.ToString());
    FUZZ_CHECK(fuzz::Contains(s.message(), "/x/.wizard/queue.json"),
               "the error does not name the file: " + s.ToString());
    return 0;
  }
  // Another version: the caller refuses or archives it, reading no further
  // (and the state has no tasks).
  if (header.version != kSnapshotVersion) {
    FUZZ_CHECK(state.total() == 0, "tasks read from a file of version " +
                                       std::to_string(header.version));
    return 0;
  }
  fuzz::CheckStateInvariants(state);
  fuzz::CheckSnapshotRoundTrip(state, header.audit_offset);
  return 0;
}
