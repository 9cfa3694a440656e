// PgConn: one PostgreSQL session, a small RAII layer over libpq for the
// PostgreSQL store (SPEC §14). Statements take bound parameters only
// (PgParam); failures come back as a Status whose message never holds the
// store's password, with the kind and SQLSTATE in last_error().
//
// A session that is lost stays lost: PgConn never reconnects by itself
// (a session-level advisory lock or LISTEN would silently be gone on the
// new one), every later call fails with kConnectionLost, and the caller
// opens a new PgConn. A session lost while COMMIT was in flight is
// kCommitUnknown: the transaction may have committed or not.
//
// Not thread-safe: one thread uses a PgConn at a time.
#ifndef WIZQ_QUEUE_PG_PG_CONN_H_
#define WIZQ_QUEUE_PG_PG_CONN_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "queue/pg/pg_result.h"
#include "util/status.h"

typedef struct pg_conn PGconn;

namespace wizq {

// wizq's connection settings (anchors §2.6, §4.3). Client side: a dead
// server is noticed by TCP keepalives after idle + interval * count
// seconds, and unacknowledged data is given up after tcp_user_timeout.
inline constexpr int kPgConnectTimeoutSeconds = 10;
inline constexpr int kPgKeepalivesIdleSeconds = 10;
inline constexpr int kPgKeepalivesIntervalSeconds = 5;
inline constexpr int kPgKeepalivesCount = 3;
inline constexpr int kPgTcpUserTimeoutMs = 30000;
// Per session: a transaction left open by a frozen worker ends (and its
// row locks go) after a minute; no statement of the store waits on a lock
// or runs for long.
inline constexpr int kPgIdleInTransactionTimeoutMs = 60000;
// A run's sessions (PgStore::SessionOptions): their transactions lock the
// run's row, so one left open ends after 2 s, well within any lease.
inline constexpr int kPgRunIdleInTransactionMs = 2000;
inline constexpr int kPgLockTimeoutMs = 10000;
inline constexpr int kPgStatementTimeoutMs = 60000;
// Client side, for every statement: an answer that has not come after
// this long ends the session as lost. Keepalives and tcp_user_timeout do
// not see a peer whose kernel still acknowledges but that never answers
// (a half-open connection behind a proxy, a hung server): this does.
// Longer than the server's own limits, so a slow answer is not cut.
inline constexpr int kPgAnswerTimeoutMs = kPgStatementTimeoutMs + 10000;

struct PgConnOptions {
  // Shown in pg_stat_activity: "wizq run", "wizq db migrate"...
  std::string application_name = "wizq";
  int connect_timeout_s = kPgConnectTimeoutSeconds;
  int keepalives_idle_s = kPgKeepalivesIdleSeconds;
  int keepalives_interval_s = kPgKeepalivesIntervalSeconds;
  int keepalives_count = kPgKeepalivesCount;
  int tcp_user_timeout_ms = kPgTcpUserTimeoutMs;
  // Of the hosts a location lists, connect to a primary (anchors §2.10).
  std::string target_session_attrs = "read-write";
  int idle_in_transaction_timeout_ms = kPgIdleInTransactionTimeoutMs;
  int lock_timeout_ms = kPgLockTimeoutMs;
  int statement_timeout_ms = kPgStatementTimeoutMs;
  // 0: a long-lived idle session (a liveness lock, a listener) is never
  // ended for idling, whatever the server's default says.
  int idle_session_timeout_ms = 0;
  int answer_timeout_ms = kPgAnswerTimeoutMs;
};

// Statements sent before a sync (PgConn::ExecPipeline). libpq in blocking
// mode waits on its own writes while a pipeline is sent; the server's
// answers to what it has run meanwhile must fit in the socket's buffers,
// or both sides wait. An answer here is a few dozen bytes (a row count)
// or a claim's rows.
inline constexpr size_t kPgPipelineChunk = 64;

// One statement of a pipeline (PgConn::ExecPipeline).
struct PgStatement {
  std::string sql;
  std::vector<PgParam> params;
  bool planned = false;  // never prepared, as ExecPlanned
  // Prepared, and run on a generic plan made without sequential scans,
  // bitmap scans or sorts (kPgGenericPlansSql before it, inside a
  // transaction, kPgCustomPlansSql after): the plan of a scan in index
  // order whatever the statistics say (docs/POSTGRES.md, "Plans and dead
  // rows").
  bool generic = false;
};

// The settings of a `generic` statement, for this transaction ($1: true),
// and back to the session's defaults.
inline constexpr std::string_view kPgGenericPlansSql =
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', $1), "
    "set_config('enable_seqscan', 'off', $1), set_config('enable_bitmapscan', "
    "'off', $1), set_config('enable_sort', 'off', $1)";
inline constexpr std::string_view kPgCustomPlansSql =
    "SELECT set_config('plan_cache_mode', NULL, $1), set_config("
    "'enable_seqscan', NULL, $1), set_config('enable_bitmapscan', NULL, $1), "
    "set_config('enable_sort', NULL, $1)";

// A notification received on a LISTENed channel.
struct PgNotification {
  std::string channel;
  std::string payload;
  int sender_pid = 0;
};

class PgConn {
 public:
  // Connects to `location` (a postgresql:// URL or a libpq keyword string;
  // "" means libpq's defaults: PGHOST, PGUSER...). The connection settings
  // of `options` come first, so that the location may override them
  // (`connect_timeout=3`); client_encoding is always UTF8. The session
  // settings are then set. InvalidArgument if libpq cannot parse the
  // location, IOError if the server cannot be reached or refuses,
  // NotSupported for a server older than PostgreSQL 15.
  // InvalidArgument, naming what is wrong, unless libpq can read
  // `location` (Open checks it first; a command line checks it before it
  // does anything).
  static Status CheckLocation(std::string_view location);
  static Status Open(std::string_view location, const PgConnOptions& options,
                     std::unique_ptr<PgConn>* out);
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // One statement with its parameters ($1...); `result` (may be null) gets
  // its rows.
  Status Exec(std::string_view sql, const std::vector<PgParam>& params = {},
              PgResult* result = nullptr);
  // The same, never prepared: planned on each run with its values and the
  // statistics of the day. For cheap statements whose best plan depends on
  // the data (the dedup lookup, the pending floor's): a generic plan, which
  // PostgreSQL picks for a prepared statement after five runs, is made
  // once — maybe while the run's tables were empty (docs/POSTGRES.md,
  // "Plans and dead rows").
  Status ExecPlanned(std::string_view sql, const std::vector<PgParam>& params,
                     PgResult* result);
  // Several statements sent together and answered in one round trip
  // (libpq's pipeline mode), each prepared as Exec prepares it, in order;
  // past 64 statements, in several round trips of 64. They run in the
  // caller's transaction; outside one, each round trip is an implicit
  // transaction of its own (begin with BEGIN to make them one).
  // (*results)[i] (results may be null) gets statement i's rows. The first
  // statement that fails gives the Status (as Exec's); the server skips
  // the rest.
  Status ExecPipeline(const std::vector<PgStatement>& statements,
                      std::vector<PgResult>* results);
  // Several statements without parameters in one round trip (a schema
  // migration's DDL: constant text, never built from values).
  Status ExecScript(std::string_view sql);
  // A prepared statement of this session, then run by name.
  Status Prepare(const std::string& name, std::string_view sql);
  Status ExecPrepared(const std::string& name,
                      const std::vector<PgParam>& params,
                      PgResult* result = nullptr);

