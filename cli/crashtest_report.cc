#include "cli/crashtest_report.h"

#include <cstdio>
#include <map>
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

// The last column: what ended differently.
std::string Outcome(const Report& r, const CaseResult& c) {
  if (!c.error.empty()) return "error: " + c.error;
  std::string out = ListSome(c.differences, 2);
  if (c.status != r.undisturbed_status) {
    out = "run " + (c.status.empty() ? "unfinished" : c.status) + " (" +
          ListSome(c.failed, 2) + "); files: " + out;
  }
  return out;
}

void PrintVerdict(const Report& r) {
  size_t bad = 0;
  for (const CaseResult& c : r.cases) bad += c.matches ? 0 : 1;
  if (bad == 0) {
    std::printf(
        "\nverdict: SAFE: all %zu kill points end with the same files and "
        "run status as the undisturbed run\n",
        r.cases.size());
    return;
  }
  std::printf("\nverdict: NOT SAFE: %zu of %zu kill points end differently\n",
              bad, r.cases.size());
  std::map<std::string, std::set<size_t>> at;  // step -> kill points
  std::map<std::string, std::set<std::string>> files;
  for (size_t i = 0; i < r.cases.size(); i++) {
    const CaseResult& c = r.cases[i];
    if (c.matches) continue;
    const std::string n = std::to_string(i + 1);
    if (!c.error.empty()) {
      std::printf("  kill point %s: %s\n", n.c_str(), c.error.c_str());
    } else if (c.status != r.undisturbed_status) {
      std::printf(
          "  kill point %s: the run ended %s: %s; a task killed mid-run "
          "needs an attempt left (give its step max_retries >= 1)\n",
          n.c_str(), c.status.c_str(), ListSome(c.failed, 3).c_str());
    } else if (c.reexecuted.empty()) {
      std::printf(
          "  kill point %s: files differ although no task ran again: the end "
          "state is not reproducible (--ignore what is meant to differ)\n",
          n.c_str());
    }
    for (const TaskRuns& t : c.reexecuted) {
      at[t.step].insert(i + 1);
      for (const std::string& d : c.differences) files[t.step].insert(d);
    }
  }
  for (const auto& [step, points] : at) {
    std::vector<std::string> ns;
    for (size_t p : points) ns.push_back(std::to_string(p));
    const std::vector<std::string> fs(files[step].begin(), files[step].end());
    std::printf(
        "  step %s is not safe to re-run: it ran again at kill point(s) %s, "
        "which end with %s\n",
        step.c_str(), ListSome(ns, 10).c_str(), ListSome(fs, 3).c_str());
  }
}

}  // namespace

std::vector<std::string> UnsafeSteps(const Report& r) {
  std::set<std::string> steps;
  for (const CaseResult& c : r.cases) {
    if (c.matches) continue;
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
  std::printf("undisturbed run: %s, %zu tasks, %zu paths, %.1f s\n\n",
              r.undisturbed_status.c_str(), r.tasks, r.files,
              static_cast<double>(r.undisturbed_ms) / 1000.0);
  std::printf("%3s  %-16s  %-36s  %-24s  %s\n", "#", "kill point",
              "at this step", "ran more than once", "files that differ");
  for (size_t i = 0; i < r.cases.size(); i++) {
    const CaseResult& c = r.cases[i];
    std::string name = c.point.name;
    if (!c.crashed && c.error.empty()) name += " (not reached)";
    std::printf("%3zu  %-16s  %-36s  %-24s  %s\n", i + 1, Cut(name, 16).c_str(),
                Cut(c.point.what, 36).c_str(),
                Cut(ListSome(Names(c.reexecuted), 2), 24).c_str(),
                Outcome(r, c).c_str());
  }
  PrintVerdict(r);
}

void PrintJson(const Report& r) {
  OrderedJson out;
  out["workflow"] = r.workflow;
  out["mode"] = r.mode;
  out["kill_points_total"] = r.kill_points_total;
  out["kill_points_tested"] = r.cases.size();
  out["undisturbed"] = {{"status", r.undisturbed_status},
                        {"duration_ms", r.undisturbed_ms},
                        {"tasks", r.tasks},
                        {"paths", r.files}};
  OrderedJson cases = OrderedJson::array();
  bool ok = true;
  for (const CaseResult& c : r.cases) {
    OrderedJson re = OrderedJson::array();
    for (const TaskRuns& t : c.reexecuted) {
      re.push_back(
          {{"task", t.name}, {"step", t.step}, {"executions", t.executions}});
    }
    OrderedJson j = {
        {"kill_point", c.point.name},
        {"crash_at", c.point.crash_at},
        {"at", c.point.what},
        {"crashed", c.crashed},
        {"resumes", c.resumes},
        {"status", c.status},
        {"exit_code", c.exit_code},
        {"reexecuted", re},
        {"differences", c.differences},
        {"failed_tasks", c.failed},
        {"error", c.error.empty() ? OrderedJson() : OrderedJson(c.error)},
        {"matches", c.matches}};
    cases.push_back(std::move(j));
    ok = ok && c.matches;
  }
  out["results"] = std::move(cases);
  out["unsafe_steps"] = UnsafeSteps(r);
  out["scratch"] = r.scratch.empty() ? OrderedJson() : OrderedJson(r.scratch);
  out["ok"] = ok;
  std::printf("%s\n", out.dump(2).c_str());
}

}  // namespace wizq::crashtest
