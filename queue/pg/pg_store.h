// PgStore: the Store contract (queue/store.h) on PostgreSQL (SPEC §14).
// Internal to the store; callers open it through Store::Open with a
// database location. docs/POSTGRES.md describes the schema, and
// docs/ARCHITECTURE.md how each verb maps to SQL.
//
// One run is one row of `runs` (named by its run_id; an archived run keeps
// its row with archived_at set), its tasks one row each, its events rows of
// `events` with a gap-free seq. Every transaction locks the run's row
// first, so the transitions of one run are serialised and commit in seq
// order; runs do not contend. A transaction reads only the rows it
// touches (PgWork), so no process holds the whole run.
//
// Connections: `conn_` for transactions and reads (a session found lost
// is re-opened before a transaction or a read starts, never inside a
// transaction); a worker's `live_`, holding its liveness lock (a session
// advisory lock: losing it stops the worker's claiming; it is taken back
// on a new session only after a server restart that nobody acted on,
// pg_live.cc) and renewing its claims' leases from a thread; `listen_`
// for WaitForChange's LISTEN.
#ifndef WIZQ_QUEUE_PG_PG_STORE_H_
#define WIZQ_QUEUE_PG_PG_STORE_H_

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "queue/pg/pg_conn.h"
#include "queue/pg/pg_migrate.h"  // kPgDefaultSchema
#include "queue/pg/pg_work.h"
#include "queue/store.h"

namespace wizq {

class PgStore : public Store {
 public:
  static Status Open(const StoreOptions& options, std::unique_ptr<Store>* out,
                     OpenReport* report);
  // The schema that holds the store's tables: o.schema, or wizq's default.
  static std::string SchemaOf(const StoreOptions& o) {
    return o.schema.empty() ? std::string(kPgDefaultSchema) : o.schema;
  }
  // A session to o.location whose schema is this wizq's: created or
  // upgraded when absent or older (`create`), else NotFound when absent
  // and refused when older or newer.
  static Status Connect(const StoreOptions& o, const char* application,
                        bool create, std::unique_ptr<PgConn>* conn);
  // The options of a session of the store for `o`, named `application`:
  // its idle_in_transaction_session_timeout is kPgRunIdleInTransactionMs.
  // A process frozen or cut off inside a transaction holds the run's row,
  // which every transaction and renewal of the run locks first; the server
  // ends that session before anyone's claims lapse.
  static PgConnOptions SessionOptions(const StoreOptions& o,
                                      const char* application);
  // Store::ListAll on a database: every run_id's runs.
  static Status ListAll(const StoreOptions& options, bool archived,
                        std::vector<RunSummary>* runs);
  ~PgStore() override;

  Status Close() override;
  Status Transact(const std::function<Status(StoreTxn&)>& fn) override;
  Status GetRun(RunInfo* run) override;
  Status GetTask(int64_t id, Task* task) override;
  Status ListTasks(const TaskFilter& filter, std::vector<Task>* out) override;
  Status Counts(RunCounts* counts) override;
  Status ReadEvents(int64_t after_seq, size_t max,
                    std::vector<EventRecord>* events) override;
  Status WaitForChange(int64_t after_seq, int timeout_ms,
                       int64_t* seq) override;
  Status Workers(std::vector<WorkerInfo>* workers) override;
  Status ListRuns(std::vector<RunRef>* runs) override;
  Status OpenRun(const RunRef& run, std::unique_ptr<Store>* out) override;
  Status WhileCurrent(const std::function<Status()>& fn) override;
  Status RenewHeldLease(int64_t id, std::string_view token, int64_t lease_ms,
                        int64_t* expires_ms, int64_t* from_mono_ms) override;
  const std::string& worker_id() const override { return worker_id_; }
  std::string DisplayLocation() const override;
  int64_t LocalDeadlineMs() const override;
  void TakeLostClaims(std::vector<int64_t>* ids) override;
  Status Liveness() const override;

