// The PostgreSQL wire protocol (version 3) as far as wizq_fault_proxy
// (tests/machines/fault_proxy.cc) needs it: the frontend stream, to
// recognise a COMMIT, and the backend stream, to find the reply to it.
// Bytes are passed on as they come; only the messages the proxy must look
// into are held until whole (at most their first 64 KiB).
#ifndef WIZQ_TESTS_MACHINES_PG_WIRE_H_
#define WIZQ_TESTS_MACHINES_PG_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace wizq::machines {

// Whether `sql` is, whole, COMMIT or END, optionally followed by WORK or
// TRANSACTION and by ';' (any case, any spacing).
bool IsCommitText(std::string_view sql);

// What a client sends: the startup packet (and an SSL/GSS request before
// it), then typed messages. Follows the statements and portals of the
// extended protocol that are a COMMIT, and counts the ReadyForQuery
// messages the server owes (one per startup, Query, Sync, FunctionCall).
class FrontendStream {
 public:
  enum Step { kNeedMore, kProgress, kCommit };
  struct Event {
    bool extended = false;        // an Execute, not a simple Query
    uint64_t replies_before = 0;  // ReadyForQuery sent before its reply
  };

  void Feed(const char* data, size_t n) { in_.append(data, n); }
  // Passes the next bytes of input to `out`. kCommit: a COMMIT is next,
  // held back and described in `ev`; the caller forwards it with
  // ForwardCommit() or drops the connection.
  Step Next(std::string* out, Event* ev);
  // Passes the held COMMIT. With `pause`, no input is passed after it (for
  // an Execute: after the Sync that follows it).
  void ForwardCommit(std::string* out, bool pause);

  // Whether the client asked for TLS or GSS encryption since the last call:
  // the server's next byte is its one-byte answer.
  bool TakeEncryptionRequest();
  void SetOpaque() { opaque_ = true; }
  bool opaque() const { return opaque_; }
  bool paused() const { return paused_; }
  size_t buffered() const { return in_.size(); }
  const std::string& user() const { return user_; }
  const std::string& database() const { return database_; }
  const std::string& application_name() const { return application_name_; }

 private:
  Step Startup(std::string* out);
  bool Inspect(char type, std::string_view body, bool whole);
  void Pass(std::string* out, size_t n);

  std::string in_;
  size_t pass_ = 0;  // bytes of the current message still to pass
  bool started_ = false, opaque_ = false, encryption_ = false;
  bool paused_ = false, pause_after_sync_ = false;
  size_t held_ = 0;  // size of the COMMIT held by Next()
  bool held_simple_ = false;
  uint64_t replies_expected_ = 0;
  std::map<std::string, bool> statements_, portals_;  // name -> is COMMIT
  std::string user_, database_, application_name_;
};

// What the server sends: typed messages (after a one-byte answer to an
// encryption request). Drops, when armed, the reply cycle of one COMMIT:
// everything after the ReadyForQuery that precedes it, through its own.
class BackendStream {
 public:
  void Feed(const char* data, size_t n) { in_.append(data, n); }
  void ExpectEncryptionAnswer() { answer_pending_ = true; }
  // Drops the cycle that follows the `replies_before`-th ReadyForQuery.
  void DropReplyCycle(uint64_t replies_before, bool extended);
  // Passes what it can to `out`; true once the dropped cycle ended, with
  // `outcome` the command tag the server answered ("COMMIT", "ROLLBACK")
  // or "error".
  bool Pump(std::string* out, std::string* outcome);

  bool armed() const { return armed_; }
  bool reply_extended() const { return extended_; }
  void SetOpaque() { opaque_ = true; }
  bool opaque() const { return opaque_; }
  size_t buffered() const { return in_.size(); }

 private:
  std::string in_;
  size_t pass_ = 0;
  bool pass_dropped_ = false;
  bool opaque_ = false, answer_pending_ = false;
  bool armed_ = false, extended_ = false;
  uint64_t replies_seen_ = 0, replies_before_ = 0;
  std::string outcome_;
};

}  // namespace wizq::machines

#endif  // WIZQ_TESTS_MACHINES_PG_WIRE_H_
