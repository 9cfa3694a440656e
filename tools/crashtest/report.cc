#include "tools/crashtest/report.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace wizq::crashtest {
namespace {

using OrderedJson = nlohmann::ordered_json;

std::string Cut(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - 3) + "...";
}

// "a, b (+3 more)"
std::string ListSome(const std::vector<std::string>& items, size_t max) {
  if (items.empty()) return "-";
  std::string out;
  for (size_t i = 0; i < items.size() && i < max; i++) {
    out += (i ? ", " : "") + items[i];
  }
  if (items.size() > max) {
    out += " (+" + std::to_string(items.size() - max) + " more)";
  }
  return out;
}

std::vector<std::string> Names(const std::vector<TaskRuns>& runs) {
  std::vector<std::string> out;
  for (const TaskRuns& t : runs) {
    out.push_back(t.name + " x" + std::to_string(t.executions));
  }
  return out;
}

std::vector<std::string> Described(const std::vector<PathDiff>& diffs) {
  std::vector<std::string> out;
  for (const PathDiff& d : diffs) out.push_back(d.Describe());
  return out;
}

// The last column: what ended differently.
std::string Outcome(const Report& r, const CaseResult& c) {
  if (!c.error.empty()) return "error: " + c.error;
  std::string out = ListSome(Described(c.differences), 2);
  if (c.status != r.undisturbed_status) {
    out = "run " + (c.status.empty() ? "unfinished" : c.status) + " (" +
          ListSome(c.failed, 2) + "); files: " + out;
  }
  return out;
}

// "step Build is", "steps Build, Ship are".
std::string StepsAre(const std::vector<std::string>& steps) {
  return (steps.size() == 1 ? "step " : "steps ") + ListSome(steps, 10) +
         (steps.size() == 1 ? " is" : " are");
}

// The verdict's first line names what to fix, not how many kill points
// showed it (with tasks in parallel, that depends on timing).
void PrintHeadline(const Report& r, size_t bad) {
  const std::vector<std::string> unsafe = UnsafeSteps(r);
  if (bad == 0) {
    std::printf(
        "\nverdict: SAFE: all %zu kill points end with the same files and "
        "run status as the undisturbed run\n",
        r.cases.size());
  } else if (!unsafe.empty()) {
    std::printf("\nverdict: NOT SAFE: %s not safe to re-run\n",
                StepsAre(unsafe).c_str());
  } else {
    std::printf("\nverdict: NOT SAFE: %zu of %zu kill points end differently\n",
                bad, r.cases.size());
  }
}

// Each unsafe step: the kill points where it ran again and what they end
// with.
void PrintUnsafeSteps(const Report& r) {
  std::map<std::string, std::vector<std::string>> at;  // step -> kill points
  std::map<std::string, std::set<std::string>> files;
  for (const CaseResult& c : r.cases) {
    if (c.matches || !c.error.empty()) continue;
    for (const TaskRuns& t : c.reexecuted) {
      std::vector<std::string>& points = at[t.step];
      if (points.empty() || points.back() != c.point.name) {
        points.push_back(c.point.name);
      }
      for (const PathDiff& d : c.differences) {
        files[t.step].insert(d.Describe());
      }
    }
  }
  for (const auto& [step, points] : at) {
    const std::vector<std::string> fs(files[step].begin(), files[step].end());
    std::printf("  step %s ran again at %s, which end%s with %s\n",
                step.c_str(), ListSome(points, 4).c_str(),
                points.size() == 1 ? "s" : "", ListSome(fs, 3).c_str());
  }
}

void PrintVerdict(const Report& r) {
  size_t bad = 0;
  for (const CaseResult& c : r.cases) bad += c.matches ? 0 : 1;
  PrintHeadline(r, bad);
  for (const CaseResult& c : r.cases) {
    if (c.matches) continue;
    const char* n = c.point.name.c_str();
    if (!c.error.empty()) {
      std::printf("  %s: %s\n", n, c.error.c_str());
    } else if (c.status != r.undisturbed_status) {
      std::printf(
          "  %s: the run ended %s: %s; a task killed mid-run needs an "
          "attempt left (give its step max_retries >= 1)\n",
          n, c.status.c_str(), ListSome(c.failed, 3).c_str());
    } else if (c.reexecuted.empty()) {
      std::printf(
          "  %s: %s although no task ran again: the end state is not "
          "reproducible (--baseline-runs finds what differs without a "
          "crash; --ignore what is meant to differ)\n",
          n, ListSome(Described(c.differences), 3).c_str());
    }
  }
  PrintUnsafeSteps(r);
}