  // --- For PgStoreTxn (queue/pg/pg_txn.cc).
  // A claim this worker made: its attempt and fencing token; `leased`: an
  // agent's claim, renewed by the agent, not by this worker's proofs.
  struct Held {
    int attempt = 0;
    std::string token;
    bool leased = false;
  };
  const std::string& host_key() const { return host_key_; }
  int64_t worker_lease_ms() const { return worker_lease_ms_; }
  // Whether this worker still holds its liveness lock (a worker that lost
  // it claims nothing more).
  bool live() const { return !live_lost_.load(); }
  // The key of this worker's liveness lock; 0 if it holds none.
  int32_t lock_key() const { return lock_key_; }
  bool HeldByMe(const PgTask& t) const;
  // Adds the claims found lost and not yet taken (TakeLostClaims): this
  // worker claims none of them again until its caller has dropped the old
  // attempt (the run loop knows tasks by id).
  void AddUntakenLost(std::vector<int64_t>* ids);
  // MonoMs when the transaction under way got the run's row (0: none).
  int64_t run_held_since_mono_ms() const { return txn_began_ms_.load(); }

 private:
  PgStore(const StoreOptions& options, std::unique_ptr<PgConn> conn);

  // queue/pg/pg_store_open.cc
  Status OpenByMode(OpenReport* report);
  Status FindCurrent(PgRun* run, bool* found);
  Status StartFresh(const PgRun* archived, const std::string& reason,
                    OpenReport* report);
  Status ResumeRun(PgRun* run, OpenReport* report);
  Status AttachRun(PgRun* run, OpenReport* report);
  Status ArchiveRun(const PgRun& run, const std::string& reason);
  Status StageRetries(PgWork* w, OpenReport* report);
  Status Register(int64_t run);
  Status LiveWorkers(int64_t run, std::vector<WorkerInfo>* live);

  // queue/pg/pg_store.cc
  Status OnSession(const std::function<Status()>& fn);
  // Begins a transaction that holds the run's row. `locked_mono`, when
  // given, is set to MonoMs once the row is held and before the store's
  // now() is read: what the transaction claims holds from no earlier.
  // `also` runs right after, in the same round trip (results in *got).
  Status Begin(int64_t run, PgRun* locked, int64_t* now_ms,
               std::atomic<int64_t>* locked_mono = nullptr,
               std::vector<PgStatement> also = {},
               std::vector<PgResult>* got = nullptr);
  Status LockRun(int64_t run, PgRun* locked, int64_t* now_ms,
                 std::atomic<int64_t>* locked_mono,
                 std::vector<PgStatement> also, std::vector<PgResult>* got);
  Status TryTransact(const std::function<Status(StoreTxn&)>& fn,
                     int64_t give_up_ms, bool* again);
  // Up to this many tasks a run is small: a session's generic plans made
  // then are made again once it is not (RemakeSmallPlans).
  static constexpr int64_t kPgSmallRunTasks = 1024;
  Status RemakeSmallPlans(const PgRun& run);
  Status Commit(PgWork* w, int64_t give_up_ms, bool* again);
  Status ResolveCommit(const PgWork& w, const std::string& xid,
                       int64_t give_up_ms, const Status& lost, bool* again);
  Status Commit(PgWork* w) {  // opening and closing: not run again
    bool again = false;
    return Commit(w, MonoMs() + worker_lease_ms_, &again);
  }
  Status EnsureConn();

