// The history of the machines torture and its checker (docs/RELIABILITY.md,
// "Many machines under faults").
//
// A history has three parts, none of which compares wall clocks across
// machines (they are off by up to an hour on purpose):
//
//   - the ledger: JSON lines the task bodies append (tests/machines/
//     torture/body.cc): `start`, `end` and `overlap` of an attempt, each
//     with machine `m`, `run`, `task`, `attempt`, `pid` and `mono`
//     (CLOCK_MONOTONIC ms, shared by every machine); and the driver's
//     `calibration` records: a machine's monotonic clock read between two
//     of the host's (`before` <= `mono` <= `after`, else the clock is not
//     shared and the history means nothing);
//   - the faults the driver injected (Fault): kind, machine ("" = every
//     machine: the database), monotonic start and end, and whether the
//     fault may cost an attempt its claim (`may_rerun`: a machine death, a
//     freeze or partition longer than the lease, a lost liveness session);
//   - each run's audit log, as `wizq export --format audit` prints it, and
//     its final status.
//
// CheckRun says, per run:
//   lost        a submitted task that did not complete;
//   duplicated  a task completed twice, an attempt started after the one
//               that completed (a higher attempt number), two tasks with
//               one <type, dedup_key>, two finally hooks of one owner;
//   overlapped  an `overlap` record (an attempt found the previous one's
//               flock held); one whose holder's whole machine was frozen
//               then is `overlapped_frozen_machine` (not guaranteed); one
//               whose holder is an agent over the CLI or MCP (`via`: it
//               has no local deadline) is `late_agent`;
//   stale       a completed Work or Review whose response (its Mark child:
//               machine, attempt, pid) is not its completed attempt's;
//   idle claims a claim neither started nor ended (reset, failed,
//               completed, adopted) within CheckInput::idle_claim_ms of
//               the store's clock: the store holds it for a worker that
//               does not know (a COMMIT whose reply was lost taken for not
//               committed, and claimed again). A claim is started at once,
//               or lapses and goes back within about a lease;
//   extra runs  every ledger start but the completed attempt's: matched
//               when a `may_rerun` fault hit its machine between the start
//               (less a second: the claim came before) and the task's next
//               start (the re-claim came before that); else unmatched.
#ifndef WIZQ_TESTS_MACHINES_TORTURE_HISTORY_H_
#define WIZQ_TESTS_MACHINES_TORTURE_HISTORY_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace wizq::machines {

using Json = nlohmann::json;

struct LedgerRecord {
  std::string e;     // start, end, overlap, calibration
  std::string m;     // machine (hostname)
  std::string run;   // WIZQ_RUN_ID
  std::string kind;  // the task's kind (Work, Review, ...)
  std::string via;   // "cli", "mcp": an agent with no local deadline
  int64_t task = 0;
  int64_t attempt = 0;
  int64_t pid = 0;
  int64_t mono = 0;  // ms
  Json holder;       // overlap: the record of the attempt holding the flock
  int64_t before = 0, after = 0;  // calibration: the host's clock around
  // Calibration: the machine's wall clock (ms), the host's just before it
  // was read, the offset asked for (s), the libraries mapped into the
  // probe (linked like wizq): "jemalloc,faketime", and those it should map
  // ("faketime" alone when wizq is built without jemalloc: make asan;
  // none recorded: "jemalloc,faketime").
  int64_t wall_ms = 0, host_wall_ms = 0, offset_s = 0;
  std::string libs, want_libs;
};

struct Fault {
  std::string kind;
  std::string machine;     // "" = all machines (a database fault)
  int64_t t0 = 0, t1 = 0;  // monotonic ms: injected, healed
  bool may_rerun = false;  // may legitimately cost an attempt its claim
  bool whole_machine_freeze = false;  // a freeze of every process of it
  bool occurred = true;  // false: armed (drop_commit*) but never triggered
  std::string detail;
};

// Parses the ledger's lines; a line that is not a record is an error.
std::vector<LedgerRecord> ParseLedger(const std::string& text,
                                      std::vector<std::string>* errors);

struct RunVerdict {
  std::string run;
  std::string status;  // the run's final status
  int tasks = 0;
  int lost = 0, duplicated = 0, overlapped = 0, overlapped_frozen_machine = 0;
  int stale = 0, extra_runs = 0, extra_runs_matched = 0;
  int extra_runs_unmatched = 0, flipped = 0;
  int late_agent = 0;  // overlaps whose earlier attempt was a CLI/MCP agent's
  int idle_claims = 0;
  std::vector<std::string> errors;  // one message per violation
};

struct CheckInput {
  std::string run;
  std::vector<Json> audit;  // the run's events, in order
  std::string status;       // "completed", "failed", ...
  // For flipped: the answer each Prompt task was given (by task type and
  // inputs' "q"), as the driver sent it; empty if it answered none.
  std::map<std::string, std::string> answers_given;
  // For idle claims: how long (store clock, the events' `ts`) a claim may
  // stay neither started nor ended; 0: not checked.
  int64_t idle_claim_ms = 0;
};

RunVerdict CheckRun(const CheckInput& in,
                    const std::vector<LedgerRecord>& ledger,
                    const std::vector<Fault>& faults);

// The calibration records that contradict a shared monotonic clock, or a
// machine's wall clock off by what was asked (within 5 s), with
// libfaketime loaded beside jemalloc where the offset is not 0.
std::vector<std::string> CheckCalibration(
    const std::vector<LedgerRecord>& ledger);

// True if an attempt of any run was in flight on `f.machine` (any machine
// for a database fault) at some time of [f.t0, f.t1]: a start before t1
// whose end (if any) is after t0.
bool InFlight(const Fault& f, const std::vector<LedgerRecord>& ledger);

}  // namespace wizq::machines

#endif  // WIZQ_TESTS_MACHINES_TORTURE_HISTORY_H_
