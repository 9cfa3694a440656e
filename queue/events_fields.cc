// EventFieldReader: the fields of any event line as they are written
// (queue/events.h).
#include "queue/event_value.h"
#include "queue/events.h"

namespace wizq {

EventFieldReader::EventFieldReader() : parser_(std::make_unique<Parser>()) {}
EventFieldReader::~EventFieldReader() = default;
EventFieldReader::EventFieldReader(EventFieldReader&&) noexcept = default;
EventFieldReader& EventFieldReader::operator=(EventFieldReader&&) noexcept =
    default;

Status EventFieldReader::Read(std::string_view line,
                              std::vector<EventField>* fields) {
  fields->clear();
  simdjson::dom::object obj;
  simdjson::error_code err =
      parser_->parser.parse(line.data(), line.size()).get(obj);
  if (err) {
    return Status::Corruption(std::string("audit event does not parse: ") +
                              simdjson::error_message(err));
  }
  for (auto [key, value] : obj) {
    EventField f;
    f.key = std::string(key);
    f.json = simdjson::minify(value);
    f.is_int = !value.get(f.int_value);
    std::string_view text;
    f.is_string = !value.get(text);
    if (f.is_string) f.text = std::string(text);
    fields->push_back(std::move(f));
  }
  return Status::OK();
}

}  // namespace wizq
