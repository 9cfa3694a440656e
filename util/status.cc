#include "util/status.h"

#include <cstring>

namespace wizq {

Status Status::IOErrorFromErrno(std::string_view op, std::string_view path,
                                int err) {
  std::string msg(op);
  msg += " ";
  msg += path;
  msg += ": ";
  msg += std::strerror(err);
  return Status(kIOError, msg);
}

std::string Status::ToString() const {
  const char* kind = "";
  switch (code_) {
    case kOk:
      return "OK";
    case kNotFound:
      kind = "not found: ";
      break;
    case kCorruption:
      kind = "corruption: ";
      break;
    case kIOError:
      kind = "I/O error: ";
      break;
    case kInvalidArgument:
      kind = "invalid argument: ";
      break;
    case kBusy:
      kind = "busy: ";
      break;
    case kNotSupported:
      kind = "not supported: ";
      break;
    case kConflict:
      kind = "conflict: ";
      break;
  }
  return kind + msg_;
}

Status Status::Annotate(std::string_view prefix) const {
  if (ok()) return *this;
  std::string msg(prefix);
  msg += ": ";
  msg += msg_;
  return Status(code_, msg);
}

}  // namespace wizq
