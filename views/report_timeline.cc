// The timeline of `wizq report` (views/report_html.h): one lane per worker
// and one per agent (leases, by agent name), each attempt a bar from its claim
// to the event that ended it, stacked in rows where attempts overlap, with the
// crash, resume, retry, wait and pause markers.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "queue/history.h"
#include "queue/task.h"
#include "views/log_table.h"
#include "views/report_internal.h"
#include "views/view_util.h"

namespace wizq {
namespace {

constexpr double kLabelW = 190;  // the lane names
constexpr double kPlotW = 900;   // the time axis
constexpr double kRowH = 16;
constexpr double kLanePad = 10;
constexpr double kAxisH = 28;

struct Lane {
  std::string key;    // worker id, or "lease"
  std::string label;  // what is shown
  const WorkerRecord* worker = nullptr;
  std::vector<const AttemptRecord*> attempts;
  std::vector<int> row;  // per attempt
  int rows = 1;
  double y = 0;
};

class Timeline {
 public:
  explicit Timeline(const RunHistory& h) : h_(h) {
    t0_ = h.started_ms;
    t1_ = std::max(h.last_ms, t0_ + 1);
  }

  std::string Render() {
    BuildLanes();
    double y = kAxisH;
    for (Lane& l : lanes_) {
      l.y = y;
      y += l.rows * kRowH + kLanePad;
    }
    height_ = y + 4;
    char head[256];
    std::snprintf(head, sizeof(head),
                  "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" "
                  "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
                  kLabelW + kPlotW + 20, height_, kLabelW + kPlotW + 20,
                  height_);
    out_ = head;
    Axis();
    for (const Lane& l : lanes_) LaneBody(l);
    Milestones();
    for (const Lane& l : lanes_) Crash(l);
    out_ += "</svg>\n";
    return out_;
  }

 private:
  double X(int64_t ms) const {
    return kLabelW + kPlotW * static_cast<double>(ms - t0_) /
                         static_cast<double>(t1_ - t0_);
  }
  std::string Num(double v) const {
    char b[32];
    std::snprintf(b, sizeof(b), "%.1f", v);
    return b;
  }

  void BuildLanes() {
    std::map<std::string, size_t> index;
    for (const WorkerRecord& w : h_.workers) {
      index[w.id] = lanes_.size();
      Lane l;
      l.key = w.id;
      l.label = w.id + " (pid " + std::to_string(w.pid) + ")";
      l.worker = &w;
      lanes_.push_back(l);
    }
    for (const AttemptRecord& a : h_.attempts) {
      const std::string key = LaneKey(a);
      if (!index.count(key)) {
        index[key] = lanes_.size();
        Lane l;
        l.key = key;
        l.label = a.reused                    ? "reused"
                  : a.worker == kImportWorker ? "import (before wizq)"
                  : a.worker != "lease"       ? key
                  : a.agent.empty()           ? "agents without a name"
                                              : "agent " + a.agent;
        lanes_.push_back(l);
      }
      lanes_[index[key]].attempts.push_back(&a);
    }
    for (Lane& l : lanes_) Stack(l);
  }

  // Each worker has its lane, and so has each agent (by the name it gave;
  // the leases of agents that gave none share one).
  static std::string LaneKey(const AttemptRecord& a) {
    if (a.reused) return "reused";
    return a.worker == "lease" ? "lease:" + a.agent : a.worker;
  }

  int64_t EndOf(const AttemptRecord& a) const {
    return a.end_seq > 0 ? a.end_ms : h_.last_ms;
  }

  // Greedy rows: an attempt goes in the first row free at its start.
  void Stack(Lane& l) {
    std::vector<int64_t> row_end;
    for (const AttemptRecord* a : l.attempts) {
      size_t r = 0;
      while (r < row_end.size() && row_end[r] > a->start_ms) r++;
      if (r == row_end.size()) row_end.push_back(0);
      row_end[r] = std::max(EndOf(*a), a->start_ms + 1);
      l.row.push_back(static_cast<int>(r));
    }
    l.rows = std::max<int>(1, static_cast<int>(row_end.size()));
  }

  void Axis() {
    out_ += "<g class=\"axis\">";
    for (int i = 0; i <= 4; i++) {
      const int64_t ms = t0_ + (t1_ - t0_) * i / 4;
      const double x = X(ms);
      out_ += "<line x1=\"" + Num(x) + "\" y1=\"" + Num(kAxisH - 6) +
              "\" x2=\"" + Num(x) + "\" y2=\"" + Num(height_) +
              "\" class=\"grid\"/>";
      out_ += "<text x=\"" + Num(x) + "\" y=\"14\" text-anchor=\"" +
              (i == 0   ? "start"
               : i == 4 ? "end"
                        : "middle") +
              "\">" +
              HtmlEscape(i == 0 ? FormatTime(ms).substr(11)
                                : "+" + FormatDuration(ms - t0_)) +
              "</text>";
    }
    out_ += "</g>\n";
  }

  void LaneBody(const Lane& l) {
    out_ += "<g class=\"lane\" data-worker=\"" + HtmlEscape(l.key) + "\">";
    out_ += "<rect class=\"lane-bg\" x=\"0\" y=\"" + Num(l.y - 2) +
            "\" width=\"" + Num(kLabelW + kPlotW) + "\" height=\"" +
            Num(l.rows * kRowH + 4) + "\"/>";
    out_ += "<text class=\"lane-label\" x=\"4\" y=\"" + Num(l.y + 12) + "\">" +
            HtmlEscape(ShortenMiddle(l.label, 30)) + "</text>";
    for (size_t i = 0; i < l.attempts.size(); i++) {
      Bar(*l.attempts[i], l.y + l.row[i] * kRowH);
    }
    out_ += "</g>\n";
  }

