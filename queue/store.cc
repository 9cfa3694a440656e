// The contract's store-independent helpers (queue/store.h): the dedup key
// and the message of a refused claim, the same on every store.
#include "queue/store.h"

#include "util/canonical_json.h"
#include "util/hash.h"

namespace wizq {

Status DedupKey(std::string_view type, std::string_view inputs,
                std::string* key) {
  std::string canonical;
  WIZQ_RETURN_IF_ERROR(CanonicalizeJson(inputs, &canonical));
  std::string material(type);
  material.push_back('\n');
  material += canonical;
  *key = Hash128Hex(material);
  return Status::OK();
}

namespace {

// How the last ended attempt of `t` ended, from its recorded failure or
// reset: a clause for "task N: ...".
std::string LastEnd(const Task& t) {
  const std::string& why = t.error_reason;
  if (why == kReasonLeaseExpired) return "its lease lapsed and it was put back";
  if (why == kReasonTimeout) return t.error_message;  // "timed out after ..."
  if (why == kReasonReleased) return "its agent gave it back (released)";
  const std::string what = "(" + why + ": " + t.error_message + ")";
  if (t.state == TaskState::kPending &&
      (why == kReasonWorkerLost || why == "interrupted" ||
       why == "environment_error" || why == "unanswered")) {
    return "it was put back " + what;  // a reset, not a failure
  }
  const int attempt = t.attempts - (t.state == TaskState::kInProgress ? 1 : 0);
  return "attempt " + std::to_string(attempt) + " already failed " + what;
}

}  // namespace

std::string WhyNotHeld(const Task& t) {
  const std::string task = "task " + std::to_string(t.id);
  std::string why;
  switch (t.state) {
    case TaskState::kPending:
      if (t.error_reason.empty()) {
        return task + " was never taken (it is pending); take it first";
      }
      why = task + ": " + LastEnd(t) + "; it is pending again: take it anew";
      break;
    case TaskState::kInProgress:
      why = task + " is held by another " +
            (t.lease_token.empty()
                 ? "worker (" + t.claimed_by + ")"
                 : std::string("lease") +
                       (t.agent.empty() ? "" : " (agent " + t.agent + ")")) +
            " now, in attempt " + std::to_string(t.attempts) +
            (t.error_reason.empty() ? "" : "; before that: " + LastEnd(t));
      break;
    case TaskState::kDone:
      return task + " is already completed";
    case TaskState::kFailed:
      why = task + ": " + LastEnd(t) + "; the task failed for good";
      break;
  }
  return (t.error_reason == kReasonLeaseExpired ? "lease lost: " : "") + why;
}

}  // namespace wizq
