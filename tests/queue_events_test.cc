// Tests of the audit event codecs (queue/events.h): every kind encodes to
// the exact bytes of the format (golden lines, and every line of the logs
// in the fuzz corpus, which older builds wrote), and decodes back to what
// was encoded.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "audit/log.h"
#include "queue/dir/state.h"
#include "queue/events.h"
#include "tests/test_util.h"

namespace wizq {
namespace {

// Decodes `line`, which must hold an event of kind E, into *out.
template <typename E>
void DecodeAs(const std::string& line, EventHeader* header, E* out) {
  static EventDecoder decoder;
  Event event;
  Status s = decoder.Decode(line, header, &event);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(std::holds_alternative<E>(event)) << line;
  *out = std::get<E>(event);
}

// Encodes `e` as the line of seq 7 at ts 1000, compares it with `golden`,
// then decodes it and compares the result with `e`. (The decoded event
// views the decoder's copy of the line; it is compared at once.)
template <typename E>
void ExpectCodec(const E& e, const std::string& golden) {
  const std::string line = EncodeEventLine(7, 1000, e);
  EXPECT_EQ(line, golden);
  EventHeader h;
  E back;
  DecodeAs(line, &h, &back);
  EXPECT_EQ(h.seq, 7);
  EXPECT_EQ(h.ts, 1000);
  EXPECT_EQ(h.name, E::kName);
  EXPECT_TRUE(back == e) << line;
}

const char kHead[] = "{\"seq\":7,\"ts\":1000,\"event\":";

TEST(QueueEventsTest, RunEventsEncodeToTheirGoldenLines) {
  RunStarted started;
  started.format = 1;
  started.run_id = "r1";
  started.install_dir = "/opt/x";
  started.wizq_version = "0.1.0";
  started.pid = 42;
  started.input = "{\"a\":[1,2]}";
  started.workflow = "{\"steps\":[]}";
  ExpectCodec(started,
              std::string(kHead) +
                  "\"run_started\",\"format\":1,\"run_id\":\"r1\","
                  "\"install_dir\":\"/opt/x\",\"wizq_version\":\"0.1.0\","
                  "\"pid\":42,\"input\":{\"a\":[1,2]},"
                  "\"workflow\":{\"steps\":[]}}");
  ExpectCodec(RunResumed{3, 4, 1, 2},
              std::string(kHead) +
                  "\"run_resumed\",\"tasks_pending\":3,\"tasks_done\":4,"
                  "\"tasks_reset\":1,\"tasks_lost\":2}");
  ExpectCodec(RunImported{"barnum-v2:/x/state.ndjson", 2, 1, 5},
              std::string(kHead) +
                  "\"run_imported\",\"source\":\"barnum-v2:/x/state.ndjson\","
                  "\"tasks_pending\":2,\"tasks_waiting\":1,\"tasks_done\":5}");
  ExpectCodec(QueueArchived{"--fresh", "/x/.wizard/archive/a", false, {}},
              std::string(kHead) +
                  "\"queue_archived\",\"reason\":\"--fresh\","
                  "\"path\":\"/x/.wizard/archive/a\"}");
  // What the new run reuses of the archived one (--no-reuse, --from).
  ExpectCodec(QueueArchived{"--fresh", "/x/a", true, {"Ask", "7"}},
              std::string(kHead) +
                  "\"queue_archived\",\"reason\":\"--fresh\","
                  "\"path\":\"/x/a\",\"no_reuse\":true,"
                  "\"from\":[\"Ask\",\"7\"]}");
  ExpectCodec(
      WorkerJoined{"w1-ab", 9},
      std::string(kHead) + "\"worker_joined\",\"worker\":\"w1-ab\",\"pid\":9}");
  ExpectCodec(WorkerLeft{"w1-ab"},
              std::string(kHead) + "\"worker_left\",\"worker\":\"w1-ab\"}");
  RunFinished finished;
  finished.status = "failed";
  finished.resumed = true;
  finished.tasks_total = 5;
  finished.tasks_done = 4;
  finished.tasks_failed = 1;
  finished.duration_ms = 1234;
  ExpectCodec(finished,
              std::string(kHead) +
                  "\"run_finished\",\"status\":\"failed\",\"resumed\":true,"
                  "\"tasks_total\":5,\"tasks_done\":4,\"tasks_failed\":1,"
                  "\"duration_ms\":1234}");
  finished.has_reuse_counts = true;
  finished.tasks_reused = 3;
  finished.tasks_live = 2;
  ExpectCodec(finished,
              std::string(kHead) +
                  "\"run_finished\",\"status\":\"failed\",\"resumed\":true,"
                  "\"tasks_total\":5,\"tasks_done\":4,\"tasks_failed\":1,"
                  "\"duration_ms\":1234,\"tasks_reused\":3,\"tasks_live\":2}");
}

TEST(QueueEventsTest, ReuseAndRetryEventsEncodeToTheirGoldenLines) {
  TaskCompleted live{4, "w1", {5}, {}, "", "", 0};
  live.def_hash = "0123abcd";
  ExpectCodec(live, std::string(kHead) +
                        "\"task_completed\",\"id\":4,\"worker\":\"w1\","
                        "\"spawned\":[5],\"deduplicated\":[],"
                        "\"def_hash\":\"0123abcd\"}");
  TaskCompleted reused = live;
  reused.reused_run_id = "r9";
  reused.reused_id = 7;
  ExpectCodec(reused, std::string(kHead) +
                          "\"task_completed\",\"id\":4,\"worker\":\"w1\","
                          "\"spawned\":[5],\"deduplicated\":[],"
                          "\"def_hash\":\"0123abcd\","
                          "\"reused\":{\"run_id\":\"r9\",\"id\":7}}");
  ExpectCodec(TaskRetried{4, "retry_failed", "exit_code", 4},
              std::string(kHead) +
                  "\"task_retried\",\"id\":4,\"reason\":\"retry_failed\","
                  "\"error\":\"exit_code\",\"max_attempts\":4}");
}

TEST(QueueEventsTest, TaskEventsEncodeToTheirGoldenLines) {
  TaskSubmitted sub;
  sub.id = 3;
  sub.type = "Step";
  sub.inputs = "{\"n\":1}";
  sub.parent_id = 0;
  sub.origin = "Finally";
  sub.dedup_key = "finally:2";
  sub.max_attempts = 2;
  sub.has_finally = false;
  sub.finally_for = 2;
  ExpectCodec(sub, std::string(kHead) +
                       "\"task_submitted\",\"id\":3,\"type\":\"Step\","
                       "\"inputs\":{\"n\":1},\"parent_id\":null,"
                       "\"origin\":\"Finally\",\"dedup_key\":\"finally:2\","
                       "\"max_attempts\":2,\"has_finally\":false,"
                       "\"finally_for\":2}");
  // A hook that re-runs a stale one (after --retry-failed): its generation.
  sub.dedup_key = "finally:2:2";
  sub.generation = 2;
  ExpectCodec(sub, std::string(kHead) +
                       "\"task_submitted\",\"id\":3,\"type\":\"Step\","
                       "\"inputs\":{\"n\":1},\"parent_id\":null,"
                       "\"origin\":\"Finally\",\"dedup_key\":\"finally:2:2\","
                       "\"max_attempts\":2,\"has_finally\":false,"
                       "\"finally_for\":2,\"generation\":2}");
  ExpectCodec(TaskDeduplicated{"Step", "abc", 3, 1},
              std::string(kHead) +
                  "\"task_deduplicated\",\"type\":\"Step\","
                  "\"dedup_key\":\"abc\",\"existing_id\":3,\"parent_id\":1}");
  ExpectCodec(TaskClaimed{4, "Download", "w4242-1a2b3c4d", 1, {}, 0, {}},
              std::string(kHead) +
                  "\"task_claimed\",\"id\":4,\"type\":\"Download\","
                  "\"worker\":\"w4242-1a2b3c4d\",\"attempt\":1}");
  // A claim that records its host (SPEC §14).
  ExpectCodec(TaskClaimed{4,
                          "Download",
                          "w1",
                          1,
                          {},
                          0,
                          {},
                          0,
                          true,
                          "b00t/4026531836/2049:77"},
              std::string(kHead) +
                  "\"task_claimed\",\"id\":4,\"type\":\"Download\","
                  "\"worker\":\"w1\",\"attempt\":1,"
                  "\"host\":\"b00t/4026531836/2049:77\"}");
  // A claim held by a lease (SPEC §9), with and without the agent's name.
  ExpectCodec(
      TaskClaimed{4, "Review", "agent", 2, "0a1b", 1700000060000, "claude"},
      std::string(kHead) +
          "\"task_claimed\",\"id\":4,\"type\":\"Review\","
          "\"worker\":\"agent\",\"attempt\":2,\"lease\":\"0a1b\","
          "\"lease_expires_ms\":1700000060000,\"agent\":\"claude\"}");
  ExpectCodec(TaskClaimed{4, "Review", "agent", 1, "0a1b", 99, {}},
              std::string(kHead) +
                  "\"task_claimed\",\"id\":4,\"type\":\"Review\","
                  "\"worker\":\"agent\",\"attempt\":1,\"lease\":\"0a1b\","
                  "\"lease_expires_ms\":99}");
  // A leased claim of a step with a timeout (issue 21): its limit and
  // whether a timeout is retried, for any process to enforce.
  ExpectCodec(
      TaskClaimed{4, "Review", "agent", 1, "0a1b", 99, "c", 600000, false},
      std::string(kHead) +
          "\"task_claimed\",\"id\":4,\"type\":\"Review\","
          "\"worker\":\"agent\",\"attempt\":1,\"lease\":\"0a1b\","
          "\"lease_expires_ms\":99,\"agent\":\"c\",\"timeout_ms\":600000,"
          "\"retry_on_timeout\":false}");
  ExpectCodec(LeaseRenewed{4, 1700000090000},
              std::string(kHead) +
                  "\"lease_renewed\",\"id\":4,"
                  "\"lease_expires_ms\":1700000090000}");
  ExpectCodec(TaskReset{4, "agent", "lease_expired", "lapsed", 1, false},
              std::string(kHead) +
                  "\"task_reset\",\"id\":4,\"worker\":\"agent\","
                  "\"reason\":\"lease_expired\",\"message\":\"lapsed\","
                  "\"attempt\":1}");
  ExpectCodec(TaskCompleted{4, "w1", {5, 6}, {2}, "", "", 0},
              std::string(kHead) +
                  "\"task_completed\",\"id\":4,\"worker\":\"w1\","
                  "\"spawned\":[5,6],\"deduplicated\":[2]}");
  ExpectCodec(TaskCompleted{4, "w1", {}, {}, "", "", 0},
              std::string(kHead) +
                  "\"task_completed\",\"id\":4,\"worker\":\"w1\","
                  "\"spawned\":[],\"deduplicated\":[]}");
  ExpectCodec(TaskFailed{4, "w1", "exit_code", "exit 1", 1, true, 99},
              std::string(kHead) +
                  "\"task_failed\",\"id\":4,\"worker\":\"w1\","
                  "\"reason\":\"exit_code\",\"message\":\"exit 1\","
                  "\"attempt\":1,\"will_retry\":true,\"retry_at\":99}");
  ExpectCodec(TaskFailed{4, "w1", "worker_lost", "died \"x\"\n", 2, false, 0},
              std::string(kHead) +
                  "\"task_failed\",\"id\":4,\"worker\":\"w1\","
                  "\"reason\":\"worker_lost\","
                  "\"message\":\"died \\\"x\\\"\\n\",\"attempt\":2,"
                  "\"will_retry\":false}");
  ExpectCodec(TaskReset{4, "w1", "interrupted", "stopped", 1, true},
              std::string(kHead) +
                  "\"task_reset\",\"id\":4,\"worker\":\"w1\","
                  "\"reason\":\"interrupted\",\"message\":\"stopped\","
                  "\"attempt\":1,\"refund\":true}");
  ExpectCodec(TaskReset{4, "w1", "worker_lost", "died", 1, false},
              std::string(kHead) +
                  "\"task_reset\",\"id\":4,\"worker\":\"w1\","
                  "\"reason\":\"worker_lost\",\"message\":\"died\","
                  "\"attempt\":1}");
  ExpectCodec(TaskAdopted{4, "w2", 1, 250},
              std::string(kHead) +
                  "\"task_adopted\",\"id\":4,\"worker\":\"w2\","
                  "\"attempt\":1,\"waited_ms\":250}");
  // The adopted counts are written only when non-zero.
  ExpectCodec(RunResumed{3, 4, 1, 2, 1},
              std::string(kHead) +
                  "\"run_resumed\",\"tasks_pending\":3,\"tasks_done\":4,"
                  "\"tasks_reset\":1,\"tasks_lost\":2,\"tasks_adopted\":1}");
}

// The line without the fields Commit adds.
std::string WithoutCommitAndCrc(std::string line) {
  const size_t crc = line.rfind(",\"crc\":\"");
  if (crc != std::string::npos) line = line.substr(0, crc) + "}";
  const std::string commit = ",\"commit\":true}";
  if (line.size() > commit.size() &&
      line.compare(line.size() - commit.size(), commit.size(), commit) == 0) {
    line = line.substr(0, line.size() - commit.size()) + "}";
  }
  return line;
}

// Logs written by earlier builds re-encode byte for byte.
TEST(QueueEventsTest, CorpusLogsReencodeByteForByte) {
  const std::string dir = test::SourceDir() + "/fuzz/corpus/audit_log_fuzzer";
  std::set<std::string> kinds;
  for (const char* name :
       {"installer", "fanoutkill", "hookretry", "poison", "retried", "nested",
        "childfails", "invalid", "basic3", "retryfailed", "reused", "imported",
        "gate", "leases", "adopted", "started"}) {
    const std::string path = dir + "/" + name + ".audit.jsonl";
    const std::string data = test::ReadAll(path);
    ASSERT_FALSE(data.empty()) << path;
    LogParseResult parsed;
    ASSERT_TRUE(ParseLog(path, data, 0, 1, &parsed).ok()) << path;
    EventDecoder decoder;
    for (const LogRecord& rec : parsed.records) {
      const std::string line(rec.line);
      EventHeader h;
      Event e;
      ASSERT_TRUE(decoder.Decode(line, &h, &e).ok()) << line;
      ASSERT_NE(e.index(), 0u) << "unknown event: " << line;
      kinds.insert(std::string(EventName(e)));
      const std::string again = std::visit(
          [&](const auto& ev) -> std::string {
            using E = std::decay_t<decltype(ev)>;
            if constexpr (std::is_same_v<E, UnknownEvent>) {
              return "";
            } else {
              return EncodeEventLine(h.seq, h.ts, ev);
            }
          },
          e);
      EXPECT_EQ(again, WithoutCommitAndCrc(line)) << path;
    }
  }
  // Every kind is there (but UnknownEvent).
  EXPECT_EQ(kinds.size(), std::variant_size_v<Event> - 1);
}

TEST(QueueEventsTest, UnknownEventsAndFieldsAreSkipped) {
  EventDecoder decoder;
  EventHeader h;
  Event e;
  ASSERT_TRUE(decoder
                  .Decode("{\"seq\":3,\"ts\":1,\"event\":\"a_future_event\","
                          "\"id\":[1]}",
                          &h, &e)
                  .ok());
  EXPECT_EQ(e.index(), 0u);
  EXPECT_EQ(h.name, "a_future_event");
  ASSERT_TRUE(decoder
                  .Decode("{\"seq\":3,\"ts\":1,\"event\":\"worker_left\","
                          "\"worker\":\"w\",\"new\":{\"x\":1}}",
                          &h, &e)
                  .ok());
  ASSERT_TRUE(std::holds_alternative<WorkerLeft>(e));
  EXPECT_EQ(std::get<WorkerLeft>(e).worker, "w");
}

// A line no wizq wrote may put fields before "event": they still count.
TEST(QueueEventsTest, FieldsBeforeTheEventNameAreDecoded) {
  EventDecoder decoder;
  EventHeader h;
  Event e;
  ASSERT_TRUE(decoder
                  .Decode("{\"id\":4,\"seq\":2,\"attempt\":3,\"ts\":5,"
                          "\"event\":\"task_claimed\",\"type\":\"T\","
                          "\"worker\":\"w\"}",
                          &h, &e)
                  .ok());
  ASSERT_TRUE(std::holds_alternative<TaskClaimed>(e));
  EXPECT_TRUE(
      (std::get<TaskClaimed>(e) == TaskClaimed{4, "T", "w", 3, {}, 0, {}}));
  EXPECT_EQ(h.seq, 2);
  EXPECT_EQ(h.ts, 5);
}

TEST(QueueEventsTest, WrongFieldTypesDoNotParse) {
  EventDecoder decoder;
  EventHeader h;
  Event e;
  for (const char* line :
       {"{\"seq\":1,\"ts\":1,\"event\":\"task_claimed\",\"id\":\"4\"}",
        "{\"seq\":\"1\",\"ts\":1,\"event\":\"worker_left\"}",
        "{\"seq\":1,\"ts\":1,\"event\":7}", "[1]", "{\"seq\":1,"}) {
    Status s = decoder.Decode(line, &h, &e);
    EXPECT_TRUE(s.IsCorruption()) << line;
    EXPECT_NE(s.message().find("audit event does not parse"), std::string::npos)
        << s.ToString();
  }
}

// What the state checks after decoding keeps its messages.
TEST(QueueEventsTest, StateErrorsNameTheSeqAndEvent) {
  QueueState state;
  ASSERT_TRUE(
      state
          .ApplyEvent(EncodeEventLine(
              1, 1, RunStarted{1, "r", "/x", "t", 1, "{}", "{\"s\":1}"}))
          .ok());
  Status s = state.ApplyEvent(
      EncodeEventLine(2, 1, TaskClaimed{9, "T", "w", 1, {}, 0, {}}));
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("audit event seq 2 (task_claimed)"),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("claim of unknown task 9"), std::string::npos)
      << s.ToString();
  TaskSubmitted sub;
  sub.id = 1;
  sub.type = "T";
  sub.inputs = "{}";
  sub.origin = "Sideways";
  s = state.ApplyEvent(EncodeEventLine(2, 1, sub));
  EXPECT_NE(s.message().find("unknown origin 'Sideways'"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(state.last_seq(), 1);
}

}  // namespace
}  // namespace wizq

namespace wizq {
namespace {

TEST(QueueEventsTest, GateEventsEncodeToTheirGoldenLines) {
  ExpectCodec(TaskAnswered{4, "false", "terminal", "w1-ab"},
              std::string(kHead) +
                  "\"task_answered\",\"id\":4,\"answer\":false,"
                  "\"source\":\"terminal\",\"worker\":\"w1-ab\"}");
  ExpectCodec(RunPaused{"[{\"id\":2,\"step\":\"Ask\",\"mode\":\"confirm\","
                        "\"message\":\"Go?\"}]"},
              std::string(kHead) +
                  "\"run_paused\",\"waiting\":[{\"id\":2,\"step\":\"Ask\","
                  "\"mode\":\"confirm\",\"message\":\"Go?\"}]}");
}

}  // namespace
// EventFieldReader gives every field of any line in its order, known kind
// or not, with integers and strings read (what `wizq log` prints).
TEST(QueueEventsTest, FieldReaderGivesEveryFieldInOrder) {
  EventFieldReader reader;
  std::vector<EventField> fields;
  ASSERT_TRUE(reader
                  .Read(R"({"seq":7,"ts":12,"event":"newer_kind","id":3,)"
                        R"("note":"a\"b","v":{"x": [1, 2]}})",
                        &fields)
                  .ok());
  ASSERT_EQ(fields.size(), 6u);
  EXPECT_EQ(fields[0].key, "seq");
  EXPECT_TRUE(fields[0].is_int);
  EXPECT_EQ(fields[0].int_value, 7);
  EXPECT_EQ(fields[2].key, "event");
  EXPECT_TRUE(fields[2].is_string);
  EXPECT_EQ(fields[2].text, "newer_kind");
  EXPECT_EQ(fields[3].int_value, 3);
  EXPECT_EQ(fields[4].text, "a\"b");
  EXPECT_EQ(fields[4].json, R"("a\"b")");
  EXPECT_FALSE(fields[5].is_int);
  EXPECT_FALSE(fields[5].is_string);
  EXPECT_EQ(fields[5].json, R"({"x":[1,2]})");
  EXPECT_TRUE(reader.Read("not json", &fields).IsCorruption());
}

}  // namespace wizq
