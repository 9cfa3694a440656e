// The simdjson side of queue/events.h, for the files that decode events
// (queue/events*.cc): events.h itself does not include simdjson.h, a
// 30,000-line header, so the 40-odd files that only encode, store or
// apply events do not parse it (docs/BENCHMARKS.md, "Build time").
#ifndef WIZQ_QUEUE_EVENT_VALUE_H_
#define WIZQ_QUEUE_EVENT_VALUE_H_

#include <simdjson.h>

#include "queue/events.h"

namespace wizq {

// A field's value as DecodeField gets it: simdjson's On-Demand value.
class EventValue : public simdjson::ondemand::value {
 public:
  EventValue() = default;
  EventValue(simdjson::ondemand::value v)  // NOLINT: a view, as simdjson's
      : simdjson::ondemand::value(v) {}
};

static_assert(sizeof(EventError) >= sizeof(simdjson::error_code),
              "EventError holds a simdjson::error_code");

// The parsers EventDecoder and EventFieldReader keep between lines.
struct EventDecoder::Parser {
  simdjson::ondemand::parser parser;
};
struct EventFieldReader::Parser {
  simdjson::dom::parser parser;
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_EVENT_VALUE_H_
