// Small helpers over simdjson's On-Demand API shared by the snapshot and
// event readers.
#ifndef WIZQ_QUEUE_JSON_UTIL_H_
#define WIZQ_QUEUE_JSON_UTIL_H_

#include <simdjson.h>

#include <string_view>

namespace wizq {

// The exact JSON text of a value (object, array or scalar).
inline simdjson::error_code RawJson(simdjson::ondemand::value v,
                                    std::string_view* out) {
  simdjson::ondemand::json_type type;
  auto err = v.type().get(type);
  if (err) return err;
  if (type == simdjson::ondemand::json_type::object) {
    simdjson::ondemand::object obj;
    err = v.get_object().get(obj);
    return err ? err : obj.raw_json().get(*out);
  }
  if (type == simdjson::ondemand::json_type::array) {
    simdjson::ondemand::array arr;
    err = v.get_array().get(arr);
    return err ? err : arr.raw_json().get(*out);
  }
  std::string_view tok = v.raw_json_token();
  while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n' ||
                          tok.back() == '\r' || tok.back() == '\t')) {
    tok.remove_suffix(1);
  }
  *out = tok;
  return simdjson::SUCCESS;
}

// A nullable integer: null reads as 0.
inline simdjson::error_code IntOrNull(simdjson::ondemand::value v,
                                      int64_t* out) {
  bool is_null = false;
  auto err = v.is_null().get(is_null);
  if (err) return err;
  if (is_null) {
    *out = 0;
    return simdjson::SUCCESS;
  }
  return v.get_int64().get(*out);
}

}  // namespace wizq

#endif  // WIZQ_QUEUE_JSON_UTIL_H_
