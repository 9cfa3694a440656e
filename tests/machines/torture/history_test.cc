// The machines torture's checker (history.h) on made-up histories: each
// violation it must find, and none where there is none.
#include "tests/machines/torture/history.h"

#include <gtest/gtest.h>

namespace wizq::machines {
namespace {

Json Submitted(int64_t id, const std::string& type, Json inputs,
               int64_t parent = 0, const std::string& key = "") {
  return {{"event", "task_submitted"},
          {"id", id},
          {"type", type},
          {"inputs", inputs},
          {"parent_id", parent == 0 ? Json() : Json(parent)},
          {"origin", parent == 0 ? "Initial" : "Spawned"},
          {"dedup_key", key.empty() ? type + inputs.dump() : key}};
}
Json Claimed(int64_t id, int64_t attempt) {
  return {{"event", "task_claimed"}, {"id", id}, {"attempt", attempt}};
}
Json Completed(int64_t id) { return {{"event", "task_completed"}, {"id", id}}; }

LedgerRecord Rec(const std::string& e, const std::string& m, int64_t task,
                 int64_t attempt, int64_t pid, int64_t mono) {
  LedgerRecord r;
  r.e = e, r.m = m, r.run = "r0", r.kind = "Work";
  r.task = task, r.attempt = attempt, r.pid = pid, r.mono = mono;
  return r;
}

// Task 1 (Work) completed by attempt `done` on machine m1 (pid 10 + done),
// its response the Mark task 2 naming `mark_attempt`.
struct Fixture {
  CheckInput in;
  std::vector<LedgerRecord> ledger;
  std::vector<Fault> faults;
  Fixture(int64_t done, int64_t mark_attempt) {
    in.run = "r0";
    in.status = "completed";
    in.audit = {Submitted(1, "Work", {{"i", 0}})};
    for (int64_t a = 1; a <= done; a++) in.audit.push_back(Claimed(1, a));
    in.audit.push_back(Submitted(
        2, "Mark",
        {{"of", 1}, {"m", "m1"}, {"a", mark_attempt}, {"p", 10 + mark_attempt}},
        1));
    in.audit.push_back(Completed(1));
    in.audit.push_back(Claimed(2, 1));
    in.audit.push_back(Completed(2));
    for (int64_t a = 1; a <= done; a++) {
      ledger.push_back(Rec("start", "m1", 1, a, 10 + a, 1000 * a));
      if (a == done)
        ledger.push_back(Rec("end", "m1", 1, a, 10 + a, 1000 * a + 500));
    }
  }
  RunVerdict Check() const { return CheckRun(in, ledger, faults); }
};

Fault MakeFault(const std::string& kind, const std::string& m, int64_t t0,
                int64_t t1, bool may_rerun) {
  Fault f;
  f.kind = kind, f.machine = m, f.t0 = t0, f.t1 = t1, f.may_rerun = may_rerun;
  return f;
}

TEST(MachinesHistoryTest, ACleanHistoryHasNoViolation) {
  const RunVerdict v = Fixture(1, 1).Check();
  EXPECT_TRUE(v.errors.empty()) << v.errors[0];
  EXPECT_EQ(v.tasks, 2);
  EXPECT_EQ(v.extra_runs, 0);
}

TEST(MachinesHistoryTest, ATaskThatNeverCompletedIsLostAndTheRunNotCompleted) {
  Fixture f(1, 1);
  f.in.audit.push_back(Submitted(3, "Shared", {{"s", 1}}, 1));
  f.in.status = "running";
  const RunVerdict v = f.Check();
  EXPECT_EQ(v.lost, 1);
  EXPECT_EQ(v.errors.size(), 2u);
}

TEST(MachinesHistoryTest,
     CompletedTwiceOrStartedAfterItsCompletionIsDuplicated) {
  Fixture twice(1, 1);
  twice.in.audit.push_back(Completed(1));
  EXPECT_EQ(twice.Check().duplicated, 1);
  Fixture later(1, 1);
  later.ledger.push_back(Rec("start", "m2", 1, 2, 50, 9000));
  EXPECT_EQ(later.Check().duplicated, 1);
  Fixture same_key(1, 1);
  same_key.in.audit.push_back(Submitted(3, "Shared", {{"s", 1}}, 1, "k"));
  same_key.in.audit.push_back(Submitted(4, "Shared", {{"s", 1}}, 1, "k"));
  same_key.in.audit.push_back(Completed(3));
  same_key.in.audit.push_back(Completed(4));
  EXPECT_EQ(same_key.Check().duplicated, 1);
}

TEST(MachinesHistoryTest,
     AnOverlapIsOverlappedUnlessItsHoldersMachineWasFrozen) {
  Fixture f(2, 2);
  LedgerRecord o = Rec("overlap", "m1", 1, 2, 12, 2000);
  o.holder = {{"m", "m3"}, {"attempt", 1}, {"pid", 11}};
  f.ledger.push_back(o);
  f.faults.push_back(MakeFault("stop_worker", "m3", 0, 10000, true));
  f.faults.push_back(MakeFault("partition", "m1", 500, 1500, true));
  RunVerdict v = f.Check();
  EXPECT_EQ(v.overlapped, 1);
  EXPECT_EQ(v.overlapped_frozen_machine, 0);
  f.faults.back() = MakeFault("freeze_machine", "m3", 100, 1200, true);
  f.faults.back().whole_machine_freeze = true;
  v = f.Check();
  EXPECT_EQ(v.overlapped, 0);
  EXPECT_EQ(v.overlapped_frozen_machine, 1);  // 2000 is within the thaw's grace
}

// A frozen machine's attempt must end at the thaw (its local deadline
// passed while frozen): one that runs on to its end past the thaw's grace
// overlapped the attempt started meanwhile, frozen or not.
TEST(MachinesHistoryTest, AnAttemptRunningOnPastTheThawIsOverlapped) {
  for (const int64_t end : {1500, 5000}) {
    CheckInput in;
    in.run = "r0";
    in.status = "completed";
    in.audit = {Submitted(1, "Shared", {{"s", 1}}), Claimed(1, 1),
                Claimed(1, 2), Completed(1)};
    LedgerRecord o = Rec("overlap", "m1", 1, 2, 21, 800);
    o.holder = {{"m", "m3"}, {"attempt", 1}, {"pid", 11}};
    const std::vector<LedgerRecord> ledger = {
        Rec("start", "m3", 1, 1, 11, 100), Rec("start", "m1", 1, 2, 21, 800), o,
        Rec("end", "m1", 1, 2, 21, 1800), Rec("end", "m3", 1, 1, 11, end)};
    Fault f = MakeFault("freeze_machine", "m3", 200, 1200, true);
    f.whole_machine_freeze = true;
    const RunVerdict v = CheckRun(in, ledger, {f});
    EXPECT_EQ(v.overlapped, end == 5000 ? 1 : 0) << end;
    EXPECT_EQ(v.overlapped_frozen_machine, end == 5000 ? 0 : 1) << end;
  }
}

TEST(MachinesHistoryTest, AResponseOfAnotherAttemptIsStale) {
  Fixture f(2, 1);  // attempt 2 completed, with attempt 1's response
  f.faults.push_back(MakeFault("machine_death", "m1", 1200, 1300, true));
  const RunVerdict v = f.Check();
  EXPECT_EQ(v.stale, 1);
  EXPECT_EQ(v.duplicated, 0);
}

TEST(MachinesHistoryTest, AnExtraRunIsMatchedOnlyByAFaultThatMayCostItsClaim) {
  Fixture none(2, 2);  // attempt 1 started at 1000, attempt 2 at 2000
  RunVerdict v = none.Check();
  EXPECT_EQ(v.extra_runs, 1);
  EXPECT_EQ(v.extra_runs_unmatched, 1);
  Fixture short_fault(2, 2);
  short_fault.faults.push_back(MakeFault("partition", "m1", 1200, 1500, false));
  EXPECT_EQ(short_fault.Check().extra_runs_unmatched, 1);
  Fixture other_machine(2, 2);
  other_machine.faults.push_back(
      MakeFault("partition", "m2", 1200, 1500, true));
  EXPECT_EQ(other_machine.Check().extra_runs_unmatched, 1);
  Fixture after(2, 2);  // after the re-claim's start: too late to explain it
  after.faults.push_back(MakeFault("partition", "m1", 2500, 3000, true));
  EXPECT_EQ(after.Check().extra_runs_unmatched, 1);
  Fixture matched(2, 2);
  matched.faults.push_back(MakeFault("partition", "m1", 1200, 7000, true));
  v = matched.Check();
  EXPECT_EQ(v.extra_runs_matched, 1);
  EXPECT_EQ(v.extra_runs_unmatched, 0);
  EXPECT_TRUE(v.errors.empty()) << v.errors[0];
  Fixture db(2, 2);  // a database fault hits every machine
  db.faults.push_back(MakeFault("terminate", "", 1200, 1300, true));
  EXPECT_EQ(db.Check().extra_runs_matched, 1);
}

// A claim refunded by a remote rescue before its start was recorded: its
// number is claimed again, and the completion is that later claim's.
TEST(MachinesHistoryTest, ARefundedNumberRunsAgainAndTheLaterStartCompleted) {
  CheckInput in;
  in.run = "r0";
  in.status = "completed";
  in.audit = {Submitted(1, "Shared", {{"s", 1}}), Claimed(1, 1), Claimed(1, 1),
              Completed(1)};
  std::vector<LedgerRecord> ledger = {
      Rec("start", "m1", 1, 1, 11, 1000), Rec("end", "m1", 1, 1, 11, 1200),
      Rec("start", "m2", 1, 1, 21, 7000), Rec("end", "m2", 1, 1, 21, 7200)};
  RunVerdict v = CheckRun(in, ledger, {});
  EXPECT_EQ(v.extra_runs, 1);
  EXPECT_EQ(v.extra_runs_unmatched, 1);
  EXPECT_NE(v.errors.at(0).find("on m1"), std::string::npos) << v.errors[0];
  v = CheckRun(in, ledger, {MakeFault("stop_worker", "m1", 1020, 7500, true)});
  EXPECT_EQ(v.extra_runs_matched, 1);
  EXPECT_TRUE(v.errors.empty()) << v.errors[0];
}

TEST(MachinesHistoryTest, AnAnswerRecordedOrPassedOnOtherwiseIsFlipped) {
  for (const std::string recorded : {"yes", "no"}) {
    Fixture f(1, 1);
    f.in.audit.push_back(Submitted(5, "Ask", {{"q", 0}}));
    f.in.audit.push_back(
        {{"event", "task_answered"}, {"id", 5}, {"answer", recorded}});
    f.in.audit.push_back(Completed(5));
    f.in.audit.push_back(
        Submitted(6, "Echo", {{"answer", "yes"}, {"value", {{"q", 0}}}}, 5));
    f.in.audit.push_back(Completed(6));
    f.in.answers_given["0"] = "yes";
    EXPECT_EQ(f.Check().flipped, recorded == "yes" ? 0 : 1) << recorded;
  }
}

// An agent over the CLI or MCP has no local deadline: its attempt that
// runs on past its lease, beside the next, is a late agent, not an
// overlap; a `serve` agent's is an overlap.
TEST(MachinesHistoryTest, AnAttemptOfACliOrMcpAgentPastItsLeaseIsLate) {
  for (const std::string via : {"", "cli", "mcp"}) {
    CheckInput in;
    in.run = "r0";
    in.status = "completed";
    in.audit = {Submitted(1, "Review", {{"r", 0}}), Claimed(1, 1),
                Claimed(1, 2), Completed(1)};
    std::vector<LedgerRecord> ledger = {
        Rec("start", "m1", 1, 1, 11, 1000), Rec("start", "m2", 1, 2, 21, 7000),
        Rec("end", "m1", 1, 1, 11, 8000), Rec("end", "m2", 1, 2, 21, 9000)};
    ledger[0].via = ledger[2].via = via;
    const RunVerdict v = CheckRun(in, ledger, {});
    EXPECT_EQ(v.overlapped, via.empty() ? 1 : 0) << via;
    EXPECT_EQ(v.late_agent, via.empty() ? 0 : 1) << via;
  }
}

// A claim the store holds for a worker that does not know of it (its
// COMMIT's reply was lost and it claimed again): never started, it ends
// only when its worker does. One reset within the limit is not idle.
TEST(MachinesHistoryTest, AClaimNeitherStartedNorEndedForLongIsIdle) {
  auto at = [](Json e, int64_t ts) {
    e["ts"] = ts;
    e["worker"] = "w1";
    return e;
  };
  CheckInput in;
  in.run = "r0";
  in.status = "completed";
  in.idle_claim_ms = 15000;
  in.audit = {Submitted(1, "Work", {{"i", 0}}),
              Submitted(2, "Work", {{"i", 1}}),
              at(Claimed(1, 1), 1000),
              at(Claimed(2, 1), 1000),
              at({{"event", "task_started"}, {"id", 1}}, 1100),
              at(Completed(1), 2000),
              at({{"event", "task_reset"}, {"id", 2}}, 9000),
              at(Claimed(2, 2), 9100),
              at({{"event", "task_started"}, {"id", 2}}, 9200),
              at(Completed(2), 10000)};
  RunVerdict v = CheckRun(in, {}, {});
  EXPECT_EQ(v.idle_claims, 0) << (v.errors.empty() ? "" : v.errors[0]);
  in.audit[7] = at(Claimed(2, 2), 9100);
  in.audit[8] = at({{"event", "task_started"}, {"id", 2}}, 30000);
  v = CheckRun(in, {}, {});
  EXPECT_EQ(v.idle_claims, 1);
  in.audit.resize(8);  // claimed again, and nothing more
  v = CheckRun(in, {}, {});
  EXPECT_EQ(v.idle_claims, 1);
  EXPECT_NE(v.errors.back().find("never started"), std::string::npos)
      << v.errors.back();
}

// An Ask answered as given whose run never finished is lost, not flipped:
// its Echo was never spawned.
TEST(MachinesHistoryTest, AnAnsweredAskThatNeverCompletedIsLostNotFlipped) {
  Fixture f(1, 1);
  f.in.status = "running";
  f.in.audit.push_back(Submitted(5, "Ask", {{"q", 0}}));
  f.in.audit.push_back(
      {{"event", "task_answered"}, {"id", 5}, {"answer", "yes"}});
  f.in.answers_given["0"] = "yes";
  const RunVerdict v = f.Check();
  EXPECT_EQ(v.lost, 1);
  EXPECT_EQ(v.flipped, 0);
}

TEST(MachinesHistoryTest,
     AMachineClockOutsideTheHostsReadingsFailsCalibration) {
  LedgerRecord c;
  c.e = "calibration", c.m = "m2", c.before = 100, c.after = 120, c.mono = 110;
  EXPECT_TRUE(CheckCalibration({c}).empty());
  c.mono = 5000;
  EXPECT_EQ(CheckCalibration({c}).size(), 1u);
}

TEST(MachinesHistoryTest, AMachineWallClockNotMovedAsAskedFailsCalibration) {
  LedgerRecord c;
  c.e = "calibration", c.m = "m2", c.before = 100, c.after = 120, c.mono = 110;
  c.host_wall_ms = 1'000'000'000, c.wall_ms = c.host_wall_ms - 1'800'000;
  c.offset_s = -1800, c.libs = "jemalloc,faketime";
  EXPECT_TRUE(CheckCalibration({c}).empty());
  c.wall_ms = c.host_wall_ms;  // libfaketime did not take
  EXPECT_EQ(CheckCalibration({c}).size(), 1u);
  c.wall_ms = c.host_wall_ms - 1'800'000;
  c.libs = "jemalloc";  // not mapped: the wall clock came from elsewhere
  EXPECT_EQ(CheckCalibration({c}).size(), 1u);
  c.offset_s = 0, c.wall_ms = c.host_wall_ms + 20;  // the first machine
  EXPECT_TRUE(CheckCalibration({c}).empty());
  // A build without jemalloc (make asan): libfaketime alone is what wizq
  // maps, and jemalloc would be a probe linked unlike wizq.
  c.offset_s = -1800, c.wall_ms = c.host_wall_ms - 1'800'000;
  c.want_libs = "faketime", c.libs = "faketime";
  EXPECT_TRUE(CheckCalibration({c}).empty());
  c.libs = "jemalloc,faketime";
  EXPECT_EQ(CheckCalibration({c}).size(), 1u);
  c.libs = "-";  // the probe did not run
  EXPECT_EQ(CheckCalibration({c}).size(), 1u);
}

TEST(MachinesHistoryTest, AFaultCountsWhenAnAttemptRanOnItsMachineMeanwhile) {
  const std::vector<LedgerRecord> ledger = {
      Rec("start", "m1", 1, 1, 11, 1000), Rec("end", "m1", 1, 1, 11, 2000),
      Rec("start", "m1", 2, 1, 12, 3000),  // killed: no end
      Rec("start", "m2", 2, 2, 20, 6000), Rec("end", "m2", 2, 2, 20, 6500)};
  EXPECT_TRUE(
      InFlight(MakeFault("partition", "m1", 1500, 1600, false), ledger));
  EXPECT_FALSE(
      InFlight(MakeFault("partition", "m1", 2100, 2900, false), ledger));
  EXPECT_TRUE(
      InFlight(MakeFault("partition", "m1", 5000, 5100, false), ledger));
  EXPECT_FALSE(
      InFlight(MakeFault("partition", "m1", 6100, 6200, false), ledger));
  EXPECT_FALSE(
      InFlight(MakeFault("partition", "m3", 1500, 1600, false), ledger));
  EXPECT_TRUE(InFlight(MakeFault("db_crash", "", 6100, 6200, false), ledger));
}

}  // namespace
}  // namespace wizq::machines
