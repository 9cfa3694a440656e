// The values that go into a PostgreSQL statement (PgParam, always bound,
// never spliced into SQL text), what comes back (PgResult), and how a
// failure is told apart (PgError). Used through PgConn (pg_conn.h).
#ifndef WIZQ_QUEUE_PG_PG_RESULT_H_
#define WIZQ_QUEUE_PG_PG_RESULT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "util/status.h"

typedef struct pg_result PGresult;

namespace wizq {

// One bound parameter ($1, $2...): SQL NULL, text (PostgreSQL parses it as
// the parameter's type: "42" for an int, "t" for a bool) or bytes (sent in
// binary format, for a bytea). A text parameter cannot hold a NUL byte —
// PostgreSQL's text types cannot — and is refused by PgConn if it does.
class PgParam {
 public:
  PgParam(std::nullptr_t) : null_(true) {}
  PgParam(std::string_view text) : value_(text) {}
  PgParam(const std::string& text) : value_(text) {}
  PgParam(const char* text) : value_(text) {}
  PgParam(int v) : value_(std::to_string(v)) {}
  PgParam(long v) : value_(std::to_string(v)) {}
  PgParam(long long v) : value_(std::to_string(v)) {}
  PgParam(bool v) : value_(v ? "true" : "false") {}
  static PgParam Bytes(std::string_view bytes) {
    PgParam p(bytes);
    p.binary_ = true;
    return p;
  }

  bool is_null() const { return null_; }
  bool binary() const { return binary_; }
  const std::string& value() const { return value_; }

 private:
  std::string value_;
  bool null_ = false;
  bool binary_ = false;
};

// What went wrong, for a caller that acts on it (PgConn::last_error()).
enum class PgErrorKind {
  kNone,
  kUniqueViolation,   // 23505: a row with that key exists
  kRetryable,         // 40001 serialization_failure, 40P01 deadlock_detected
  kLockNotAvailable,  // 55P03: lock_timeout, NOWAIT
  kQueryCanceled,     // 57014: statement_timeout or a cancel request
  kConnectionLost,    // the session ended (57P01-57P03, 08xxx, EOF, ...)
  // The session ended while COMMIT was in flight: the transaction may or
  // may not have committed. The caller must re-read before acting (SPEC
  // §14).
  kCommitUnknown,
  kOther,
};

struct PgError {
  PgErrorKind kind = PgErrorKind::kNone;
  std::string sqlstate;  // "23505", ...; empty when PostgreSQL gave none
};

// The rows of a query (text format), or the count of a command. Cheap to
// move; empty (0 rows, 0 columns) by default.
class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(PGresult* res);

  int rows() const;
  int columns() const;
  // The index of the column named `name` (as the query spells it, lower
  // case), or -1.
  int Column(std::string_view name) const;
  bool IsNull(int row, int col) const;
  // The value as text; "" for NULL. REQUIRES: row and col in range.
  std::string_view Get(int row, int col) const;
  // By column name. REQUIRES: the column exists.
  std::string_view Get(int row, std::string_view col) const;
  // An integer column; 0 for NULL. REQUIRES: the column is an integer.
  int64_t GetInt(int row, std::string_view col) const;
  // A boolean column ("t"); false for NULL.
  bool GetBool(int row, std::string_view col) const;
  // A bytea column, unescaped; "" for NULL.
  std::string GetBytes(int row, std::string_view col) const;
  // Rows a command inserted, updated or deleted (0 if it reports none).
  int64_t affected_rows() const;
  // The command tag: "INSERT 0 1", "COMMIT", "ROLLBACK"...
  std::string_view command() const;

 private:
  struct Clear {
    void operator()(PGresult* r) const;
  };
  int ColumnOrDie(std::string_view name) const;
  std::unique_ptr<PGresult, Clear> res_;
};

// The PgErrorKind of a failed result (`res` may be null), given whether
// the session is gone afterwards.
PgErrorKind ClassifyPgError(const PGresult* res, bool session_gone);

// The Status of a failure of kind `kind`, with `message`: kUniqueViolation
// is a Conflict, the retryable and lock ones Busy, a data exception (22xxx)
// InvalidArgument, the rest (connection, commit unknown, other) IOError.
Status PgStatusFor(PgErrorKind kind, std::string_view sqlstate,
                   const std::string& message);

}  // namespace wizq

#endif  // WIZQ_QUEUE_PG_PG_RESULT_H_
