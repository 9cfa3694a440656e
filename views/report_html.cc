#include "views/report_html.h"

#include <string>
#include <vector>

#include "queue/history.h"
#include "views/log_table.h"
#include "views/progress_line.h"
#include "views/report_internal.h"
#include "views/status_view.h"
#include "views/view_util.h"

namespace wizq {
namespace {

constexpr size_t kTitleBytes = 2000;  // a cut value's tooltip

const char kStyle[] = R"css(
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.summary span{display:inline-block;margin-right:16px}
.st-completed,.done{color:#1a7f37}.st-failed,.failed{color:#cf222e}
.st-interrupted,.st-unfinished{color:#bc4c00}.st-running,.in_progress{color:#0969da}
.st-paused,.pending{color:#6e7781}
ul.tree,ul.tree ul{list-style:none;padding-left:18px;margin:0}
ul.tree{padding-left:0}li.task{margin:1px 0;cursor:pointer}
li.task>.row:hover{background:#eef}li.task .val{color:#555;font-family:monospace}
li.task .state{font-weight:600}.err{color:#cf222e}.old-err{color:#8c959f}
ul.failures{padding-left:18px}ul.failures pre{margin:2px 0;padding:4px 8px;background:#f0f0f0;font-size:12px;white-space:pre-wrap}
ul.failures .path{color:#6e7781;font-size:12px}
svg text{font:11px sans-serif;fill:#333}
.lane-bg{fill:#fff;stroke:#ddd}.grid{stroke:#eee}
rect.attempt{stroke:#0003}rect.attempt.completed{fill:#4ac26b}
rect.attempt.failed{fill:#ff8182}rect.attempt.reset{fill:#f0b72f}
rect.attempt.lost{fill:#57606a}rect.attempt.running{fill:#54aeff}
rect.attempt.unstarted{fill:#fff;stroke:#8c959f;stroke-dasharray:3 2}
rect.attempt.adopted{stroke:#6639ba;stroke-width:2}
rect.attempt.hl{stroke:#000;stroke-width:3}
.marker.crash path{stroke:#cf222e;stroke-width:3}
.marker.resume line{stroke:#0969da;stroke-dasharray:4 3}
.marker.resume text{fill:#0969da}.marker.finish line{stroke:#1a7f37}
.marker.finish text{fill:#1a7f37}.marker.pause line{stroke:#8250df;stroke-dasharray:2 2}
.marker.retry circle{fill:#fff;stroke:#cf222e;stroke-width:2}
.marker.wait rect{fill:#6639ba}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
table{border-collapse:collapse;font-size:12px}
td,th{border-bottom:1px solid #ddd;padding:2px 8px;text-align:left;white-space:nowrap}
td.val{font-family:monospace}
.wrap{overflow-x:auto}
)css";

// Clicking a task in the tree outlines its attempts in the timeline.
const char kScript[] = R"js(
document.querySelectorAll('li.task>.row').forEach(function(row){
  row.addEventListener('click',function(ev){
    var id=row.parentNode.getAttribute('data-task-id');
    document.querySelectorAll('rect.attempt').forEach(function(r){
      r.classList.toggle('hl',r.getAttribute('data-task-id')===id);});
    ev.stopPropagation();});});
)js";

// A value cut in the middle to `max` bytes (rows stay apart), whole on
// hover when cut.
std::string Value(const std::string& value, size_t max, const char* tag) {
  const std::string title =
      value.size() <= max
          ? ""
          : " title=\"" + HtmlEscape(Shorten(value, kTitleBytes)) + "\"";
  return "<" + std::string(tag) + " class=\"val\"" + title + ">" +
         HtmlEscape(ShortenMiddle(value, max)) + "</" + tag + ">";
}

// "#3 <b>Step</b> <span class=val>...</span> (finally)".
std::string TaskHead(const Task& t) {
  std::string s =
      "#" + std::to_string(t.id) + " <b>" + HtmlEscape(t.type) + "</b>";
  if (t.inputs != "{}" && t.inputs != "null") {
    s += " " + Value(t.inputs, 80, "span");
  }
  s += HookLabel(t);
  return s;
}

void TaskItem(const RunView& v, const Task& t, std::string* out) {
  const char* state = TaskStateName(t.state);
  const std::string id = std::to_string(t.id);
  *out += "<li class=\"task\" id=\"task-" + id + "\" data-task-id=\"" + id +
          "\" data-state=\"" + state + "\"><span class=\"row\">" + TaskHead(t);
  *out += " <span class=\"state " + std::string(state) + "\">" + state +
          "</span> attempts " + std::to_string(t.attempts) + "/" +
          std::to_string(t.max_attempts);
  if (t.reused_from != 0) *out += " (reused)";
  if (!t.error_reason.empty()) {
    // A done task's error is an earlier attempt's: kept, in grey.
    *out += t.state == TaskState::kDone
                ? " <span class=\"old-err\" title=\"an earlier attempt failed; "
                  "a later one completed\">earlier: "
                : " <span class=\"err\">";
    *out += HtmlEscape(t.error_reason + ": " + Shorten(t.error_message, 120)) +
            "</span>";
  }
  *out += "</span>";
  if (!t.children.empty()) {
    *out += "<ul>";
    for (int64_t c : t.children) TaskItem(v, v.Find(c), out);
    *out += "</ul>";
  }
  *out += "</li>\n";
}

std::string Summary(const ReportInput& in) {
  const RunCounts& c = in.view->counts;
  const RunHistory& h = *in.history;
  const RunInfo& r = in.view->run;
  int crashes = 0;
  for (const WorkerRecord& w : h.workers) crashes += w.lost ? 1 : 0;
  int retries = 0;
  for (const AttemptRecord& a : h.attempts) retries += a.will_retry ? 1 : 0;
  const int64_t end = r.finished_ms > 0 ? r.finished_ms : h.last_ms;
  std::string s = "<div class=\"summary\">";
  s += "<span>status <b class=\"st-" + HtmlEscape(in.live_status) + "\">" +
       HtmlEscape(in.live_status) + "</b></span>";
  s += "<span>" + std::to_string(c.total) +
       " tasks: " + std::to_string(c.of(TaskState::kDone)) + " done, " +
       std::to_string(c.of(TaskState::kFailed)) + " failed, " +
       std::to_string(c.of(TaskState::kInProgress)) + " in progress, " +
       std::to_string(c.of(TaskState::kPending)) + " pending</span>";
  s += "<span>" + std::to_string(h.attempts.size()) + " attempts, " +
       std::to_string(retries) + " retried</span>";
  s += "<span id=\"crash-count\">" + std::to_string(crashes) +
       " crash(es), resumed " + std::to_string(r.resumes) + " time(s)</span>";
  s += "<span>started " + FormatTime(r.started_ms) + ", " +
       (r.finished_ms > 0 ? "took " : "so far ") +
       FormatDuration(end - r.started_ms) + "</span></div>\n";
  return s;
}

// The failed tasks, first on the page: each with its reason and message,
// the last lines of its last attempt's stderr and that file's path (as
// `wizq run` lists them at its end). "" when no task failed.
std::string Failures(const ReportInput& in) {
  std::string items;
  int n = 0;
  for (const Task& t : in.view->tasks) {
    if (t.state != TaskState::kFailed) continue;
    n++;
    items += "<li data-task-id=\"" + std::to_string(t.id) +
             "\"><a href=\"#task-" + std::to_string(t.id) + "\">" +
             TaskHead(t) + "</a> <span class=\"err\">" +
             HtmlEscape(t.error_reason + ": " +
                        Shorten(FailureMessage(t.error_message), 300)) +
             "</span>";
    std::vector<std::string> tail;
    std::string path;
    if (LastStderrLines(t, in.source, &tail, &path) && !tail.empty()) {
      items += "<pre>";
      for (const std::string& line : tail) {
        items += HtmlEscape(Shorten(line, 300)) + "\n";
      }
      items +=
          "</pre><div class=\"path\">stderr: " + HtmlEscape(path) + "</div>";
    }
    items += "</li>\n";
  }
  if (n == 0) return "";
  return "<section id=\"failures\"><h2>" + std::to_string(n) +
         " task(s) failed</h2>\n<ul class=\"failures\">\n" + items +
         "</ul></section>\n";
}

std::string AttemptTable(const RunHistory& h) {
  std::string s =
      "<div class=\"wrap\"><table id=\"attempts\"><tr><th>task</th><th>step"
      "</th><th>value</th><th>try</th><th>worker</th><th>start</th><th>"
      "duration</th><th>result</th></tr>\n";
  for (const AttemptRecord& a : h.attempts) {
    const int64_t end = a.end_seq > 0 ? a.end_ms : h.last_ms;
    s += "<tr data-task-id=\"" + std::to_string(a.task_id) + "\"><td>#" +
         std::to_string(a.task_id) + "</td><td>" + HtmlEscape(a.step) +
         "</td>" + Value(a.value, 60, "td") + "<td>" +
         std::to_string(a.attempt) + "</td><td>" +
         HtmlEscape(a.agent.empty() ? a.worker : a.worker + ":" + a.agent) +
         "</td><td>" + FormatTime(a.start_ms) + "</td><td>" +
         FormatDuration(end - a.start_ms) + (a.end_seq > 0 ? "" : "+") +
         "</td><td>" + HtmlEscape(AttemptResultText(a)) + "</td></tr>\n";
  }
  return s + "</table></div>\n";
}

const char kLegend[] =
    "<div class=\"legend\"><span><i style=\"background:#4ac26b\"></i>"
    "completed</span><span><i style=\"background:#ff8182\"></i>failed</span>"
    "<span><i style=\"background:#57606a\"></i>lost with its worker</span>"
    "<span><i style=\"background:#f0b72f\"></i>put back</span><span><i "
    "style=\"border:1px dashed #8c959f\"></i>claimed, never started</span>"
    "<span><i style=\"background:#54aeff\"></i>running</span><span><i "
    "style=\"border:"
    "2px solid #6639ba\"></i>adopted (purple bar: the wait)</span><span "
    "style=\"color:#cf222e\">&#x2715; crash</span><span style=\"color:"
    "#cf222e\">&#x25CB; retried</span><span style=\"color:#0969da\">&#x2506; "
    "resume</span></div>\n";

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string RenderReportHtml(const ReportInput& in) {
  const RunView& v = *in.view;
  const std::string title = "wizq run " + v.run.run_id;
  std::string page =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"generator\" content=\"wizq report\"><title>" +
      HtmlEscape(title) + "</title><style>" + kStyle +
      "</style></head><body>\n<h1>" + HtmlEscape(title) + "</h1>\n<div>" +
      HtmlEscape(in.source) + " &middot; report made " +
      FormatTime(in.generated_ms) + "</div>\n" + Summary(in) + Failures(in);
  page +=
      "<h2>Timeline: every attempt, per worker</h2>\n" + std::string(kLegend);
  page += "<div class=\"wrap\">" + RenderTimelineSvg(*in.history) + "</div>\n";
  page += "<h2>Tasks</h2>\n<ul class=\"tree\" id=\"tasks\">\n";
  for (const Task& t : v.tasks) {
    if (t.parent_id == 0) TaskItem(v, t, &page);
  }
  page += "</ul>\n<h2>Attempts</h2>\n" + AttemptTable(*in.history);
  if (in.torn_bytes > 0) {
    page += "<p>" + std::to_string(in.torn_bytes) +
            " bytes of an unfinished write at the end of the log were left "
            "out.</p>\n";
  }
  page += "<script>" + std::string(kScript) + "</script>\n</body></html>\n";
  return page;
}

}  // namespace wizq
