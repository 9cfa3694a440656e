// PgConn::ExecPipeline: several statements answered in one round trip
// (libpq's pipeline mode). A transaction of the store is a few dozen
// statements (docs/POSTGRES.md, "Round trips"); sent one by one, each
// waits for the server and back, which costs more than running them.
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "queue/pg/pg_conn.h"

namespace wizq {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Status PgConn::ExecPipeline(const std::vector<PgStatement>& statements,
                            std::vector<PgResult>* results) {
  static const PgStatement kGeneric = {std::string(kPgGenericPlansSql), {true}};
  static const PgStatement kCustom = {std::string(kPgCustomPlansSql), {true}};
  // What is sent: each generic statement between its settings; at[i] is
  // where statement i went.
  std::vector<const PgStatement*> sent;
  std::vector<size_t> at;
  for (const PgStatement& s : statements) {
    if (s.generic) sent.push_back(&kGeneric);
    at.push_back(sent.size());
    sent.push_back(&s);
    if (s.generic) sent.push_back(&kCustom);
  }
  std::vector<PgResult> kept(sent.size());
  for (size_t first = 0; first < sent.size(); first += kPgPipelineChunk) {
    const size_t n = std::min(kPgPipelineChunk, sent.size() - first);
    WIZQ_RETURN_IF_ERROR(
        PipelineChunk(sent.data() + first, n, kept.data() + first));
  }
  if (results != nullptr) {
    results->clear();
    for (size_t i : at) results->push_back(std::move(kept[i]));
  }
  return Status::OK();
}

Status PgConn::PipelineChunk(const PgStatement* const* statements, size_t n,
                             PgResult* results) {
  if (lost_) return LostStatus("PostgreSQL");
  // Prepared (a round trip each, once per session) and bound first: a
  // refused parameter sends nothing.
  std::vector<std::string> names(n);
  std::vector<Bound> bound(n);
  for (size_t i = 0; i < n; i++) {
    if (!statements[i]->planned) {
      WIZQ_RETURN_IF_ERROR(PreparedName(
          statements[i]->sql, statements[i]->params.size(), &names[i]));
    }
    WIZQ_RETURN_IF_ERROR(Bind("PostgreSQL", statements[i]->params, &bound[i]));
  }
  if (PQenterPipelineMode(conn_) != 1) return Fail("PostgreSQL", nullptr);
  bool sent = true;
  for (size_t i = 0; i < n && sent; i++) {
    const Bound& b = bound[i];
    const int count = static_cast<int>(b.values.size());
    sent = names[i].empty()
               ? PQsendQueryParams(conn_, statements[i]->sql.c_str(), count,
                                   nullptr, b.values.data(), b.lengths.data(),
                                   b.formats.data(), 0) == 1
               : PQsendQueryPrepared(conn_, names[i].c_str(), count,
                                     b.values.data(), b.lengths.data(),
                                     b.formats.data(), 0) == 1;
  }
  // A failed send: the socket is gone (Fail with no result says so).
  if (!sent || PQpipelineSync(conn_) != 1) return Fail("PostgreSQL", nullptr);
  return ReadPipeline(n, results);
}

// Each statement's result, then the sync's. After a failed statement the
// server skips the rest up to the sync (PGRES_PIPELINE_ABORTED each).
Status PgConn::ReadPipeline(size_t n, PgResult* results) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(answer_timeout_ms_);
  Status first;
  size_t i = 0;
  for (int nulls = 0;;) {
    PGresult* res = NextResult(deadline);
    if (res == nullptr) {
      if (timed_out_ || PQstatus(conn_) == CONNECTION_BAD || ++nulls > 2) {
        // No answer: Run says why as for one statement (the answer
        // timeout, or the session lost), and marks the session lost, also
        // after a statement failed (its error is the answer then).
        Status gone = Run("PostgreSQL", {}, nullptr,
                          [](const char* const*, const int*, const int*) {
                            return static_cast<PGresult*>(nullptr);
                          });
        return first.ok() ? gone : first;
      }
      continue;  // between two statements' answers
    }
    nulls = 0;
    const ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_PIPELINE_SYNC) {
      PQclear(res);
      break;
    }
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ||
        st == PGRES_EMPTY_QUERY) {
      if (i < n)
        results[i] = PgResult(res);
      else
        PQclear(res);
    } else if (st != PGRES_PIPELINE_ABORTED && first.ok()) {
      first = Fail("PostgreSQL", res);
      if (lost_) return first;
    } else {
      PQclear(res);
    }
    i++;
  }
  PQexitPipelineMode(conn_);
  if (first.ok()) last_error_ = {};
  return first;
}

PGresult* PgConn::NextResult(Clock::time_point deadline) {
  timed_out_ = false;
  while (PQisBusy(conn_)) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out_ = true;
      shutdown(PQsocket(conn_), SHUT_RDWR);  // as Await: said at once
      return nullptr;
    }
    pollfd p = {PQsocket(conn_), POLLIN, 0};
    if (p.fd < 0) break;
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno != EINTR) break;
    if (r > 0 && PQconsumeInput(conn_) == 0) break;
  }
  return PQgetResult(conn_);
}

}  // namespace wizq