  // Forgets every prepared statement of the session (DEALLOCATE ALL):
  // Exec prepares each again on its next use, and PostgreSQL makes its
  // generic plan anew after five more runs, with the tables as they are
  // then (docs/POSTGRES.md, "Plans and dead rows").
  Status ForgetPrepared();
  // Whether the session's generic plans may date from a small run (kept
  // for PgStore, which sets it and calls ForgetPrepared).
  bool plans_small() const { return plans_small_; }
  void set_plans_small(bool small) { plans_small_ = small; }

  // BEGIN ISOLATION LEVEL READ COMMITTED.
  static constexpr std::string_view kBeginSql =
      "BEGIN ISOLATION LEVEL READ COMMITTED";
  Status Begin();
  // COMMIT. Conflict if the server rolled the transaction back instead (a
  // statement in it had failed); IOError with last_error().kind ==
  // kCommitUnknown if the session was lost before COMMIT's answer came.
  // `after_send`, if given, is called once COMMIT was handed to the
  // kernel, before its answer is read (a crash point).
  Status Commit(const std::function<void()>& after_send = nullptr);
  Status Rollback();
  bool in_transaction() const;

  // LISTEN on `channel` (a name, quoted here); notifications are then
  // collected by WaitForNotifications.
  Status Listen(std::string_view channel);
  // pg_notify(channel, payload): delivered at the commit of the
  // transaction it runs in (at once outside one).
  Status Notify(std::string_view channel, std::string_view payload);
  // The same as a statement of a pipeline.
  static PgStatement NotifyStatement(std::string_view channel,
                                     std::string_view payload);
  // Waits up to `timeout` for at least one notification and returns those
  // received so far in *out (empty at the timeout).
  Status WaitForNotifications(std::chrono::milliseconds timeout,
                              std::vector<PgNotification>* out);

