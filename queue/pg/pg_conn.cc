#include "queue/pg/pg_conn.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "queue/pg/pg_location.h"

namespace wizq {
namespace {

// libpq's messages end with a newline and may hold several lines (one per
// host tried, a DETAIL): one line, "; " between them.
std::string OneLine(std::string_view text) {
  std::string out;
  bool line_start = false;
  for (char c : text) {
    if (c == '\n') {
      if (!out.empty() && !line_start) out += "; ";
      line_start = true;
      continue;
    }
    if (line_start && (c == ' ' || c == '\t')) continue;  // an indent
    line_start = false;
    out.push_back(c);
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) {
    out.pop_back();
  }
  return out;
}

// The message of a failed result: PostgreSQL's primary message, its
// detail and SQLSTATE, or libpq's own message (a lost connection).
std::string ErrorText(const PGresult* res, PGconn* conn) {
  const char* primary = res != nullptr
                            ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)
                            : nullptr;
  if (primary == nullptr) {
    const char* m = res != nullptr ? PQresultErrorMessage(res) : "";
    if (*m == '\0') m = PQerrorMessage(conn);
    return OneLine(m);
  }
  std::string text = primary;
  if (const char* detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL)) {
    text += " (";
    text += detail;
    text += ")";
  }
  if (const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE)) {
    text += " [SQLSTATE ";
    text += state;
    text += "]";
  }
  return OneLine(text);
}

// Server notices (NOTICE: schema "wizq" already exists, skipping...) are
// not the user's business: libpq would print them on stderr.
void DropNotice(void*, const char*) {}

// InvalidArgument unless libpq can read `location`.
Status CheckReadable(const std::string& location, const std::string& display,
                     const std::vector<std::string>& secrets) {
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(location.c_str(), &error);
  if (parsed != nullptr) {
    PQconninfoFree(parsed);
    return Status::OK();
  }
  const std::string why =
      error != nullptr ? OneLine(error) : std::string("out of memory");
  if (error != nullptr) PQfreemem(error);
  // libpq's message may quote a part of the location: scrubbed.
  return Status::InvalidArgument(ScrubPgSecrets(
      "cannot read the store location \"" + display + "\": " + why +
          " (expected a postgresql:// URL or a libpq keyword string such as "
          "\"host=db dbname=runs\")",
      secrets));
}

// Connects (blocking) with wizq's connection settings: ours first, so that
// the location (expanded from "dbname") overrides them; client_encoding
// last: JSON text is stored as UTF-8. Null only when out of memory.
PGconn* Connect(const std::string& location, const PgConnOptions& o) {
  const std::pair<const char*, std::string> params[] = {
      {"application_name", o.application_name},
      {"connect_timeout", std::to_string(o.connect_timeout_s)},
#ifndef WIZQ_MUTANT_NO_KEEPALIVES
      // Mutant (tests/machines/torture, make torture-mutants): no keepalives.
      {"keepalives", "1"},
      {"keepalives_idle", std::to_string(o.keepalives_idle_s)},
      {"keepalives_interval", std::to_string(o.keepalives_interval_s)},
      {"keepalives_count", std::to_string(o.keepalives_count)},
      {"tcp_user_timeout", std::to_string(o.tcp_user_timeout_ms)},
#endif
      {"target_session_attrs", o.target_session_attrs},
      {"dbname", location},
      {"client_encoding", "UTF8"},
  };
  std::vector<const char*> keywords, values;
  for (const auto& [k, v] : params) {
    keywords.push_back(k);
    values.push_back(v.c_str());
  }
  keywords.push_back(nullptr);
  values.push_back(nullptr);
  return PQconnectdbParams(keywords.data(), values.data(),
                           /*expand_dbname=*/1);
}

}  // namespace

Status PgConn::CheckLocation(std::string_view location) {
  return CheckReadable(std::string(location), RedactPgLocation(location),
                       PgLocationSecrets(location));
}

