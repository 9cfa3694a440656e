#include "tools/crashtest/audit.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string_view>

#include "audit/log.h"
#include "audit/log_format.h"
#include "fs/env.h"
#include "queue/dir/queue.h"
#include "queue/events.h"

namespace wizq::crashtest {
namespace {

bool IsResult(const LoggedEvent& e) {
  return e.event == "task_completed" ||
         (e.event == "task_failed" && e.reason != "worker_lost");
}

// The fields crashtest reads of one decoded event.
struct Extract {
  LoggedEvent* out;
  void operator()(const TaskSubmitted& e) const {
    out->id = e.id;
    out->type = e.type;
    out->dedup_key = e.dedup_key;
  }
  void operator()(const TaskClaimed& e) const {
    out->id = e.id;
    out->attempt = e.attempt;
  }
  void operator()(const TaskAdopted& e) const {
    out->id = e.id;
    out->attempt = e.attempt;
  }
  void operator()(const TaskFailed& e) const {
    out->id = e.id;
    out->reason = e.reason;
    out->will_retry = e.will_retry;
  }
  void operator()(const TaskCompleted& e) const { out->id = e.id; }
  void operator()(const TaskReset& e) const { out->id = e.id; }
  void operator()(const RunFinished& e) const { out->status = e.status; }
  template <typename Other>
  void operator()(const Other&) const {}
};

// "claim Download#2 #3; done ReadManifest#1": the tasks of a commit, by
// what happened to them, each step named once per group.
std::string Describe(const Commit& c,
                     const std::map<int64_t, std::string>& steps) {
  static const std::pair<const char*, const char*> kVerbs[] = {
      {"run_started", "start"},   {"task_completed", "done"},
      {"task_failed", "fail"},    {"task_reset", "reset"},
      {"task_adopted", "adopt"},  {"task_claimed", "claim"},
      {"run_finished", "finish"}, {"worker_left", "worker left"}};
  std::string out;
  for (const auto& [event, verb] : kVerbs) {
    std::string group, last_step;
    for (const LoggedEvent& e : c) {
      if (e.event != event) continue;
      const int64_t id = e.id;
      if (id == 0) {
        group = verb;
        continue;
      }
      auto it = steps.find(id);
      const std::string step = it == steps.end() ? "?" : it->second;
      if (group.empty()) group = verb;
      group += step == last_step ? " #" : " " + step + "#";
      group += std::to_string(id);
      last_step = step;
    }
    if (!group.empty()) out += (out.empty() ? "" : "; ") + group;
  }
  return out.empty() ? "(no task)" : out;
}

// "2nd", "3rd", "11th".
std::string Ordinal(int n) {
  const char* suffix = "th";
  if (n % 100 < 11 || n % 100 > 13) {
    if (n % 10 == 1) suffix = "st";
    if (n % 10 == 2) suffix = "nd";
    if (n % 10 == 3) suffix = "rd";
  }
  return std::to_string(n) + suffix;
}

// Updates `steps` (task id -> step) with the submissions of `c`.
void NoteSteps(const Commit& c, std::map<int64_t, std::string>* steps) {
  for (const LoggedEvent& e : c) {
    if (e.event == "task_submitted") (*steps)[e.id] = e.type;
  }
}

}  // namespace

Status ReadCommits(const std::string& install_dir, std::vector<Commit>* out) {
  out->clear();
  const std::string path = WizardDir(install_dir) + "/audit.jsonl";
  std::string data;
  WIZQ_RETURN_IF_ERROR(Env::Posix()->ReadFile(path, &data));
  LogParseResult log;
  WIZQ_RETURN_IF_ERROR(ParseLog(path, data, 0, 1, &log));
  EventDecoder decoder;
  Commit batch;
  for (const LogRecord& r : log.records) {
    EventHeader header;
    Event event;
    Status s = decoder.Decode(r.line, &header, &event);
    if (!s.ok())
      return s.Annotate(path + " at byte " + std::to_string(r.offset));
    LoggedEvent e;
    e.event = header.name;
    std::visit(Extract{&e}, event);
    batch.push_back(std::move(e));
    // The commit field comes last before the crc (audit/log_format.h).
    const std::string_view body =
        r.line.substr(0, r.line.size() - log_format::kCrcSuffixLength);
    if (body.size() >= log_format::kCommitField.size() &&
        body.substr(body.size() - log_format::kCommitField.size()) ==
            log_format::kCommitField) {
      out->push_back(std::move(batch));
      batch.clear();
    }
  }
  return Status::OK();
}

std::vector<KillPoint> KillPointsOf(const std::vector<Commit>& commits) {
  std::vector<KillPoint> out;
  std::map<int64_t, std::string> steps;
  std::map<std::string, int> seen;  // passes of each crash_if so far
  std::vector<int64_t> order;       // each kill point's task id
  constexpr int64_t kLast = std::numeric_limits<int64_t>::max();
  for (const Commit& c : commits) {
    NoteSteps(c, &steps);
    const std::string what = Describe(c, steps);
    for (const LoggedEvent& e : c) {
      const std::string& ev = e.event;
      const bool run = ev == "run_started" || ev == "run_finished";
      if (!run && ev != "task_claimed" && !IsResult(e)) continue;
      std::string name = ev, tag = "\"event\":\"" + ev + "\",";
      if (!run) {
        const int64_t id = e.id;
        name += " #" + std::to_string(id) + " " + steps[id];
        tag += "\"id\":" + std::to_string(id) + ",";
      }
      const int n = ++seen[tag];
      if (n > 1) name += " (" + Ordinal(n) + ")";
      if (IsResult(e)) {
        out.push_back({"log.before_write:" + std::to_string(n), tag,
                       "before " + name,
                       "finished, not durable: " + Describe({e}, steps)});
      }
      out.push_back(
          {"log.after_sync:" + std::to_string(n), tag, "after " + name, what});
      order.push_back(run ? (ev == "run_started" ? 0 : kLast) : e.id);
      if (IsResult(e)) order.push_back(order.back());
    }
  }
  // By task id, each task's own in log order: the same list whatever
  // order parallel tasks finished in.
  std::vector<size_t> index(out.size());
  for (size_t i = 0; i < index.size(); i++) index[i] = i;
  std::stable_sort(index.begin(), index.end(),
                   [&](size_t a, size_t b) { return order[a] < order[b]; });
  std::vector<KillPoint> sorted;
  for (size_t i : index) sorted.push_back(std::move(out[i]));
  return sorted;
}

std::vector<KillPoint> Sample(const std::vector<KillPoint>& all, int n) {
  if (n <= 0 || static_cast<size_t>(n) >= all.size()) return all;
  std::vector<KillPoint> out;
  for (int k = 0; k < n; k++) {
    const size_t i =
        static_cast<size_t>((k + 0.5) * static_cast<double>(all.size()) / n);
    out.push_back(all[std::min(i, all.size() - 1)]);
  }
  return out;
}

std::map<std::string, TaskRuns> ExecutionsOf(const std::vector<Commit>& log) {
  std::map<int64_t, std::string> key_of;
  std::map<int64_t, std::set<int64_t>> attempts;
  std::map<int64_t, int64_t> last_claim;
  std::map<std::string, TaskRuns> out;
  for (const Commit& c : log) {
    for (const LoggedEvent& e : c) {
      const std::string& ev = e.event;
      const int64_t id = e.id;
      if (ev == "task_submitted") {
        const std::string key = e.type + " " + e.dedup_key;
        key_of[id] = key;
        out[key].name = e.type + "#" + std::to_string(id);
        out[key].step = e.type;
      } else if (ev == "task_claimed") {
        attempts[id].insert(e.attempt);
        last_claim[id] = e.attempt;
      } else if (ev == "task_adopted" && last_claim[id] > e.attempt) {
        attempts[id].erase(last_claim[id]);  // that claim ran nothing
      }
    }
  }
  for (const auto& [id, set] : attempts) {
    auto it = key_of.find(id);
    if (it != key_of.end())
      out[it->second].executions = static_cast<int>(set.size());
  }
  return out;
}

std::vector<std::string> AdoptedOf(const std::vector<Commit>& log) {
  std::vector<std::string> out;
  std::map<int64_t, std::string> steps;
  for (const Commit& c : log) {
    NoteSteps(c, &steps);
    for (const LoggedEvent& e : c) {
      if (e.event != "task_adopted") continue;
      const int64_t id = e.id;
      out.push_back(steps[id] + "#" + std::to_string(id));
    }
  }
  return out;
}

RunEnd EndOf(const std::vector<Commit>& log) {
  RunEnd end;
  std::map<int64_t, std::string> steps;
  for (const Commit& c : log) {
    NoteSteps(c, &steps);
    for (const LoggedEvent& e : c) {
      if (e.event == "run_finished") end.status = e.status;
      if (e.event == "task_failed" && !e.will_retry) {
        end.failed.push_back(steps[e.id] + "#" + std::to_string(e.id) + " (" +
                             e.reason + ")");
      }
    }
  }
  return end;
}

}  // namespace wizq::crashtest
