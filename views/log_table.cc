#include "views/log_table.h"

#include <cstdio>
#include <cstdlib>

#include "queue/history.h"
#include "util/exit_code.h"
#include "util/json_writer.h"
#include "views/inspect.h"
#include "views/json_events.h"
#include "views/view_util.h"

namespace wizq {
namespace {

void RowJson(const AttemptRecord& a, std::string* out) {
  out->clear();
  JsonWriter w(out);
  w.BeginObject().Key("task").Int(a.task_id).Field("step", a.step);
  w.Key("value").RawValue(a.value.empty() ? "null" : a.value);
  w.Key("attempt").Int(a.attempt).Field("worker", a.worker);
  if (!a.agent.empty()) w.Field("agent", a.agent);
  w.Key("start_ms").Int(a.start_ms).Key("end_ms");
  if (a.end_seq > 0) {
    w.Int(a.end_ms).Key("duration_ms").Int(a.end_ms - a.start_ms);
  } else {
    w.Null().Key("duration_ms").Null();
  }
  w.Field("outcome", a.outcome).Field("reason", a.reason);
  w.Field("message", a.message).Key("exit_code");
  const int code = AttemptExitCode(a);
  if (code >= 0) {
    w.Int(code);
  } else {
    w.Null();
  }
  w.Key("will_retry").Bool(a.will_retry).Key("refunded").Bool(a.refunded);
  w.Key("never_started").Bool(a.never_started);
  w.Key("adopted").Bool(a.adopted).Key("reused").Bool(a.reused);
  w.Key("claim_seq").Int(a.claim_seq).Key("end_seq").Int(a.end_seq);
  w.EndObject();
}

void PrintRow(const AttemptRecord& a, int64_t last_ms) {
  const std::string dur = a.end_seq > 0
                              ? FormatDuration(a.end_ms - a.start_ms)
                              : FormatDuration(last_ms - a.start_ms) + "+";
  const std::string worker =
      a.agent.empty() ? a.worker : a.worker + ":" + a.agent;
  std::printf(
      "%5lld %-12s %-24s %3lld %-16s %s %8s  %s\n",
      static_cast<long long>(a.task_id), ShortenMiddle(a.step, 12).c_str(),
      ShortenMiddle(a.value, 24).c_str(), static_cast<long long>(a.attempt),
      ShortenMiddle(worker.empty() ? "-" : worker, 16).c_str(),
      FormatTime(a.start_ms).c_str(), dur.c_str(),
      AttemptResultText(a).c_str());
}

}  // namespace

int AttemptExitCode(const AttemptRecord& a) {
  const std::string prefix = "exit code ";
  if (a.reason != "exit_code" || a.message.rfind(prefix, 0) != 0) return -1;
  return std::atoi(a.message.c_str() + prefix.size());
}

std::string AttemptResultText(const AttemptRecord& a) {
  std::string text;
  if (a.reused) return "reused from the previous run";
  if (a.outcome == "running") {
    text = "running (or its worker died: see wizq status)";
  } else if (a.outcome == "completed") {
    text = "ok";
  } else if (AttemptExitCode(a) >= 0) {
    text = "exit " + std::to_string(AttemptExitCode(a));
  } else {
    text = a.reason.empty() ? a.outcome : a.reason;
    if (!a.message.empty() && a.reason != "worker_lost" &&
        a.reason != "interrupted") {
      text += ": " + Shorten(a.message, 60);
    }
  }
  if (a.outcome == "failed") text += a.will_retry ? ", retried" : ", failed";
  if (a.never_started) return "never started (not charged)";
  if (a.outcome == "reset") text += a.refunded ? " (not charged)" : "";
  if (a.adopted) {
    text += " (adopted after " + FormatDuration(a.adopted_waited_ms) + ")";
  }
  return text;
}

int PrintLogTable(const RunPlace& place, int64_t task_id, bool json) {
  std::unique_ptr<Store> store;
  const int code = OpenForLog(place, json, &store, nullptr);
  if (code != kExitCompleted) return code;
  RunHistory h;
  Status s = LoadRunHistory(*store, &h);
  if (!s.ok()) return ReportLogError(place, s, json);
  if (!json) {
    std::printf("%5s %-12s %-24s %3s %-16s %-23s %8s  %s\n", "TASK", "STEP",
                "VALUE", "TRY", "WORKER", "START", "DURATION", "RESULT");
  }
  std::string line;
  for (const AttemptRecord& a : h.attempts) {
    if (task_id > 0 && a.task_id != task_id) continue;
    if (json) {
      RowJson(a, &line);
      std::printf("%s\n", line.c_str());
    } else {
      PrintRow(a, h.last_ms);
    }
  }
  return kExitCompleted;
}

}  // namespace wizq