Status PgConn::Open(std::string_view location, const PgConnOptions& o,
                    std::unique_ptr<PgConn>* out) {
  out->reset();
  const std::string loc(location);
  const std::string display = RedactPgLocation(location);
  std::vector<std::string> secrets = PgLocationSecrets(location);
  WIZQ_RETURN_IF_ERROR(CheckReadable(loc, display, secrets));
  PGconn* conn = Connect(loc, o);
  if (conn == nullptr) return Status::IOError("libpq: out of memory");
  // The password libpq used, wherever it came from (a password file too).
  if (const char* pass = PQpass(conn); pass != nullptr && *pass != '\0') {
    secrets.push_back(pass);
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string why = OneLine(PQerrorMessage(conn));
    PQfinish(conn);
    return Status::IOError(ScrubPgSecrets(
        "cannot connect to the store " + display + ": " + why, secrets));
  }
  if (const int v = PQserverVersion(conn); v < 150000) {
    PQfinish(conn);
    return Status::NotSupported("the store " + display + " runs PostgreSQL " +
                                std::to_string(v / 10000) +
                                "; wizq needs PostgreSQL 15 or newer");
  }
  PQsetNoticeProcessor(conn, DropNotice, nullptr);
  std::unique_ptr<PgConn> c(
      new PgConn(conn, std::move(secrets), display, o.answer_timeout_ms));
  WIZQ_RETURN_IF_ERROR(c->ApplySessionSettings(o));
  *out = std::move(c);
  return Status::OK();
}

PgConn::PgConn(PGconn* conn, std::vector<std::string> secrets,
               std::string display, int answer_timeout_ms)
    : conn_(conn),
      secrets_(std::move(secrets)),
      display_(std::move(display)),
      backend_pid_(PQbackendPID(conn)),
      answer_timeout_ms_(answer_timeout_ms) {}

PgConn::~PgConn() { PQfinish(conn_); }

// jit: the store's statements are short; compiling one costs more than
// running it. client_connection_check_interval: a backend whose client
// went away (a session this side ended, ended_here) stops waiting for a
// lock within a second, and lets go of what it holds (a liveness lock).
Status PgConn::ApplySessionSettings(const PgConnOptions& o) {
  return Exec(
             "SELECT set_config('idle_in_transaction_session_timeout', $1, "
             "false), set_config('lock_timeout', $2, false), "
             "set_config('statement_timeout', $3, false), "
             "set_config('idle_session_timeout', $4, false), "
             "set_config('client_connection_check_interval', '1000', "
             "false), set_config('jit', 'off', false)",
             {std::to_string(o.idle_in_transaction_timeout_ms),
              std::to_string(o.lock_timeout_ms),
              std::to_string(o.statement_timeout_ms),
              std::to_string(o.idle_session_timeout_ms)})
      .Annotate("setting the session's timeouts");
}

std::string PgConn::Scrub(std::string text) const {
  return ScrubPgSecrets(std::move(text), secrets_);
}

Status PgConn::LostStatus(const char* what) {
  last_error_ = {PgErrorKind::kConnectionLost, ""};
  return Status::IOError(Scrub(std::string(what) +
                               ": the session with the "
                               "store " +
                               display_ +
                               " was lost earlier (not reconnected)"));
}

Status PgConn::Fail(const char* what, PGresult* res) {
  // No result at all: the statement could not be sent, or the socket
  // failed while waiting.
  bool gone = PQstatus(conn_) == CONNECTION_BAD || res == nullptr;
  const char* state =
      res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  // An error of libpq's own (no SQLSTATE) after the server closed the
  // socket under a write (a restarted server) leaves the status OK until
  // the next read: one read settles whether the session is gone.
  if (!gone && state == nullptr) {
    gone = PQconsumeInput(conn_) == 0 || PQstatus(conn_) == CONNECTION_BAD;
  }
  const PgErrorKind kind = ClassifyPgError(res, gone);
  last_error_ = {kind, state != nullptr ? state : ""};
  std::string text = ErrorText(res, conn_);
  PQclear(res);
  if (kind == PgErrorKind::kConnectionLost) {
    lost_ = true;
    text = "the session with the store " + display_ + " was lost: " + text;
  }
  return PgStatusFor(kind, last_error_.sqlstate,
                     Scrub(std::string(what) + ": " + text));
}