  // Session-level advisory locks, two-int form (pg_locks shows classid =
  // space, objid = key, objsubid = 2). Held until unlocked or the session
  // ends.
  Status TryAdvisoryLock(int32_t space, int32_t key, bool* acquired);
  Status AdvisoryUnlock(int32_t space, int32_t key, bool* released);

  // A round trip: OK while the session lives.
  Status Ping();

  // `name` quoted as an SQL identifier, for DDL (a schema's name), which
  // cannot take parameters.
  std::string QuoteIdentifier(std::string_view name) const;

  int backend_pid() const { return backend_pid_; }
  bool lost() const { return lost_; }
  // Lost because this side gave up waiting for an answer (answer_timeout):
  // the server may not know yet, and its backend may hold on to its locks
  // for a while.
  bool ended_here() const { return ended_here_; }
  // The kind and SQLSTATE of the last failed call.
  const PgError& last_error() const { return last_error_; }
  // The location with its password removed (pg_location.h).
  const std::string& display_location() const { return display_; }

 private:
  PgConn(PGconn* conn, std::vector<std::string> secrets, std::string display,
         int answer_timeout_ms);
  // The answer to what was just sent (PQexec's result), waiting at most
  // answer_timeout_ms_; nullptr with timed_out_ set past it.
  PGresult* Await();
  Status ApplySessionSettings(const PgConnOptions& options);
  PGresult* SendCommit(const std::function<void()>& after_send);
  // Parameters as libpq takes them; InvalidArgument for a text one with a
  // NUL byte.
  struct Bound {
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
  };
  Status Bind(const char* what, const std::vector<PgParam>& params, Bound* out);
  // The name Exec runs `sql` under, prepared on first use ("" once the
  // session holds kMaxPrepared: planned on each run then).
  Status PreparedName(const std::string& sql, size_t params, std::string* name);
  // queue/pg/pg_pipeline.cc: at most kPgPipelineChunk statements and a sync,
  // then their answers.
  Status PipelineChunk(const PgStatement* const* statements, size_t n,
                       PgResult* results);
  Status ReadPipeline(size_t n, PgResult* results);
  // The next result of a pipeline, waiting at most until `deadline`:
  // PQgetResult's (null between statements); null with timed_out_ set
  // past it.
  PGresult* NextResult(std::chrono::steady_clock::time_point deadline);
  Status Run(const char* what, const std::vector<PgParam>& params,
             PgResult* result,
             const std::function<PGresult*(const char* const*, const int*,
                                           const int*)>& send);
  // The Status of a failed result (may be null) of `what`, recording
  // last_error_.
  Status Fail(const char* what, PGresult* res);
  Status LostStatus(const char* what);
  std::string Scrub(std::string text) const;

  PGconn* conn_;
  std::vector<std::string> secrets_;  // kept out of every message
  std::string display_;
  int backend_pid_ = 0;
  bool lost_ = false;
  int answer_timeout_ms_;
  bool timed_out_ = false;
  bool ended_here_ = false;
  PgError last_error_;
  // Exec's prepared statements: text -> name (wizq_<n>).
  static constexpr size_t kMaxPrepared = 256;
  std::unordered_map<std::string, std::string> prepared_;
  bool plans_small_ = false;
};

// Rolls back the open transaction of `conn` when it goes out of scope
// before Commit() (an early return on an error).
class PgTxn {
 public:
  explicit PgTxn(PgConn* conn) : conn_(conn) {}
  ~PgTxn();
  PgTxn(const PgTxn&) = delete;
  PgTxn& operator=(const PgTxn&) = delete;
  Status Begin() { return conn_->Begin(); }
  Status Commit();

 private:
  PgConn* conn_;
  bool done_ = false;
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_PG_PG_CONN_H_
