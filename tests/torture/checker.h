// The checker of the kill -9 tests: reads a fan-out run's `.wizard/`
// (queue.json, audit.jsonl) and the side-effect ledger its tasks write
// (tests/data/cli/lib.sh), and says, Jepsen-style, what went wrong.
// Used by tests/wizq_crash_test.cc (gtest) and tests/torture/torture.cc
// (`wizq_torture`, `make torture`); what it reads (the kills, audit.jsonl,
// the fan-out workflow's tasks, the ledger) is in checker_inputs.h.
// Header-only, no gtest: every violation is a message in RunCheck::errors,
// and the ones that break a guarantee of SPEC §6 are also counted:
//
//   lost        a task of the run that did not complete: absent from
//               queue.json, not `done`, no `task_completed`, or its
//               completed attempt has no start and end in the ledger (also
//               a missing finally hook);
//   duplicated  a task completed twice (two `task_completed`, or an attempt
//               started after its completion was logged), two tasks with one
//               <type, inputs>, a side effect (ledger role) under two task
//               ids, or two finally hooks for one owner;
//   overlapped  two attempts of one task running at once: an OVERLAP line
//               in the ledger (lib.sh's per-task flock was held), or an
//               attempt's start before the previous attempt's last line;
//   extra_runs  re-executions: per task, ledger starts minus one.
//
// The matching rule for extra runs (SPEC §6.3, "a task in flight at a crash
// runs again at most once per crash"): the ledger starts of a task, in
// ledger order, are mapped to its `task_claimed` events by attempt number
// (after a refunded claim an attempt number repeats; the starts of one
// number go to the last claims of that number). Every start but the last
// is an earlier execution that was re-run; it is *matched* only when its
// own process tree was killed: its claim ended as a lost attempt (a
// `task_reset` with reason `worker_lost` that is not a refund, or a
// `task_failed` with reason `worker_lost` — an adopted attempt that died
// without an exit record) and the harness killed the run's task trees
// (`Kill::trees`, a power cut) at or after the claim (`Kill::ms` >= the
// claim's `ts` - 1 s of clock slack). A kill of wizq alone never matches:
// its attempts must be adopted (task_reset with `refund`, then
// `task_adopted`), not run again. A claim that ended otherwise (completed,
// failed and retried, reset although its worker was never killed) makes
// the re-execution *unmatched*. Since each claim ends at most once, this
// also bounds the re-executions of a task by the tree kills.
//
// With `one_process` (one wizq at a time), every `task_reset` must also
// belong to a resume (be followed by `run_resumed`) or come after a
// `worker_joined` that is a join: a wizq that found another live worker
// and joined the run instead of resuming it, whose transactions then put
// the dead worker's tasks back (FORMAT.md, "Worker liveness"). One at a
// time, a join happens when a SIGKILLed wizq's worker lock is still held
// by a task child it was spawning: posix_spawn's child holds copies of all
// of wizq's descriptors until its exec (RunCheck::joins counts them).
#ifndef WIZQ_TESTS_TORTURE_CHECKER_H_
#define WIZQ_TESTS_TORTURE_CHECKER_H_

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/torture/checker_inputs.h"

namespace wizq::torture {

// --- the verdict on a finished run ------------------------------------------

struct RunCheck {
  int tasks = 0;  // tasks in queue.json
  int lost = 0;
  int duplicated = 0;
  int overlapped = 0;
  int extra_runs = 0;
  int extra_runs_matched = 0;
  int extra_runs_unmatched = 0;
  int resets = 0;  // claims put back (task_reset)
  int joins = 0;   // wizq processes that joined the run (not started or
                   // resumed it), see CheckFanoutRun
  bool hook_runs_ok = true;
  std::vector<std::string> errors;  // every violation, counted or not