// What differs between the undisturbed runs, and what only moved.
void PrintNotes(const Report& r) {
  if (!r.nondeterministic.empty()) {
    std::printf(
        "\nnot compared: %zu path(s) differ between the %d undisturbed runs "
        "(no step is blamed for them; --ignore them to leave them out):\n",
        r.nondeterministic.size(), r.baseline_runs);
    for (const Nondeterministic& n : r.nondeterministic) {
      std::printf("  %s (undisturbed run %d against run 1)\n",
                  n.diff.Describe().c_str(), n.run);
    }
  }
  std::map<std::string, int> reordered;
  for (const CaseResult& c : r.cases) {
    for (const std::string& p : c.reordered) reordered[p]++;
  }
  for (const auto& [path, n] : reordered) {
    std::printf(
        "note: %s has the same lines in another order at %d kill point(s): "
        "tasks ran in another order; not counted as a difference\n",
        path.c_str(), n);
  }
}

OrderedJson DiffJson(const PathDiff& d) {
  return {{"path", d.path},
          {"what", d.what},
          {"added", d.added},
          {"missing", d.missing}};
}

OrderedJson CaseJson(const CaseResult& c) {
  OrderedJson re = OrderedJson::array();
  for (const TaskRuns& t : c.reexecuted) {
    re.push_back(
        {{"task", t.name}, {"step", t.step}, {"executions", t.executions}});
  }
  OrderedJson diff = OrderedJson::array();
  for (const PathDiff& d : c.differences) diff.push_back(DiffJson(d));
  return {{"kill_point", c.point.name},
          {"crash_at", c.point.crash_at},
          {"crash_if", c.point.crash_if},
          {"at", c.point.what},
          {"crashed", c.crashed},
          {"resumes", c.resumes},
          {"status", c.status},
          {"exit_code", c.exit_code},
          {"reexecuted", re},
          {"adopted", c.adopted},
          {"differences", Described(c.differences)},
          {"diff", diff},
          {"reordered", c.reordered},
          {"failed_tasks", c.failed},
          {"error", c.error.empty() ? OrderedJson() : OrderedJson(c.error)},
          {"matches", c.matches}};
}

}  // namespace

std::vector<std::string> UnsafeSteps(const Report& r) {
  std::set<std::string> steps;
  for (const CaseResult& c : r.cases) {
    if (c.matches || !c.error.empty()) continue;
    for (const TaskRuns& t : c.reexecuted) steps.insert(t.step);
  }
  return std::vector<std::string>(steps.begin(), steps.end());
}

void PrintTable(const Report& r) {
  std::printf("wizq crashtest %s: %zu of %zu kill points, %s\n",
              r.workflow.c_str(), r.cases.size(), r.kill_points_total,
              r.mode == "power_cut"
                  ? "power cut (wizq and every task process tree SIGKILLed)"
                  : "orchestrator only (wizq SIGKILLed, task trees run on)");
  std::printf("undisturbed: %d run(s), %s, %zu tasks, %zu paths, %.1f s\n\n",
              r.baseline_runs, r.undisturbed_status.c_str(), r.tasks, r.files,
              static_cast<double>(r.undisturbed_ms) / 1000.0);
  std::printf("%3s  %-40s  %-24s  %s\n", "#", "kill point",
              "ran more than once", "files that differ");
  for (size_t i = 0; i < r.cases.size(); i++) {
    const CaseResult& c = r.cases[i];
    std::string name = c.point.name;
    if (!c.crashed && c.error.empty()) name += " (not reached)";
    std::printf("%3zu  %-40s  %-24s  %s\n", i + 1, Cut(name, 40).c_str(),
                Cut(ListSome(Names(c.reexecuted), 2), 24).c_str(),
                Outcome(r, c).c_str());
  }
  PrintVerdict(r);
  PrintNotes(r);
}

void PrintJson(const Report& r) {
  OrderedJson out;
  out["workflow"] = r.workflow;
  out["mode"] = r.mode;
  out["kill_points_total"] = r.kill_points_total;
  out["kill_points_tested"] = r.cases.size();
  out["undisturbed"] = {{"status", r.undisturbed_status},
                        {"duration_ms", r.undisturbed_ms},
                        {"runs", r.baseline_runs},
                        {"tasks", r.tasks},
                        {"paths", r.files}};
  OrderedJson nondet = OrderedJson::array();
  for (const Nondeterministic& n : r.nondeterministic) {
    OrderedJson j = DiffJson(n.diff);
    j["run"] = n.run;
    nondet.push_back(std::move(j));
  }
  out["nondeterministic"] = std::move(nondet);
  OrderedJson cases = OrderedJson::array();
  bool ok = true;
  for (const CaseResult& c : r.cases) {
    cases.push_back(CaseJson(c));
    ok = ok && c.matches;
  }
  out["results"] = std::move(cases);
  out["unsafe_steps"] = UnsafeSteps(r);
  out["scratch"] = r.scratch.empty() ? OrderedJson() : OrderedJson(r.scratch);
  out["ok"] = ok;
  std::printf("%s\n", out.dump(2).c_str());
}

}  // namespace wizq::crashtest