Status PgConn::Bind(const char* what, const std::vector<PgParam>& params,
                    Bound* out) {
  for (size_t i = 0; i < params.size(); i++) {
    const PgParam& p = params[i];
    if (!p.is_null() && !p.binary() &&
        p.value().find('\0') != std::string::npos) {
      last_error_ = {PgErrorKind::kOther, ""};
      return Status::InvalidArgument(
          std::string(what) + ": parameter $" + std::to_string(i + 1) +
          " holds a NUL byte, which a PostgreSQL text value cannot hold");
    }
    out->values.push_back(p.is_null() ? nullptr : p.value().c_str());
    out->lengths.push_back(static_cast<int>(p.value().size()));
    out->formats.push_back(p.binary() ? 1 : 0);
  }
  return Status::OK();
}

Status PgConn::Run(const char* what, const std::vector<PgParam>& params,
                   PgResult* result,
                   const std::function<PGresult*(const char* const*, const int*,
                                                 const int*)>& send) {
  if (lost_) return LostStatus(what);
  Bound b;
  WIZQ_RETURN_IF_ERROR(Bind(what, params, &b));
  PGresult* res = send(b.values.data(), b.lengths.data(), b.formats.data());
  if (res == nullptr && timed_out_) {
    timed_out_ = false;
    lost_ = true;
    ended_here_ = true;
    last_error_ = {PgErrorKind::kConnectionLost, ""};
    return Status::IOError(Scrub(std::string(what) +
                                 ": the session with the store " + display_ +
                                 " was lost: no answer in " +
                                 std::to_string(answer_timeout_ms_) + " ms"));
  }
  const ExecStatusType st =
      res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK &&
      st != PGRES_EMPTY_QUERY) {
    return Fail(what, res);
  }
  last_error_ = {};
  if (result != nullptr) {
    *result = PgResult(res);
  } else {
    PQclear(res);
  }
  return Status::OK();
}

// A statement with parameters is prepared on this session the first time
// its text is run, and run by name after that: the store runs a few dozen
// texts over and over, and parsing and planning each anew cost more than
// the rest of a transaction (docs/BENCHMARKS.md, "PostgreSQL store"). At
// most kMaxPrepared texts (a text built with a value in it would
// otherwise grow the cache); beyond, statements run unprepared.
Status PgConn::Exec(std::string_view sql, const std::vector<PgParam>& params,
                    PgResult* result) {
  const std::string text(sql);
  std::string name;
  WIZQ_RETURN_IF_ERROR(PreparedName(text, params.size(), &name));
  if (!name.empty()) return ExecPrepared(name, params, result);
  return ExecPlanned(sql, params, result);
}

Status PgConn::PreparedName(const std::string& sql, size_t params,
                            std::string* name) {
  name->clear();
  auto it = prepared_.find(sql);
  if (it == prepared_.end() && params > 0 && prepared_.size() < kMaxPrepared) {
    const std::string fresh = "wizq_" + std::to_string(prepared_.size());
    WIZQ_RETURN_IF_ERROR(Prepare(fresh, sql));
    it = prepared_.emplace(sql, fresh).first;
  }
  if (it != prepared_.end()) *name = it->second;
  return Status::OK();
}

Status PgConn::ExecPlanned(std::string_view sql,
                           const std::vector<PgParam>& params,
                           PgResult* result) {
  const std::string text(sql);
  const int n = static_cast<int>(params.size());
  return Run(
      "PostgreSQL", params, result,
      [&](const char* const* v, const int* len, const int* fmt) -> PGresult* {
        if (PQsendQueryParams(conn_, text.c_str(), n, nullptr, v, len, fmt,
                              /*resultFormat=*/0) != 1) {
          return nullptr;
        }
        return Await();
      });
}

