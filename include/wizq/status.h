// wizq::Status: the result of an operation that can fail, LevelDB style.
// Part of the public API (docs/EMBEDDING.md); the library uses the same
// class everywhere (util/status.h includes this header).
//
// A Status is either OK or carries a code and a message. Messages name the
// file (and byte offset, field or task) involved and, where it helps, what
// the user can do about it. Status is cheap to copy when OK.
//
// Status is [[nodiscard]]: a caller handles or returns every Status. One
// that is dropped on purpose (a best-effort cleanup whose failure changes
// nothing) says so with IgnoreError() and a comment giving the reason, so
// that `git grep IgnoreError` lists every dropped error with its reason.
//
// Thread-safety: a const Status may be read from several threads at once.
#ifndef WIZQ_STATUS_H_
#define WIZQ_STATUS_H_

#include <string>
#include <string_view>

namespace wizq {

class [[nodiscard]] Status {
 public:
  enum Code {
    kOk = 0,
    kNotFound,         // a file or task that does not exist
    kCorruption,       // a state file that cannot be trusted
    kIOError,          // the OS refused: ENOSPC, EIO, EACCES, ...
    kInvalidArgument,  // bad workflow, input or call
    kBusy,             // held by a live process (lock, foreign run)
    kNotSupported,     // written by a newer wizq
    kConflict,         // a task is no longer in the state the caller saw
  };

  Status() = default;
  static Status OK() { return Status(); }
  static Status NotFound(std::string_view msg) { return {kNotFound, msg}; }
  static Status Corruption(std::string_view msg) { return {kCorruption, msg}; }
  static Status IOError(std::string_view msg) { return {kIOError, msg}; }
  // An I/O error from errno, naming the operation and the path.
  static Status IOErrorFromErrno(std::string_view op, std::string_view path,
                                 int err);
  static Status InvalidArgument(std::string_view msg) {
    return {kInvalidArgument, msg};
  }
  static Status Busy(std::string_view msg) { return {kBusy, msg}; }
  static Status NotSupported(std::string_view msg) {
    return {kNotSupported, msg};
  }
  static Status Conflict(std::string_view msg) { return {kConflict, msg}; }

  bool ok() const { return code_ == kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return msg_; }
  bool IsNotFound() const { return code_ == kNotFound; }
  bool IsCorruption() const { return code_ == kCorruption; }
  bool IsIOError() const { return code_ == kIOError; }
  bool IsInvalidArgument() const { return code_ == kInvalidArgument; }
  bool IsBusy() const { return code_ == kBusy; }
  bool IsNotSupported() const { return code_ == kNotSupported; }
  bool IsConflict() const { return code_ == kConflict; }

  // Drops this status on purpose. REQUIRES: a comment at the call site
  // saying why ignoring a failure here is right.
  void IgnoreError() const {}

  // "IO error: ..." etc.
  std::string ToString() const;
  // The same status with `prefix: ` put before the message.
  Status Annotate(std::string_view prefix) const;

 private:
  Status(Code code, std::string_view msg) : code_(code), msg_(msg) {}
  Code code_ = kOk;
  std::string msg_;
};

}  // namespace wizq

#endif  // WIZQ_STATUS_H_
