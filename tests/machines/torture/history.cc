// The checker of the machines torture: see history.h.
#include "tests/machines/torture/history.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

namespace wizq::machines {
namespace {

// A claim's start precedes its body's `start` record by its spawn; a fault
// up to this long before the start may still have hit the claim.
constexpr int64_t kClaimSlackMs = 1000;
// After a whole-machine thaw, the machine's spawner needs a moment to end
// the attempts whose local deadline passed while frozen.
constexpr int64_t kThawGraceMs = 1000;

int64_t Int(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return 0;
  const Json& v = j[key];
  return v.is_number_integer() ? v.get<int64_t>() : 0;
}

std::string Str(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

// What the audit log says about one task.
struct TaskLife {
  std::string type, origin;
  Json inputs;
  int64_t parent = 0, finally_for = 0;
  std::string dedup_key;
  int64_t current_attempt = 0;    // of the last claim or adoption
  int64_t completed_attempt = 0;  // the attempt task_completed recorded
  int completions = 0;
  bool failed = false;         // task_failed without a retry
  Json answer;                 // task_answered
  std::vector<int64_t> marks;  // Mark children (task ids)
};

std::map<int64_t, TaskLife> ReadLives(const std::vector<Json>& audit) {
  std::map<int64_t, TaskLife> t;
  for (const Json& e : audit) {
    const std::string ev = Str(e, "event");
    const int64_t id = Int(e, "id");
    if (ev == "task_submitted") {
      TaskLife& l = t[id];
      l.type = Str(e, "type");
      l.origin = Str(e, "origin");
      l.inputs = e.value("inputs", Json());
      l.parent = Int(e, "parent_id");
      l.finally_for = Int(e, "finally_for");
      l.dedup_key = Str(e, "dedup_key");
      if (l.type == "Mark" && l.parent != 0) t[l.parent].marks.push_back(id);
    } else if (ev == "task_claimed" || ev == "task_adopted") {
      t[id].current_attempt = Int(e, "attempt");
    } else if (ev == "task_completed") {
      t[id].completions++;
      t[id].completed_attempt = t[id].current_attempt;
    } else if (ev == "task_failed") {
      if (!e.value("will_retry", false)) t[id].failed = true;
    } else if (ev == "task_answered") {
      t[id].answer = e.value("answer", Json());
    }
  }
  return t;
}

std::string Name(int64_t id, const TaskLife& l) {
  return "task " + std::to_string(id) + " (" + l.type + " " + l.inputs.dump() +
         ")";
}

void Lost(const std::map<int64_t, TaskLife>& lives, RunVerdict* v) {
  for (const auto& [id, l] : lives) {
    if (l.type.empty()) continue;  // events of a task never submitted
    if (l.completions == 0) {
      v->lost++;
      v->errors.push_back("lost: " + Name(id, l) +
                          (l.failed ? " failed" : " never completed"));
    }
  }
}

void Duplicated(const std::map<int64_t, TaskLife>& lives,
                const std::vector<const LedgerRecord*>& starts, RunVerdict* v) {
  std::map<std::pair<std::string, std::string>, int64_t> keys;
  std::map<int64_t, int> hooks;
  for (const auto& [id, l] : lives) {
    if (l.completions > 1) {
      v->duplicated++;
      v->errors.push_back("duplicated: " + Name(id, l) + " completed " +
                          std::to_string(l.completions) + " times");
    }
    if (l.origin == "Finally" && ++hooks[l.finally_for] > 1) {
      v->duplicated++;
      v->errors.push_back("duplicated: a second finally hook of task " +
                          std::to_string(l.finally_for));
    }
    if (l.origin == "Finally" || l.type.empty()) continue;
    auto [it, fresh] = keys.insert({{l.type, l.dedup_key}, id});
    if (!fresh) {
      v->duplicated++;
      v->errors.push_back("duplicated: tasks " + std::to_string(it->second) +
                          " and " + std::to_string(id) + " are one " + l.type +
                          " " + l.inputs.dump());
    }
  }
  for (const LedgerRecord* s : starts) {
    auto it = lives.find(s->task);
    if (it == lives.end() || it->second.completions == 0) continue;
    if (s->attempt > it->second.completed_attempt) {
      v->duplicated++;
      v->errors.push_back("duplicated: " + Name(s->task, it->second) +
                          " attempt " + std::to_string(s->attempt) +
                          " started on " + s->m + " after attempt " +
                          std::to_string(it->second.completed_attempt) +
                          " completed it");
    }
  }
}

// The whole-machine freeze of `machine` that `mono` falls in (or within
// the thaw's grace), else nullptr.
const Fault* FrozenAt(const std::vector<Fault>& faults,
                      const std::string& machine, int64_t mono) {
  for (const Fault& f : faults) {
    if (f.whole_machine_freeze && f.machine == machine && f.t0 <= mono &&
        mono <= f.t1 + kThawGraceMs) {
      return &f;
    }
  }
  return nullptr;
}

// One attempt found running while another of its task started.
struct Overlap {
  std::string what;
  bool frozen = true;       // its holder's machine frozen all along (exempt)
  bool late_agent = false;  // its holder a CLI/MCP agent (no deadline)
};

// Two ways to see one: the later attempt found the flock held (an
// `overlap` record: its holder was running when it started), or the
// earlier attempt's `end` came after the later one's start (its holder
// ran on past it: a frozen machine's attempt must end at the thaw, by its
// local deadline, not run to its end).
void Overlapped(const std::vector<LedgerRecord>& ledger, const std::string& run,
                const std::vector<Fault>& faults, RunVerdict* v) {
  std::map<std::string, Overlap> seen;  // task holder-m.pid new-m.pid
  auto key = [](int64_t task, const std::string& hm, int64_t hp,
                const std::string& m, int64_t p) {
    return std::to_string(task) + " " + hm + "." + std::to_string(hp) + " " +
           m + "." + std::to_string(p);
  };
  std::map<std::string, const LedgerRecord*> started;  // task m.pid
  std::vector<const LedgerRecord*> starts;
  for (const LedgerRecord& r : ledger) {
    if (r.run != run) continue;
    if (r.e == "start") {
      starts.push_back(&r);
      started[std::to_string(r.task) + " " + r.m + "." +
              std::to_string(r.pid)] = &r;
    }
    if (r.e != "overlap") continue;
    const std::string hm = Str(r.holder, "m");
    Overlap& o = seen[key(r.task, hm, Int(r.holder, "pid"), r.m, r.pid)];
    std::ostringstream msg;
    msg << "task " << r.task << " attempt " << r.attempt << " on " << r.m
        << " (pid " << r.pid << ") started while " << r.holder.dump()
        << " held it";
    o.what = msg.str();
    o.frozen = o.frozen && FrozenAt(faults, hm, r.mono) != nullptr;
    o.late_agent = !Str(r.holder, "via").empty();
  }
  for (const LedgerRecord& e : ledger) {
    if (e.run != run || e.e != "end") continue;
    auto it = started.find(std::to_string(e.task) + " " + e.m + "." +
                           std::to_string(e.pid));
    if (it == started.end()) continue;
    for (const LedgerRecord* s : starts) {
      if (s->task != e.task || s->mono <= it->second->mono ||
          s->mono >= e.mono || (s->m == e.m && s->pid == e.pid)) {
        continue;
      }
      Overlap& o = seen[key(e.task, e.m, e.pid, s->m, s->pid)];
      const Fault* f = FrozenAt(faults, e.m, s->mono);
      o.frozen = o.frozen && f != nullptr && e.mono <= f->t1 + kThawGraceMs;
      o.late_agent = !e.via.empty();
      if (o.what.empty()) {
        o.what = "task " + std::to_string(e.task) + " attempt " +
                 std::to_string(e.attempt) + " on " + e.m + " (pid " +
                 std::to_string(e.pid) + ") ran until " +
                 std::to_string(e.mono) + ", past the start of attempt " +
                 std::to_string(s->attempt) + " on " + s->m + " at " +
                 std::to_string(s->mono);
      }
    }
  }
  for (const auto& [k, o] : seen) {
    if (o.late_agent) {
      v->late_agent++;
    } else if (o.frozen) {
      v->overlapped_frozen_machine++;
    } else {
      v->overlapped++;
      v->errors.push_back("overlapped: " + o.what);
    }
  }
}

// The ledger start of the attempt that completed `id`, identified by its
// response (the Mark child: machine, attempt, pid), else by its number.
// `starts` are in monotonic order.
const LedgerRecord* CompletedStart(
    int64_t id, const TaskLife& l, const std::map<int64_t, TaskLife>& lives,
    const std::vector<const LedgerRecord*>& starts, RunVerdict* v) {
  const bool marked = l.type == "Work" || l.type == "Review";
  if (marked && l.completions > 0) {
    if (l.marks.size() != 1) {
      v->stale++;
      v->errors.push_back("stale: " + Name(id, l) + " has " +
                          std::to_string(l.marks.size()) + " responses");
      return nullptr;
    }
    const Json& mark = lives.at(l.marks[0]).inputs;
    for (const LedgerRecord* s : starts) {
      if (s->task == id && s->m == Str(mark, "m") &&
          s->attempt == Int(mark, "a") && s->pid == Int(mark, "p") &&
          s->attempt == l.completed_attempt) {
        return s;
      }
    }
    v->stale++;
    v->errors.push_back("stale: " + Name(id, l) + " completed attempt " +
                        std::to_string(l.completed_attempt) +
                        " with the response of " + mark.dump());
    return nullptr;
  }
  // Unmarked: the last start of that number. A number repeats when a
  // remote rescue refunded a claim whose start the store had not been told
  // of yet (docs/RELIABILITY.md); the completion is the later claim's.
  const LedgerRecord* last = nullptr;
  for (const LedgerRecord* s : starts) {
    if (s->task == id && s->attempt == l.completed_attempt) last = s;
  }
  return last;
}

// True if a fault that may cost a claim hit `s`'s machine between `s`
// (less the claim slack) and `until`.
bool Matched(const LedgerRecord& s, int64_t until,
             const std::vector<Fault>& faults) {
  for (const Fault& f : faults) {
    if (!f.may_rerun) continue;
    if (!f.machine.empty() && f.machine != s.m) continue;
    if (f.t1 >= s.mono - kClaimSlackMs && f.t0 <= until) return true;
  }
  return false;
}

void ExtraRuns(const std::map<int64_t, TaskLife>& lives,
               const std::vector<const LedgerRecord*>& starts,
               const std::vector<Fault>& faults, RunVerdict* v) {
  std::map<int64_t, std::vector<const LedgerRecord*>> by_task;
  for (const LedgerRecord* s : starts) by_task[s->task].push_back(s);
  for (const auto& [id, list] : by_task) {
    auto it = lives.find(id);
    if (it == lives.end()) continue;
    const LedgerRecord* done = CompletedStart(id, it->second, lives, starts, v);
    for (size_t i = 0; i < list.size(); i++) {
      if (list[i] == done) continue;
      if (done == nullptr && i + 1 == list.size()) continue;
      v->extra_runs++;
      const int64_t until = i + 1 < list.size() ? list[i + 1]->mono : INT64_MAX;
      if (Matched(*list[i], until, faults)) {
        v->extra_runs_matched++;
        continue;
      }
      v->extra_runs_unmatched++;
      v->errors.push_back(
          "extra run unmatched: " + Name(id, it->second) + " attempt " +
          std::to_string(list[i]->attempt) + " on " + list[i]->m + " (pid " +
          std::to_string(list[i]->pid) + ", mono " +
          std::to_string(list[i]->mono) + ") ran again with no fault that " +
          "may cost its claim on " + list[i]->m + " before the next start");
    }
  }
}

void Flipped(const CheckInput& in, const std::map<int64_t, TaskLife>& lives,
             RunVerdict* v) {
  for (const auto& [id, l] : lives) {
    if (l.type != "Ask") continue;
    const std::string q = std::to_string(Int(l.inputs, "q"));
    auto given = in.answers_given.find(q);
    if (given == in.answers_given.end()) continue;
    const Json want = given->second;
    // Not completed (a run that did not finish): lost, and its answer has
    // not been passed on yet; flipped only if recorded otherwise.
    if (l.completions == 0 && (l.answer.is_null() || l.answer == want)) {
      continue;
    }
    bool ok = l.answer == want;
    // The answer is the response: the Echo child carries it.
    int echoes = 0;
    for (const auto& [cid, c] : lives) {
      if (c.parent != id || c.type != "Echo") continue;
      echoes++;
      ok = ok && c.inputs.value("answer", Json()) == want;
    }
    if (ok && echoes == 1) continue;
    v->flipped++;
    v->errors.push_back("flipped: " + Name(id, l) + " was answered " +
                        want.dump() + "; the log says " + l.answer.dump() +
                        " and it has " + std::to_string(echoes) +
                        " Echo children");
  }
}

void IdleClaims(const CheckInput& in, RunVerdict* v) {
  if (in.idle_claim_ms <= 0) return;
  static const std::set<std::string> kEnds = {"task_started", "task_reset",
                                              "task_failed", "task_completed",
                                              "task_adopted"};
  std::map<int64_t, const Json*> open;  // task -> its claim
  auto idle = [&](const Json& claim, const std::string& until) {
    v->idle_claims++;
    v->errors.push_back("idle claim: task " + std::to_string(Int(claim, "id")) +
                        " attempt " + std::to_string(Int(claim, "attempt")) +
                        " claimed by " + claim.value("worker", "?") + " " +
                        until);
  };
  for (const Json& e : in.audit) {
    if (!e.is_object() || !e.contains("ts") || !e.contains("id")) continue;
    const std::string event = e.value("event", "");
    const int64_t id = Int(e, "id");
    if (event == "task_claimed") {
      open[id] = &e;
      continue;
    }
    auto it = open.find(id);
    if (it == open.end() || kEnds.count(event) == 0) continue;
    const int64_t waited = Int(e, "ts") - Int(*it->second, "ts");
    if (waited > in.idle_claim_ms) {
      idle(*it->second, "was neither started nor ended for " +
                            std::to_string(waited) + " ms (then " + event +
                            ")");
    }
    open.erase(it);
  }
  for (const auto& [id, claim] : open) {
    idle(*claim, "was never started nor ended");
  }
}

}  // namespace

std::vector<LedgerRecord> ParseLedger(const std::string& text,
                                      std::vector<std::string>* errors) {
  std::vector<LedgerRecord> out;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    n++;
    const Json j = Json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("e")) {
      errors->push_back("ledger line " + std::to_string(n) +
                        " is not a record: " + line);
      continue;
    }
    LedgerRecord r;
    r.e = Str(j, "e");
    r.m = Str(j, "m");
    r.run = Str(j, "run");
    r.kind = Str(j, "kind");
    r.task = Int(j, "task");
    r.attempt = Int(j, "attempt");
    r.pid = Int(j, "pid");
    r.mono = Int(j, "mono");
    r.holder = j.value("holder", Json());
    r.via = Str(j, "via");
    r.before = Int(j, "before");
    r.after = Int(j, "after");
    r.wall_ms = Int(j, "wall_ms");
    r.host_wall_ms = Int(j, "host_wall_ms");
    r.offset_s = Int(j, "offset_s");
    r.libs = Str(j, "libs");
    r.want_libs = Str(j, "want_libs");
    out.push_back(std::move(r));
  }
  return out;
}