  // queue/pg/pg_live.cc
  static int64_t MonoMs();  // CLOCK_MONOTONIC, as the local deadline's
  void RenewLoop();
  // Claim ids with their fencing tokens.
  using Tokens = std::map<int64_t, std::string>;
  Status RenewClaims();
  Status RenewClaims(Tokens* unconfirmed);  // holds live_mu_
  Status Renew(PgConn* c, Tokens* renewed);
  PgStatement ExtendStatement(const std::vector<int64_t>* ids) const;
  // This worker's claims that its proofs of life renew (not the leased).
  Tokens WorkerClaims();
  // A renewal begun at `began` of `known` (WorkerClaims before it) renewed
  // `renewed`: the proof of life it makes counts, unless claims it did not
  // renew are still held here: those are then in *unconfirmed.
  void NoteRenewal(int64_t began, const Tokens& known, const Tokens& renewed,
                   Tokens* unconfirmed);
  // Holds claims_mu_: the local deadline moves on to `began`, unless a lost
  // claim was not taken yet (TakeLostClaims).
  void NoteProof(int64_t began);
  // Claims a renewal could not confirm, judged while no transaction of
  // this worker is under way (the caller holds mu_): those still held are
  // lost.
  void ConfirmLost(const Tokens& unconfirmed);
  // In a transaction, `w` cached the rows this worker holds (PgTaskRows-
  // Statement's, for the worker, before anything else): the claims of this
  // worker not among them as its own are lost.
  void FindLost(const PgWork& w);
  // Holds claims_mu_ (and mu_): claim `id` is no longer this worker's.
  void Lose(int64_t id);
  Status Relive(Tokens* unconfirmed);
  Status WhyNotRelive(PgConn* c, bool ended_here, std::string* why);

  // queue/pg/pg_reclaim.cc
  // `scanned`: ReclaimScan's rows, read already (else read here).
  Status Reclaim(PgWork* w, Reclaimed* out, const PgResult* scanned = nullptr);
  PgStatement ReclaimScan() const;
  bool Reclaimable(const PgTask& t, int64_t now,
                   const std::set<std::string>* alive, bool* ask) const;
  Status PutBack(PgWork* w, PgTask* t, Reclaimed* out);
  Status TimeOut(PgWork* w, PgTask* t, Reclaimed* out);
  bool OnThisHost(const std::string& claim_host) const;
  bool SharesWorkspace(const std::string& claim_host) const;

  std::string Sql(std::string_view sql) const {
    return PgSchemaSql(sql, quoted_);
  }

  const StoreOptions options_;
  std::string schema_, quoted_;
  std::string host_key_;
  int64_t worker_lease_ms_ = kPgDefaultWorkerLeaseMs;

  std::mutex mu_;  // serialises calls; guards conn_ and held_
  // Guards held_'s changes (made under mu_ too) for the renewer, which
  // reads it without waiting for a transaction, and lost_.
  std::mutex claims_mu_;
  std::unique_ptr<PgConn> conn_;
  int64_t run_ = 0;  // the run's row
  // Transact is refused: read-only, a finished run, closed, archived.
  Status writable_;
  std::string worker_id_;  // "" without a worker (leases only, reader)
  std::map<int64_t, Held> held_;
  // Claims found lost (given to another once they lapsed) and not yet
  // taken by TakeLostClaims: no proof of life counts meanwhile.
  std::vector<int64_t> lost_;
  Reclaimed reclaimed_;

  std::unique_ptr<PgConn> live_;  // guarded by live_mu_
  std::mutex live_mu_;
  std::atomic<bool> live_lost_{false};  // claims nothing while set
  std::atomic<bool> live_gone_{false};  // and never takes it back
  std::string gone_why_;                // written before live_gone_
  int64_t live_lost_at_ms_ = 0;         // MonoMs; guarded by live_mu_
  // How long a liveness session ended here may keep its lock on the server
  // before the worker counts it as taken by another session.
  static constexpr int64_t kPgEndedHereMs = 3000;
  int32_t lock_key_ = 0;
  // As of the last proof of life (registration, a renewal): the run's
  // next seq and the server's start time. Guarded by live_mu_.
  int64_t live_seq_ = 0;
  std::string server_up_;
  // CLOCK_MONOTONIC ms when the last proof of life that renewed every
  // claim of this worker began (LocalDeadlineMs).
  std::atomic<int64_t> proof_mono_ms_{0};
  // MonoMs when the transaction under way got the run's row (0: none, or
  // still waiting for it: it claimed nothing yet), for renewals.
  std::atomic<int64_t> txn_began_ms_{0};
  std::thread renewer_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;

  std::mutex listen_mu_;
  std::unique_ptr<PgConn> listen_;
};

}  // namespace wizq

#endif  // WIZQ_QUEUE_PG_PG_STORE_H_