  bool ok() const { return errors.empty(); }
  void Fail(const std::string& msg) { errors.push_back(msg); }
};

namespace internal {

// One `task_claimed` of a task and how it ended.
struct Claim {
  const Json* claimed = nullptr;
  const Json* ended = nullptr;  // task_reset, task_completed, task_failed
};

inline std::string TaskName(int64_t id, const Json& t) {
  return "task " + std::to_string(id) + " (" + t["type"].get<std::string>() +
         " " + t["inputs"].dump() + ", " + t["origin"].get<std::string>() + ")";
}

}  // namespace internal

// Checks a fan-out run of `n` in `dir` that should have completed. `kills`
// are the SIGKILLs of wizq processes by the harness; `one_process` is true
// when only one wizq ran at a time (then tasks are put back only by a
// resume). queue.json and the log are read as they are; `wizq status` is
// the caller's business.
inline RunCheck CheckFanoutRun(const std::string& dir, int n,
                               const std::vector<Kill>& kills,
                               bool one_process) {
  namespace fs = std::filesystem;
  using internal::Claim;
  using internal::TaskName;
  RunCheck c;
  const std::set<std::string> expected = ExpectedFanoutTasks(n);
  // Root and the n/9 Groups have a finally hook each.
  const int expected_hooks = 1 + n / 9;

  // --- the audit log: one gap-free committed sequence, one run, finished
  // once.
  const AuditLog log =
      ParseAudit(ReadFileOrEmpty(dir + "/.wizard/audit.jsonl"));
  if (!log.error.empty()) c.Fail(log.error);
  if (log.tail_bytes > 0) {
    c.Fail("audit.jsonl ends in " + std::to_string(log.tail_bytes) +
           " bytes of torn tail or unfinished batch");
  }
  const std::vector<Json>& audit = log.events;
  if (audit.empty()) {
    c.Fail("no committed audit event");
    c.lost = static_cast<int>(expected.size()) + expected_hooks;
    return c;
  }
  int run_started = 0, run_finished = 0;
  std::map<std::string, int64_t> worker_pids;
  for (const Json& e : audit) {
    const std::string ev = e["event"];
    if (ev == "run_started") run_started++;
    if (ev == "run_finished") {
      run_finished++;
      if (e["status"] != "completed") c.Fail("run_finished: " + e.dump());
    }
    if (ev == "worker_joined") {
      worker_pids[e["worker"]] = e["pid"].get<int64_t>();
    }
  }
  if (run_started != 1) {
    c.Fail("run_started " + std::to_string(run_started) +
           " times: the run was started over");
  }
  if (run_finished != 1) {
    c.Fail("run_finished " + std::to_string(run_finished) + " times");
  }
  std::error_code ec;
  if (fs::exists(dir + "/.wizard/archive", ec)) {
    c.Fail("a queue was archived: the run was restarted instead of resumed");
  }

  // --- queue.json: exact at rest, every task done, each <type, inputs>
  // once.
  const Json q =
      ParseJsonOrDiscarded(ReadFileOrEmpty(dir + "/.wizard/queue.json"));
  if (!q.is_object() || !q.contains("tasks") || !q["tasks"].is_array()) {
    c.Fail("queue.json does not parse");
    c.lost = static_cast<int>(expected.size()) + expected_hooks;
    return c;
  }
  if (q["status"] != "completed")
    c.Fail("queue.json status " + q["status"].dump());
  if (q["seq"] != audit.back()["seq"]) {
    c.Fail("queue.json is at seq " + q["seq"].dump() + ", the log at " +
           audit.back()["seq"].dump() + ": not exact although at rest");
  }
  std::set<int64_t> lost;  // ids of tasks that did not complete
  std::map<int64_t, Json> tasks;
  std::map<int64_t, std::vector<int64_t>> kids;  // by parent_id
  std::set<std::string> seen;
  std::map<int64_t, int> hooks_of;  // owner -> number of hooks
  for (const Json& t : q["tasks"]) {
    const int64_t id = t["id"];
    tasks[id] = t;
    const Json& p = t["parent_id"];
    kids[p.is_number_integer() ? p.get<int64_t>() : 0].push_back(id);
    if (t["state"] != "done") {
      c.Fail(TaskName(id, t) + " is " + t["state"].dump() + ", not done");
      lost.insert(id);
    }
    if (t["origin"] == "Finally") {
      hooks_of[t["finally_for"].get<int64_t>()]++;
      continue;
    }
    const std::string key =
        t["type"].get<std::string>() + " " + t["inputs"].dump();
    if (!seen.insert(key).second) {
      c.Fail("submitted twice: " + key);
      c.duplicated++;
    }
    if (!expected.count(key)) c.Fail("a task the run should not have: " + key);
  }
  c.tasks = static_cast<int>(tasks.size());
  for (const std::string& key : expected) {
    if (!seen.count(key)) {
      c.Fail("never submitted: " + key);
      c.lost++;
    }
  }
  for (const auto& [id, t] : tasks) {
    const bool has_hook = t["origin"] != "Finally" &&
                          (t["type"] == "Root" || t["type"] == "Group");
    const int want = has_hook ? 1 : 0;
    if (hooks_of[id] == want) continue;
    c.Fail(TaskName(id, t) + " has " + std::to_string(hooks_of[id]) +
           " finally hooks, not " + std::to_string(want));
    c.hook_runs_ok = false;
    if (hooks_of[id] < want) c.lost++;
    if (hooks_of[id] > want) c.duplicated += hooks_of[id] - want;
  }

  // --- per task, from the log: its claims and how each ended; attempts
  // count at claim, except that a claim put back before its attempt
  // started is refunded (`refund`): the next claim has the same number.
  std::map<int64_t, std::vector<const Json*>> timeline;
  std::map<int64_t, int64_t> submitted_seq, finished_seq;
  bool last_join_was_join = false;
  for (size_t i = 0; i < audit.size(); i++) {
    const Json& e = audit[i];
    const std::string ev = e["event"];
    if (ev == "task_submitted") submitted_seq[e["id"]] = e["seq"];
    if (ev == "task_claimed" || ev == "task_reset" || ev == "task_completed" ||
        ev == "task_failed") {
      timeline[e["id"].get<int64_t>()].push_back(&e);
    }
    if (ev == "task_completed") finished_seq[e["id"]] = e["seq"];
    if (ev == "worker_joined") {
      // Joined, not started or resumed: its open found another live
      // worker. One at a time, that can only be the dead one's lock, held
      // for a moment by a task child it had not finished spawning.
      bool opened_run = false;
      for (size_t j = i; j > 0; j--) {
        const Json& prev = audit[j - 1];
        if (prev.value("commit", false)) break;  // the previous commit
        const std::string pe = prev["event"];
        if (pe == "run_started" || pe == "run_resumed") opened_run = true;
      }
      last_join_was_join = !opened_run;
      if (!opened_run) c.joins++;
    }
    if (ev == "task_reset") c.resets++;
    if (ev == "task_reset" && one_process) {
      // A resume puts tasks back, then says so; a join (above) puts them
      // back in its first transactions.
      size_t j = i + 1;
      while (j < audit.size() && (audit[j]["event"] == "task_reset" ||
                                  audit[j]["event"] == "task_failed")) {
        j++;
      }
      const bool resume =
          j < audit.size() && audit[j]["event"] == "run_resumed";
      if (!resume && !last_join_was_join) {
        c.Fail("a task_reset outside a resume or join: " + e.dump());
      }
    }
  }
  // Every spawned task was submitted by the completion that spawned it, and
  // every task a completion asked for was either submitted or folded into
  // an existing task with the same <type, inputs> (task_deduplicated).
  std::map<int64_t, int> spawned_by;
  int deduplicated = 0;
  for (const Json& e : audit) {
    if (e["event"] == "task_deduplicated") deduplicated++;
    if (e["event"] != "task_completed") continue;
    for (const Json& k : e["spawned"]) spawned_by[k.get<int64_t>()]++;
    const int64_t id = e["id"];
    if (!tasks.count(id)) {
      c.Fail("completion of a task not in queue.json: " + e.dump());
      continue;
    }
    if (e["spawned"].size() + e["deduplicated"].size() !=
        FanoutAsked(tasks[id], n)) {
      c.Fail("a completion that does not account for its children: " +
             e.dump());
    }
    for (const Json& d : e["deduplicated"]) {
      if (!tasks.count(d.get<int64_t>())) {
        c.Fail("folded into an unknown task: " + e.dump());
      }
    }
  }
  if (deduplicated == 0 && n >= 16) c.Fail("the run never exercised dedup");
  for (const auto& [id, t] : tasks) {
    const bool spawned = t["origin"] == "Spawned";
    if (spawned_by[id] != (spawned ? 1 : 0)) {
      c.Fail(TaskName(id, t) + " is in the spawned list of " +
             std::to_string(spawned_by[id]) + " completions");
    }
    if (submitted_seq[id] <= 0) c.Fail(TaskName(id, t) + " never submitted");
  }

  std::map<int64_t, std::vector<Claim>> claims;
  std::map<int64_t, int> final_attempt;
  for (const auto& [id, t] : tasks) {
    const std::string name = TaskName(id, t);
    int attempts = 0;
    int completions = 0;
    std::string holder;
    std::vector<Claim>& cl = claims[id];
    for (const Json* e : timeline[id]) {
      const std::string ev = (*e)["event"];
      if (completions > 0) {
        c.Fail(name + ": an event after its completion: " + e->dump());
      }
      if (ev == "task_claimed") {
        if (!holder.empty()) {
          c.Fail(name + ": claimed while claimed: " + e->dump());
        }
        if ((*e)["attempt"] != ++attempts) {
          c.Fail(name + ": claimed as attempt " + (*e)["attempt"].dump() +
                 ", expected " + std::to_string(attempts));
        }
        holder = (*e)["worker"];
        cl.push_back(Claim{e, nullptr});
        continue;
      }
      if (holder.empty() || cl.empty()) {
        c.Fail(name + ": " + ev + " of an unclaimed task: " + e->dump());
        continue;
      }
      if (ev == "task_adopted") {
        if ((*e)["worker"] != holder || (*e)["attempt"] != attempts) {
          c.Fail(name + ": " + e->dump());
        }
        continue;
      }
      cl.back().ended = e;
      if (ev == "task_reset") {
        if ((*e)["worker"] != holder) c.Fail(name + ": " + e->dump());
        if ((*e)["attempt"] != attempts) c.Fail(name + ": " + e->dump());
        if ((*e)["reason"] != "worker_lost") {
          c.Fail(name + ": put back for another reason than a lost worker: " +
                 e->dump());
        }
        if (e->value("refund", false)) attempts--;
        const auto pid = worker_pids.find(holder);
        const bool was_killed =
            pid != worker_pids.end() &&
            std::any_of(kills.begin(), kills.end(),
                        [&](const Kill& k) { return k.pid == pid->second; });
        if (!was_killed) {
          c.Fail(name + ": put back although its worker " + holder +
                 " was not killed: " + e->dump());
        }
      } else if (ev == "task_completed") {
        if ((*e)["worker"] != holder) c.Fail(name + ": " + e->dump());
        completions++;
      } else if (ev == "task_failed" && (*e)["reason"] == "worker_lost" &&
                 e->value("will_retry", false)) {
        // An adopted attempt that died without an exit record: charged.
        if ((*e)["worker"] != holder) c.Fail(name + ": " + e->dump());
      } else {
        c.Fail(name + ": unexpected failure: " + e->dump());
      }
      holder.clear();
    }
    if (completions == 0) {
      c.Fail(name + " never completed");
      lost.insert(id);
    }
    if (completions > 1) {
      c.Fail(name + " completed " + std::to_string(completions) + " times");
      c.duplicated += completions - 1;
    }
    if (t["attempts"] != attempts) {
      c.Fail(name + ": queue.json says " + t["attempts"].dump() +
             " attempts, the log " + std::to_string(attempts));
    }
    final_attempt[id] = attempts;
  }

  // --- the ledger: attempts never overlapped, the completed attempt ran
  // from start to end, and every other execution is matched to a kill.
  const std::vector<LedgerEntry> ledger = ReadLedgerFile(dir + "/ledger");
  std::map<int64_t, std::vector<const LedgerEntry*>> by_task;
  for (const LedgerEntry& l : ledger) {
    if (l.kind == "OVERLAP") {
      c.Fail("task " + std::to_string(l.task) + " attempt " +
             std::to_string(l.attempt) + " (" + l.role +
             ") started while an earlier attempt still ran");
      c.overlapped++;
    } else if (l.kind != "start" && l.kind != "end") {
      c.Fail("ledger line " + std::to_string(l.index) + ": kind " + l.kind);
    }
    if (!tasks.count(l.task)) {
      c.Fail("ledger line of unknown task " + std::to_string(l.task));
      continue;
    }
    by_task[l.task].push_back(&l);
  }
  // A side effect belongs to one task: a task run before its submission
  // was durable would show up under an id that a resume gave to another.
  std::map<std::string, std::set<int64_t>> ids_of_role;
  for (const LedgerEntry& l : ledger) ids_of_role[l.role].insert(l.task);
  for (const auto& [role, ids] : ids_of_role) {
    if (ids.size() > 1) {
      c.Fail(role + " ran as " + std::to_string(ids.size()) +
             " different tasks");
      c.duplicated += static_cast<int>(ids.size()) - 1;
    }
  }
  std::map<int64_t, std::pair<size_t, size_t>> span;  // first, last line
  for (const auto& [id, t] : tasks) {
    const std::string name = TaskName(id, t);
    const std::vector<const LedgerEntry*>& lines = by_task[id];
    const int last = final_attempt[id];
    std::vector<const LedgerEntry*> starts;  // ledger order
    std::map<int, int> starts_of, ends_of;   // by attempt
    std::map<int, size_t> last_line_of;      // by attempt
    for (const LedgerEntry* l : lines) {
      if (l->role != FanoutRole(t)) {
        c.Fail(name + ": ledger line " + std::to_string(l->index) +
               " has role " + l->role);
      }
      if (l->attempt < 1 || l->attempt > last) {
        c.Fail(name + ": attempt " + std::to_string(l->attempt) +
               " ran but was never claimed");
      }
      last_line_of[l->attempt] = std::max(last_line_of[l->attempt], l->index);
      if (l->kind == "start") {
        starts.push_back(l);
        if (++starts_of[l->attempt] > 1) {
          c.Fail(name + ": attempt " + std::to_string(l->attempt) +
                 " started twice (a refunded claim ran?)");
        }
      } else if (l->kind == "end") {
        if (++ends_of[l->attempt] > 1) {
          c.Fail(name + ": attempt " + std::to_string(l->attempt) +
                 " ended twice");
        }
        if (!starts_of.count(l->attempt)) {
          c.Fail(name + ": attempt " + std::to_string(l->attempt) +
                 " ended before it started");
        }
      }
    }
    if (!lost.count(id) && !(starts_of.count(last) && ends_of.count(last))) {
      c.Fail(name + ": the completed attempt " + std::to_string(last) +
             " did not run to its end");
      lost.insert(id);
    }
    // Attempts in order, each over before the next began.
    for (size_t i = 1; i < starts.size(); i++) {
      const int prev = starts[i - 1]->attempt;
      if (starts[i]->attempt == prev) continue;  // reported above
      if (starts[i]->index < last_line_of[prev] || starts[i]->attempt < prev) {
        c.Fail(name + ": attempt " + std::to_string(starts[i]->attempt) +
               " started (ledger line " + std::to_string(starts[i]->index) +
               ") before attempt " + std::to_string(prev) + " was over (line " +
               std::to_string(last_line_of[prev]) + ")");
        c.overlapped++;
      }
    }
    if (!lines.empty()) span[id] = {lines.front()->index, lines.back()->index};

    // Extra runs: map the starts to claims (per attempt number, to the last
    // claims of that number), then every start but the last must have been
    // cut short by a kill of the worker holding its claim.
    if (starts.empty()) continue;
    c.extra_runs += static_cast<int>(starts.size()) - 1;
    const std::vector<Claim>& cl = claims[id];
    std::map<int, std::vector<size_t>> claims_of;  // attempt -> claim index
    for (size_t i = 0; i < cl.size(); i++) {
      claims_of[(*cl[i].claimed)["attempt"].get<int>()].push_back(i);
    }
    std::map<int, std::vector<size_t>> starts_by_attempt;
    for (size_t i = 0; i < starts.size(); i++) {
      starts_by_attempt[starts[i]->attempt].push_back(i);
    }
    std::vector<int64_t> claim_of(starts.size(), -1);
    for (const auto& [attempt, idx] : starts_by_attempt) {
      const std::vector<size_t>& cs = claims_of[attempt];
      for (size_t j = 0; j < idx.size(); j++) {
        const size_t from_end = idx.size() - j;
        if (from_end <= cs.size()) {
          claim_of[idx[j]] = static_cast<int64_t>(cs[cs.size() - from_end]);
        }
      }
    }
    for (size_t i = 0; i + 1 < starts.size(); i++) {
      const std::string run = name + ": the execution of attempt " +
                              std::to_string(starts[i]->attempt) +
                              " (ledger line " +
                              std::to_string(starts[i]->index) + ")";
      if (claim_of[i] < 0) {
        c.Fail(run + " has no claim: re-run unmatched");
        c.extra_runs_unmatched++;
        continue;
      }
      const Claim& claim = cl[claim_of[i]];
      if (claim_of[i + 1] >= 0 && claim_of[i + 1] <= claim_of[i]) {
        c.Fail(run + " and the next one map to claims out of order");
      }
      const Json* end = claim.ended;
      if (end != nullptr && (*end)["event"] == "task_completed") {
        c.Fail(run + " completed, yet the task ran again");
        c.duplicated++;
        c.extra_runs_unmatched++;
        continue;
      }
      bool matched = false;
      const bool lost_attempt =
          end != nullptr && (*end)["reason"] == "worker_lost" &&
          (((*end)["event"] == "task_reset" && !end->value("refund", false)) ||
           (*end)["event"] == "task_failed");
      if (lost_attempt) {
        // The execution began under the first claim of its attempt number
        // (later ones are refunded re-claims to adopt it): the kill of its
        // tree must come after that one.
        int64_t claim_ts = (*claim.claimed)["ts"].get<int64_t>();
        for (const Claim& other : cl) {
          if ((*other.claimed)["attempt"] == (*claim.claimed)["attempt"]) {
            claim_ts =
                std::min(claim_ts, (*other.claimed)["ts"].get<int64_t>());
          }
        }
        matched = std::any_of(kills.begin(), kills.end(), [&](const Kill& k) {
          return k.trees && k.ms + kKillSlackMs >= claim_ts;
        });
      }
      if (matched) {
        c.extra_runs_matched++;
      } else {
        c.Fail(run + " was re-run, but its claim " + claim.claimed->dump() +
               " ended in " +
               (end != nullptr ? end->dump() : std::string("nothing")) +
               ", not a lost attempt after a kill of the task trees: "
               "unmatched");
        c.extra_runs_unmatched++;
      }
    }
  }

  // --- finally hooks: submitted after everything below their owner
  // completed, and run (every attempt) after it all.
  std::function<void(int64_t, std::vector<int64_t>*)> subtree =
      [&](int64_t id, std::vector<int64_t>* out) {
        for (int64_t k : kids[id]) {
          out->push_back(k);
          subtree(k, out);
        }
      };
  for (const auto& [id, t] : tasks) {
    if (t["origin"] != "Finally") continue;
    const int64_t owner = t["finally_for"];
    const std::string hook = "finally hook " + std::to_string(id) +
                             " of task " + std::to_string(owner);
    std::vector<int64_t> below = {owner};
    subtree(owner, &below);
    for (int64_t d : below) {
      if (submitted_seq[id] <= finished_seq[d]) {
        c.Fail(hook + ": submitted before task " + std::to_string(d) +
               " completed");
        c.hook_runs_ok = false;
      }
      if (span.count(d) && span.count(id) && span[d].second >= span[id].first) {
        c.Fail(hook + ": ran before task " + std::to_string(d) +
               " was over (ledger lines " + std::to_string(span[d].second) +
               ", " + std::to_string(span[id].first) + ")");
        c.hook_runs_ok = false;
      }
    }
  }
  c.lost += static_cast<int>(lost.size());

  // --- nothing of any attempt is still running.
  for (const std::string& f : HeldFlocks(dir + "/locks")) {
    c.Fail("a task process outlived the run: " + f + " is locked");
  }
  return c;
}

}  // namespace wizq::torture

#endif  // WIZQ_TESTS_TORTURE_CHECKER_H_
