#include "queue/pg/pg_result.h"

#include <libpq-fe.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace wizq {

void PgResult::Clear::operator()(PGresult* r) const { PQclear(r); }

PgResult::PgResult(PGresult* res) : res_(res) {}

int PgResult::rows() const { return res_ ? PQntuples(res_.get()) : 0; }

int PgResult::columns() const { return res_ ? PQnfields(res_.get()) : 0; }

int PgResult::Column(std::string_view name) const {
  if (!res_) return -1;
  // Quoted, so that PQfnumber takes the name as it is (unquoted, it folds
  // it to lower case).
  std::string quoted = "\"";
  quoted += name;
  quoted += "\"";
  return PQfnumber(res_.get(), quoted.c_str());
}

int PgResult::ColumnOrDie(std::string_view name) const {
  const int col = Column(name);
  if (col < 0) {
    std::fprintf(stderr, "wizq: BUG: no column \"%.*s\" in a query result\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return col;
}

bool PgResult::IsNull(int row, int col) const {
  return PQgetisnull(res_.get(), row, col) != 0;
}

std::string_view PgResult::Get(int row, int col) const {
  return std::string_view(
      PQgetvalue(res_.get(), row, col),
      static_cast<size_t>(PQgetlength(res_.get(), row, col)));
}

std::string_view PgResult::Get(int row, std::string_view col) const {
  return Get(row, ColumnOrDie(col));
}

int64_t PgResult::GetInt(int row, std::string_view col) const {
  const int c = ColumnOrDie(col);
  if (IsNull(row, c)) return 0;
  return std::strtoll(PQgetvalue(res_.get(), row, c), nullptr, 10);
}

bool PgResult::GetBool(int row, std::string_view col) const {
  return Get(row, col) == "t";
}

std::string PgResult::GetBytes(int row, std::string_view col) const {
  const int c = ColumnOrDie(col);
  if (IsNull(row, c)) return std::string();
  size_t n = 0;
  unsigned char* bytes = PQunescapeBytea(
      reinterpret_cast<const unsigned char*>(PQgetvalue(res_.get(), row, c)),
      &n);
  if (bytes == nullptr) return std::string();
  std::string out(reinterpret_cast<const char*>(bytes), n);
  PQfreemem(bytes);
  return out;
}

int64_t PgResult::affected_rows() const {
  if (!res_) return 0;
  return std::strtoll(PQcmdTuples(res_.get()), nullptr, 10);
}

std::string_view PgResult::command() const {
  return res_ ? std::string_view(PQcmdStatus(res_.get())) : std::string_view();
}

PgErrorKind ClassifyPgError(const PGresult* res, bool session_gone) {
  const char* state =
      res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const char* severity =
      res != nullptr ? PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED)
                     : nullptr;
  // A FATAL or PANIC error always ends the session (admin_shutdown 57P01,
  // crash_shutdown 57P02, idle_in_transaction_session_timeout 25P03...),
  // as does any connection_exception (08xxx).
  if (session_gone ||
      (severity != nullptr && (std::strcmp(severity, "FATAL") == 0 ||
                               std::strcmp(severity, "PANIC") == 0)) ||
      (state != nullptr && std::strncmp(state, "08", 2) == 0)) {
    return PgErrorKind::kConnectionLost;
  }
  if (state == nullptr) return PgErrorKind::kOther;
  const std::string_view s(state);
  if (s == "23505") return PgErrorKind::kUniqueViolation;
  if (s == "40001" || s == "40P01") return PgErrorKind::kRetryable;
  if (s == "55P03") return PgErrorKind::kLockNotAvailable;
  if (s == "57014") return PgErrorKind::kQueryCanceled;
  return PgErrorKind::kOther;
}

Status PgStatusFor(PgErrorKind kind, std::string_view sqlstate,
                   const std::string& message) {
  switch (kind) {
    case PgErrorKind::kNone:
      return Status::OK();
    case PgErrorKind::kUniqueViolation:
      return Status::Conflict(message);
    case PgErrorKind::kRetryable:
    case PgErrorKind::kLockNotAvailable:
    case PgErrorKind::kQueryCanceled:
      return Status::Busy(message);
    case PgErrorKind::kConnectionLost:
    case PgErrorKind::kCommitUnknown:
      return Status::IOError(message);
    case PgErrorKind::kOther:
      break;
  }
  if (sqlstate.substr(0, 2) == "22") return Status::InvalidArgument(message);
  return Status::IOError(message);
}

}  // namespace wizq