RunVerdict CheckRun(const CheckInput& in,
                    const std::vector<LedgerRecord>& ledger,
                    const std::vector<Fault>& faults) {
  RunVerdict v;
  v.run = in.run;
  v.status = in.status;
  const std::map<int64_t, TaskLife> lives = ReadLives(in.audit);
  for (const auto& [id, l] : lives) v.tasks += l.type.empty() ? 0 : 1;
  std::vector<const LedgerRecord*> starts;
  for (const LedgerRecord& r : ledger) {
    if (r.e == "start" && r.run == in.run) starts.push_back(&r);
  }
  if (in.status != "completed") {
    v.errors.push_back("run " + in.run + " ended " + in.status +
                       ", not completed");
  }
  Lost(lives, &v);
  Duplicated(lives, starts, &v);
  Overlapped(ledger, in.run, faults, &v);
  ExtraRuns(lives, starts, faults, &v);
  Flipped(in, lives, &v);
  IdleClaims(in, &v);
  return v;
}

std::vector<std::string> CheckCalibration(
    const std::vector<LedgerRecord>& ledger) {
  std::vector<std::string> errors;
  for (const LedgerRecord& r : ledger) {
    if (r.e != "calibration") continue;
    // Each side rounds down to the ms: allow one.
    if (r.mono + 1 < r.before || r.mono > r.after + 1) {
      errors.push_back("machine " + r.m + "'s monotonic clock read " +
                       std::to_string(r.mono) + " between the host's " +
                       std::to_string(r.before) + " and " +
                       std::to_string(r.after) + ": not the shared clock");
    }
    const int64_t off = r.wall_ms - r.host_wall_ms - r.offset_s * 1000;
    if (off < -5000 || off > 5000) {
      errors.push_back("machine " + r.m + "'s wall clock is off by " +
                       std::to_string(r.wall_ms - r.host_wall_ms) +
                       " ms, not the " + std::to_string(r.offset_s) +
                       " s asked for");
    }
    const std::string want =
        r.want_libs.empty() ? "jemalloc,faketime" : r.want_libs;
    if (r.offset_s != 0 && r.libs != want) {
      errors.push_back("machine " + r.m + ": a program linked like wizq " +
                       "maps \"" + r.libs + "\", not \"" + want + "\"");
    }
  }
  return errors;
}

bool InFlight(const Fault& f, const std::vector<LedgerRecord>& ledger) {
  // An attempt runs from its start to its end; one that has none (killed)
  // to the next start of its task, the latest it can have ended by.
  using Key = std::tuple<std::string, int64_t, int64_t>;  // run, task, pid
  std::map<Key, std::pair<int64_t, int64_t>> span;
  std::map<std::pair<std::string, int64_t>, std::vector<Key>> open;
  for (const LedgerRecord& r : ledger) {
    const Key key{r.run, r.task, r.pid};
    if (r.e == "start") {
      for (const Key& k : open[{r.run, r.task}]) {
        if (span[k].second == INT64_MAX) span[k].second = r.mono;
      }
      span[key] = {r.mono, INT64_MAX};
      if (r.m == f.machine || f.machine.empty()) {
        open[{r.run, r.task}].push_back(key);
      }
    } else if (r.e == "end" && span.count(key)) {
      span[key].second = r.mono;
    }
  }
  for (const auto& [task, keys] : open) {
    for (const Key& k : keys) {
      if (span[k].first <= f.t1 && span[k].second >= f.t0) return true;
    }
  }
  return false;
}

}  // namespace wizq::machines