Status PgConn::ExecScript(std::string_view sql) {
  const std::string text(sql);
  return Run("PostgreSQL", {}, nullptr,
             [&](const char* const*, const int*, const int*) -> PGresult* {
               if (PQsendQuery(conn_, text.c_str()) != 1) return nullptr;
               return Await();
             });
}

Status PgConn::Prepare(const std::string& name, std::string_view sql) {
  const std::string text(sql);
  return Run(
      "PostgreSQL", {}, nullptr,
      [&](const char* const*, const int*, const int*) -> PGresult* {
        if (PQsendPrepare(conn_, name.c_str(), text.c_str(), 0, nullptr) != 1) {
          return nullptr;
        }
        return Await();
      });
}

Status PgConn::ForgetPrepared() {
  WIZQ_RETURN_IF_ERROR(Exec("DEALLOCATE ALL"));
  prepared_.clear();
  return Status::OK();
}

Status PgConn::ExecPrepared(const std::string& name,
                            const std::vector<PgParam>& params,
                            PgResult* result) {
  const int n = static_cast<int>(params.size());
  return Run(
      "PostgreSQL", params, result,
      [&](const char* const* v, const int* len, const int* fmt) -> PGresult* {
        if (PQsendQueryPrepared(conn_, name.c_str(), n, v, len, fmt, 0) != 1) {
          return nullptr;
        }
        return Await();
      });
}

Status PgConn::Begin() { return Exec(kBeginSql); }

Status PgConn::Commit(const std::function<void()>& after_send) {
  const bool lost_before = lost_;
  PgResult r;
  const Status s =
      Run("PostgreSQL", {}, &r,
          [&](const char* const*, const int*, const int*) -> PGresult* {
            return SendCommit(after_send);
          });
  if (!s.ok()) {
    if (lost_before || last_error_.kind != PgErrorKind::kConnectionLost) {
      return s;
    }
    last_error_.kind = PgErrorKind::kCommitUnknown;
    std::string why = s.message();
    const std::string_view prefix = "PostgreSQL: ";
    if (why.compare(0, prefix.size(), prefix) == 0) why.erase(0, prefix.size());
    return Status::IOError(
        "COMMIT in flight: the transaction may or may not have committed "
        "(re-read before acting): " +
        why);
  }
  if (r.command() != "COMMIT") {
    last_error_ = {PgErrorKind::kOther, ""};
    return Status::Conflict(
        "COMMIT: the transaction was rolled back (a statement in it had "
        "failed)");
  }
  return Status::OK();
}

// As PQexec("COMMIT"), with `after_send` between sending and reading.
PGresult* PgConn::SendCommit(const std::function<void()>& after_send) {
  if (PQsendQuery(conn_, "COMMIT") != 1) return nullptr;
  if (after_send) after_send();
  return Await();
}

PGresult* PgConn::Await() {
  using Clock = std::chrono::steady_clock;
  timed_out_ = false;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(answer_timeout_ms_);
  PGresult* kept = nullptr;
  while (true) {
    while (PQisBusy(conn_)) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
#ifdef WIZQ_MUTANT_NO_KEEPALIVES
      // Mutant (tests/machines/torture, make torture-mutants): no answer
      // timeout either (with keepalives, the session's liveness checks).
      if (false) {
#else
      if (left.count() <= 0) {
#endif
        timed_out_ = true;
        PQclear(kept);
        // Said at once to whatever listens: the server's backend, if it
        // is only slow, sees the session end (client_connection_check_
        // interval) and lets go of its locks.
        shutdown(PQsocket(conn_), SHUT_RDWR);
        return nullptr;
      }
      pollfd p = {PQsocket(conn_), POLLIN, 0};
      if (p.fd < 0) break;
      const int r =
          poll(&p, 1, static_cast<int>(left.count() > 0 ? left.count() : 1000));
      if (r < 0 && errno != EINTR) break;
      // A failed read leaves the connection bad: PQgetResult says why.
      if (r > 0 && PQconsumeInput(conn_) == 0) break;
    }
    PGresult* res = PQgetResult(conn_);
    if (res == nullptr) return kept;
    // As PQexec: the last result, but an error is kept over later ones.
    if (kept != nullptr && PQresultStatus(kept) == PGRES_FATAL_ERROR) {
      PQclear(res);
      continue;
    }
    PQclear(kept);
    kept = res;
  }
}