  // A lost attempt's bar ends where its worker was last seen (about when
  // it died), not when the loss was found.
  int64_t BarEnd(const AttemptRecord& a) const {
    const WorkerRecord* w = h_.FindWorker(a.worker);
    if (a.reason == "worker_lost" && w != nullptr && w->lost &&
        !a.never_started) {
      return std::max(a.start_ms, std::min(EndOf(a), w->last_seen_ms));
    }
    return EndOf(a);
  }

  void Bar(const AttemptRecord& a, double y) {
    const double x = X(a.start_ms);
    const double w = std::max(3.0, X(BarEnd(a)) - x);
    std::string cls = a.outcome;
    // A claim its dead worker never began lost no work: drawn hollow.
    if (a.never_started) {
      cls += " unstarted";
    } else if (a.outcome == "reset" && a.reason == "worker_lost") {
      cls += " lost";
    }
    if (a.adopted) cls += " adopted";
    const std::string tip = "#" + std::to_string(a.task_id) + " " + a.step +
                            " " + ShortenMiddle(a.value, 60) + ", attempt " +
                            std::to_string(a.attempt) + ": " +
                            AttemptResultText(a) + " (" +
                            FormatDuration(EndOf(a) - a.start_ms) + ")";
    out_ += "<rect class=\"attempt " + cls + "\" data-task-id=\"" +
            std::to_string(a.task_id) + "\" data-attempt=\"" +
            std::to_string(a.attempt) + "\" data-worker=\"" +
            HtmlEscape(a.worker) + "\" data-start-ms=\"" +
            std::to_string(a.start_ms) + "\" data-end-ms=\"" +
            std::to_string(a.end_seq > 0 ? a.end_ms : 0) + "\" x=\"" + Num(x) +
            "\" y=\"" + Num(y + 1) + "\" width=\"" + Num(w) + "\" height=\"" +
            Num(kRowH - 3) + "\"><title>" + HtmlEscape(tip) + "</title></rect>";
    if (a.outcome == "failed" && a.will_retry) {
      out_ += "<g class=\"marker retry\" data-task-id=\"" +
              std::to_string(a.task_id) + "\" data-attempt=\"" +
              std::to_string(a.attempt) + "\"><circle cx=\"" + Num(x + w) +
              "\" cy=\"" + Num(y + kRowH / 2) +
              "\" r=\"4\"/><title>retried after: " +
              HtmlEscape(AttemptResultText(a)) + "</title></g>";
    }
    if (a.adopted && a.adopted_waited_ms > 0) {
      const double wx = X(EndOf(a) - a.adopted_waited_ms);
      out_ += "<g class=\"marker wait\" data-task-id=\"" +
              std::to_string(a.task_id) + "\"><rect x=\"" + Num(wx) +
              "\" y=\"" + Num(y + kRowH - 4) + "\" width=\"" +
              Num(std::max(2.0, X(EndOf(a)) - wx)) +
              "\" height=\"3\"/><title>waited " +
              FormatDuration(a.adopted_waited_ms) +
              " for the attempt a lost worker had started</title></g>";
    }
  }

  void Milestones() {
    int shown = 0;
    for (const RunMilestone& m : h_.milestones) {
      std::string cls;
      if (m.event == "run_resumed") cls = "resume";
      if (m.event == "run_paused") cls = "pause";
      if (m.event == "run_finished") cls = "finish";
      if (cls.empty()) continue;
      const double x = X(m.ts);
      // Labels of close markers are staggered over three heights.
      const double ty = kAxisH - 2 + 10.0 * (shown++ % 3);
      const bool right = x > kLabelW + kPlotW * 0.9;
      out_ += "<g class=\"marker " + cls + "\" data-seq=\"" +
              std::to_string(m.seq) + "\"><line x1=\"" + Num(x) + "\" y1=\"" +
              Num(kAxisH - 8) + "\" x2=\"" + Num(x) + "\" y2=\"" +
              Num(height_) + "\"/><text x=\"" + Num(right ? x - 2 : x + 2) +
              "\" y=\"" + Num(ty) + "\" text-anchor=\"" +
              (right ? "end" : "start") + "\">" + cls + "</text><title>" +
              HtmlEscape(m.event + " at " + FormatTime(m.ts) + ": " + m.detail +
                         " (log seq " + std::to_string(m.seq) + ")") +
              "</title></g>\n";
    }
  }

  // A lost worker: a cross where its lane's last event was (about when it
  // died).
  void Crash(const Lane& l) {
    if (l.worker == nullptr || !l.worker->lost) return;
    const double x = X(l.worker->last_seen_ms);
    const double y = l.y + l.rows * kRowH / 2;
    out_ += "<g class=\"marker crash\" data-worker=\"" + HtmlEscape(l.key) +
            "\" data-seq=\"" + std::to_string(l.worker->lost_seq) +
            "\"><path d=\"M" + Num(x - 6) + " " + Num(y - 6) + " L" +
            Num(x + 6) + " " + Num(y + 6) + " M" + Num(x + 6) + " " +
            Num(y - 6) + " L" + Num(x - 6) + " " + Num(y + 6) + "\"/><title>" +
            HtmlEscape("crash: worker " + l.key + " (pid " +
                       std::to_string(l.worker->pid) + ") died; last seen " +
                       FormatTime(l.worker->last_seen_ms) +
                       ", found lost at log seq " +
                       std::to_string(l.worker->lost_seq)) +
            "</title></g>\n";
  }

  const RunHistory& h_;
  int64_t t0_ = 0, t1_ = 1;
  std::vector<Lane> lanes_;
  double height_ = 0;
  std::string out_;
};

}  // namespace

std::string RenderTimelineSvg(const RunHistory& h) {
  return Timeline(h).Render();
}

}  // namespace wizq