Status PgConn::Rollback() { return Exec("ROLLBACK"); }

bool PgConn::in_transaction() const {
  const PGTransactionStatusType t = PQtransactionStatus(conn_);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

std::string PgConn::QuoteIdentifier(std::string_view name) const {
  char* quoted = PQescapeIdentifier(conn_, name.data(), name.size());
  if (quoted == nullptr) return std::string();
  std::string out(quoted);
  PQfreemem(quoted);
  return out;
}

Status PgConn::Listen(std::string_view channel) {
  const std::string quoted = QuoteIdentifier(channel);
  if (quoted.empty()) {
    return Status::InvalidArgument("LISTEN: not a valid channel name");
  }
  return Exec("LISTEN " + quoted);
}

Status PgConn::Notify(std::string_view channel, std::string_view payload) {
  const PgStatement s = NotifyStatement(channel, payload);
  return Exec(s.sql, s.params);
}

PgStatement PgConn::NotifyStatement(std::string_view channel,
                                    std::string_view payload) {
  return {"SELECT pg_notify($1, $2)", {channel, payload}};
}

Status PgConn::WaitForNotifications(std::chrono::milliseconds timeout,
                                    std::vector<PgNotification>* out) {
  out->clear();
  if (lost_) return LostStatus("waiting for notifications");
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    if (PQconsumeInput(conn_) == 0 || PQstatus(conn_) == CONNECTION_BAD) {
      return Fail("waiting for notifications", nullptr);
    }
    while (PGnotify* n = PQnotifies(conn_)) {
      out->push_back({n->relname, n->extra, n->be_pid});
      PQfreemem(n);
    }
    if (!out->empty()) return Status::OK();
    // Rounded up: the wait never ends before the timeout.
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Status::OK();
    pollfd p = {PQsocket(conn_), POLLIN, 0};
    if (p.fd < 0) return Fail("waiting for notifications", nullptr);
    const int r = poll(
        &p, 1,
        static_cast<int>(std::min<int64_t>(left.count(), 24 * 3600 * 1000)));
    if (r < 0 && errno != EINTR) {
      return Status::IOErrorFromErrno("poll", "the store's socket", errno);
    }
  }
}

Status PgConn::TryAdvisoryLock(int32_t space, int32_t key, bool* acquired) {
  PgResult r;
  WIZQ_RETURN_IF_ERROR(
      Exec("SELECT pg_try_advisory_lock($1::int4, $2::int4) AS locked",
           {space, key}, &r));
  *acquired = r.GetBool(0, "locked");
  return Status::OK();
}

Status PgConn::AdvisoryUnlock(int32_t space, int32_t key, bool* released) {
  PgResult r;
  WIZQ_RETURN_IF_ERROR(
      Exec("SELECT pg_advisory_unlock($1::int4, $2::int4) AS released",
           {space, key}, &r));
  *released = r.GetBool(0, "released");
  return Status::OK();
}

Status PgConn::Ping() { return Exec("SELECT 1"); }

PgTxn::~PgTxn() {
  if (!done_ && conn_->in_transaction() && !conn_->lost()) {
    // On an early return the transaction is abandoned; if ROLLBACK fails
    // the session is gone, and the server rolls back by itself.
    conn_->Rollback().IgnoreError();
  }
}

Status PgTxn::Commit() {
  done_ = true;
  return conn_->Commit();
}

}  // namespace wizq
