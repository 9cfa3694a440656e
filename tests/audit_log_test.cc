// Tests of the audit log (audit/log.h, audit/log_format.h): what LogWriter
// writes, and how ParseLog tells committed records from a torn tail (a
// crash mid-append: set aside, recovery goes on) and from corruption (an
// error naming the file and the byte offset).
// The cases of preallocation and holes are in audit_log_in_place_test.cc,
// those through the Queue in audit_log_queue_test.cc, the fixture in
// audit_log_fixture.h.
#include <errno.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "audit/log.h"
#include "audit/log_format.h"
#include "fs/fault_env.h"
#include "tests/audit_log_fixture.h"
#include "tests/queue_test_util.h"
#include "tests/test_util.h"
#include "util/json_writer.h"

namespace wizq::audit_log_test {
namespace {

using test::NoSyncEnv;
using test::WithoutFreeSpace;
using test::WriteAll;

TEST_F(AuditLogTest, WriterWritesCheckedCommittedLines) {
  BuiltLog log = Build({1, 3, 2});
  ASSERT_EQ(log.lines.size(), 6u);
  for (size_t i = 0; i < log.lines.size(); i++) {
    const std::string& line = log.lines[i];
    EXPECT_EQ(log.data.substr(log.line_offsets[i], line.size() + 1),
              line + "\n");
    EXPECT_TRUE(LineChecksumOk(line)) << line;
    // Field order: seq, ts, event first; crc last.
    const std::string prefix = "{\"seq\":" + std::to_string(i + 1) +
                               ",\"ts\":" + std::to_string(1763776000000 + i) +
                               ",\"event\":\"test_event\",";
    EXPECT_EQ(line.substr(0, prefix.size()), prefix);
    EXPECT_EQ(line.substr(line.size() - log_format::kCrcSuffixLength, 8),
              log_format::kCrcPrefix);
    // The commit marker is on the last line of each batch only.
    bool last_of_batch = false;
    for (size_t b = 0; b < log.batch_first.size(); b++) {
      size_t next = b + 1 < log.batch_first.size() ? log.batch_first[b + 1]
                                                   : log.lines.size();
      if (i + 1 == next) last_of_batch = true;
    }
    EXPECT_EQ(Contains(line, std::string(log_format::kCommitField)),
              last_of_batch)
        << line;
    // The line is one JSON object: the escaped newline stays escaped.
    EXPECT_EQ(line.find('\n'), std::string::npos);
  }
  LogParseResult parsed;
  ASSERT_TRUE(ParseLog(LogPath(), log.data, 0, 1, &parsed).ok());
  ASSERT_EQ(parsed.records.size(), log.lines.size());
  for (size_t i = 0; i < parsed.records.size(); i++) {
    EXPECT_EQ(parsed.records[i].seq, static_cast<int64_t>(i + 1));
    EXPECT_EQ(parsed.records[i].offset, log.line_offsets[i]);
    EXPECT_EQ(parsed.records[i].line, log.lines[i]);
  }
  EXPECT_EQ(parsed.committed_end, log.data.size());
  EXPECT_EQ(parsed.torn_bytes, 0u);
}

TEST_F(AuditLogTest, ChecksumRejectsDamagedOrMissingCrc) {
  BuiltLog log = Build({1});
  const std::string line = log.lines[0];
  ASSERT_TRUE(LineChecksumOk(line));
  EXPECT_FALSE(LineChecksumOk(""));
  EXPECT_FALSE(LineChecksumOk("{}"));
  EXPECT_FALSE(LineChecksumOk(line.substr(0, line.size() - 1)));
  EXPECT_FALSE(LineChecksumOk(line.substr(1)));
  EXPECT_FALSE(LineChecksumOk(line + " "));
  // Without its crc field the line is not a record.
  EXPECT_FALSE(LineChecksumOk(
      line.substr(0, line.size() - log_format::kCrcSuffixLength) + "}"));
  std::string other_crc = line;
  char& digit = other_crc[other_crc.size() - 3];
  digit = digit == '0' ? '1' : '0';
  EXPECT_FALSE(LineChecksumOk(other_crc));
}

TEST_F(AuditLogTest, WriterAfterEndEventReturnsTheEventAsJson) {
  std::unique_ptr<LogWriter> writer;
  ASSERT_TRUE(LogWriter::Open(env_, LogPath(), 0, 7, &writer).ok());
  JsonWriter& w = writer->BeginEvent("e", 5);
  w.Key("x").Int(1);
  EXPECT_EQ(writer->EndEvent(), "{\"seq\":7,\"ts\":5,\"event\":\"e\",\"x\":1}");
  writer->BeginEvent("f", 6);
  EXPECT_EQ(writer->EndEvent(), "{\"seq\":8,\"ts\":6,\"event\":\"f\"}");
  EXPECT_EQ(writer->pending_events(), 2u);
  writer->Abandon();
  EXPECT_EQ(writer->pending_events(), 0u);
  EXPECT_EQ(writer->next_seq(), 7);
  // Nothing reached the file.
  EXPECT_EQ(ReadAll(LogPath()), "");
  writer->BeginEvent("g", 7);
  EXPECT_EQ(writer->EndEvent(), "{\"seq\":7,\"ts\":7,\"event\":\"g\"}");
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_EQ(writer->next_seq(), 8);
  EXPECT_EQ(writer->end(), WithoutFreeSpace(ReadAll(LogPath())).size());
}

// Every prefix of a log parses: the complete batches are its records, the
// rest is a torn tail. Never corruption.
TEST_F(AuditLogTest, EveryPrefixParsesAsCommittedBatchesPlusTornTail) {
  BuiltLog log = Build({1, 3, 2, 1, 3});
  for (uint64_t cut = 0; cut <= log.data.size(); cut++) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    LogParseResult parsed;
    Status s = ParseLog(LogPath(), std::string_view(log.data).substr(0, cut), 0,
                        1, &parsed);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const size_t n = log.CommittedLines(cut);
    ASSERT_EQ(parsed.records.size(), n);
    for (size_t i = 0; i < n; i++) {
      EXPECT_EQ(parsed.records[i].line, log.lines[i]);
      EXPECT_EQ(parsed.records[i].offset, log.line_offsets[i]);
    }
    EXPECT_EQ(parsed.committed_end, log.CommittedEnd(cut));
    EXPECT_EQ(parsed.torn_bytes, cut - log.CommittedEnd(cut));
  }
}

// The crash case in full, for every byte offset inside the last batch (so
// also inside its last record): parse, set the tail aside, reopen, append,
// and the result parses completely.
void CheckRepairAtEveryOffsetOfLastBatch(Env* env, const std::string& path,
                                         const BuiltLog& log) {
  const uint64_t last_start = log.batch_start.back();
  const size_t kept = log.batch_first.back();
  for (uint64_t cut = last_start; cut < log.data.size(); cut++) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    WriteAll(path, log.data.substr(0, cut));
    std::string data = ReadAll(path);
    LogParseResult parsed;
    Status s = ParseLog(path, data, 0, 1, &parsed);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(parsed.records.size(), kept);
    ASSERT_EQ(parsed.committed_end, last_start);
    ASSERT_EQ(parsed.torn_bytes, cut - last_start);

    std::string aside;
    s = SetAsideTornTail(env, path, parsed.committed_end, &aside);
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (cut == last_start) {
      EXPECT_EQ(aside, "");  // nothing torn, nothing set aside
    } else {
      ASSERT_NE(aside, "");
      EXPECT_EQ(DirName(aside), DirName(path));
      EXPECT_TRUE(Contains(aside, "audit.torn-" + std::to_string(last_start)));
      EXPECT_EQ(ReadAll(aside), log.data.substr(last_start, cut - last_start));
      std::filesystem::remove(aside);
    }
    EXPECT_EQ(ReadAll(path), log.data.substr(0, last_start));

    // A new writer continues on a clean line with the next seq.
    const int64_t next_seq = static_cast<int64_t>(kept) + 1;
    std::unique_ptr<LogWriter> writer;
    ASSERT_TRUE(LogWriter::Open(env, path, last_start, next_seq, &writer).ok());
    StageEvent(writer.get(), 99, 99);
    StageEvent(writer.get(), 99, 100);
    ASSERT_TRUE(writer->Commit().ok());
    const uint64_t end = writer->end();
    writer.reset();
    data = ReadAll(path);
    s = ParseLog(path, data, 0, 1, &parsed);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(parsed.records.size(), kept + 2);
    EXPECT_EQ(parsed.records[kept].offset, last_start);
    EXPECT_EQ(parsed.records[kept].seq, next_seq);
    EXPECT_EQ(parsed.torn_bytes, 0u);
    EXPECT_EQ(parsed.committed_end, end);
    // The rest is free space.
    EXPECT_EQ(data.find_first_not_of('\n', end), std::string::npos);
  }
}

TEST_F(AuditLogTest, TornLastMultiLineBatchIsSetAsideAndAppendsResume) {
  BuiltLog log = Build({1, 3, 2, 3});
  NoSyncEnv env;
  CheckRepairAtEveryOffsetOfLastBatch(&env, LogPath(), log);
}

TEST_F(AuditLogTest, TornLastSingleLineBatchIsSetAsideAndAppendsResume) {
  BuiltLog log = Build({2, 1, 1});
  NoSyncEnv env;
  CheckRepairAtEveryOffsetOfLastBatch(&env, LogPath(), log);
}

TEST_F(AuditLogTest, UnfinishedBatchIsTorn) {
  BuiltLog log = Build({2, 3});
  // The last batch's first two lines are complete and good, but its commit
  // line is missing: the batch does not count.
  const size_t first = log.batch_first.back();
  const uint64_t cut = log.line_offsets[first + 2];
  std::string data = log.data.substr(0, cut);
  LogParseResult parsed;
  ASSERT_TRUE(ParseLog(LogPath(), data, 0, 1, &parsed).ok());
  EXPECT_EQ(parsed.records.size(), 2u);
  EXPECT_EQ(parsed.committed_end, log.batch_start.back());
  EXPECT_EQ(parsed.torn_bytes, cut - log.batch_start.back());
  // ... also when garbage follows the unfinished batch.
  data += "\x01garbage";
  ASSERT_TRUE(ParseLog(LogPath(), data, 0, 1, &parsed).ok());
  EXPECT_EQ(parsed.records.size(), 2u);
  EXPECT_EQ(parsed.torn_bytes, data.size() - log.batch_start.back());
  // A log of nothing but an unfinished batch has no records at all.
  data = log.data.substr(0, log.line_offsets[1]);
  ASSERT_TRUE(ParseLog(LogPath(), data, 0, 1, &parsed).ok());
  EXPECT_EQ(parsed.records.size(), 0u);
  EXPECT_EQ(parsed.committed_end, 0u);
  EXPECT_EQ(parsed.torn_bytes, data.size());
}

// Padding ('\n' or NUL) after the last line is free space; anything else is
// a torn tail, set aside without the padding after it.
TEST_F(AuditLogTest, GarbageAfterGoodRecordsIsTornPaddingIsFreeSpace) {
  BuiltLog log = Build({1, 2});
  const std::string zeros(8, '\0');
  struct Case {
    std::string tail;
    std::string torn;  // what is set aside
  };
  const std::vector<Case> kCases = {
      {"garbage", "garbage"},
      {"garbage\n", "garbage\n"},
      {"garbage\n\n\n\n", "garbage\n"},
      {"garbage" + zeros, "garbage"},
      {zeros + "garbage\n" + zeros, "garbage\n"},
      {"\n", ""},
      {"\n\n\n", ""},
      {zeros, ""},
      {zeros + "\n", ""},
      {std::string(4096, '\0'), ""},
      {std::string(70000, '\n'), ""},
      {"{\"seq\":4,\"ts\":1,\"event\":\"x\"}\n\n\n",  // no crc
       "{\"seq\":4,\"ts\":1,\"event\":\"x\"}\n"},
      {"{\"seq\":4,\"ts\":1,\"event\":\"x\",\"commit\":true,\"crc\":"
       "\"00000000\"}\n",
       "{\"seq\":4,\"ts\":1,\"event\":\"x\",\"commit\":true,\"crc\":"
       "\"00000000\"}\n"},
      {log.lines[0].substr(0, 20) + "\n\n", log.lines[0].substr(0, 20) + "\n"},
  };
  for (size_t t = 0; t < kCases.size(); t++) {
    SCOPED_TRACE("tail " + std::to_string(t));
    WriteAll(LogPath(), log.data + kCases[t].tail);
    const std::string data = ReadAll(LogPath());
    LogParseResult parsed;
    Status s = ParseLog(LogPath(), data, 0, 1, &parsed);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(parsed.records.size(), log.lines.size());
    EXPECT_EQ(parsed.committed_end, log.data.size());
    // From the committed end to the last byte that is not padding (and the
    // newline after it).
    const std::string& tail = kCases[t].tail;
    size_t torn_bytes = tail.find_last_not_of(log_format::kPadBytes);
    torn_bytes = torn_bytes == std::string::npos ? 0
                 : torn_bytes + 1 < tail.size() && tail[torn_bytes + 1] == '\n'
                     ? torn_bytes + 2
                     : torn_bytes + 1;
    EXPECT_EQ(parsed.torn_bytes, torn_bytes);
    if (kCases[t].torn.empty()) continue;
    std::string aside;
    ASSERT_TRUE(
        SetAsideTornTail(env_, LogPath(), parsed.committed_end, &aside).ok());
    EXPECT_EQ(ReadAll(aside), kCases[t].torn);
    EXPECT_EQ(ReadAll(LogPath()), log.data);
    std::filesystem::remove(aside);
  }
  // A repeat of the last line (seq 3 again) is a good line with the wrong
  // seq: corruption, not torn.
  LogParseResult parsed;
  Status s =
      ParseLog(LogPath(), log.data + log.lines.back() + "\n", 0, 1, &parsed);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
}

TEST_F(AuditLogTest, DamagedLineFollowedByGoodOnesIsCorruptionNamingOffset) {
  BuiltLog log = Build({1, 3, 2});
  // Every byte of every line that has a good line after it.
  for (size_t i = 0; i + 1 < log.lines.size(); i++) {
    for (size_t k = 0; k < log.lines[i].size(); k++) {
      std::string data = log.data;
      char& c = data[log.line_offsets[i] + k];
      c = static_cast<char>(c ^ 0x01);
      LogParseResult parsed;
      Status s = ParseLog(LogPath(), data, 0, 1, &parsed);
      ASSERT_TRUE(s.IsCorruption())
          << "line " << i << " byte " << k << ": " << s.ToString();
      EXPECT_TRUE(Contains(s.message(), LogPath())) << s.message();
      EXPECT_TRUE(NamesOffset(s.message(), log.line_offsets[i]))
          << "line " << i << " byte " << k << ": " << s.message();
    }
  }
  // A damaged line with only damage after it is a torn tail: the batch it
  // belongs to is not committed.
  std::string data = log.data;
  data[log.line_offsets.back() + 3] ^= 0x01;
  LogParseResult parsed;
  ASSERT_TRUE(ParseLog(LogPath(), data, 0, 1, &parsed).ok());
  EXPECT_EQ(parsed.records.size(), 4u);
  EXPECT_EQ(parsed.committed_end, log.batch_start.back());
}

TEST_F(AuditLogTest, GarbageLineBetweenGoodOnesIsCorruption) {
  BuiltLog log = Build({2, 2});
  const uint64_t at = log.batch_start[1];
  const std::string data =
      log.data.substr(0, at) + "garbage\n" + log.data.substr(at);
  LogParseResult parsed;
  Status s = ParseLog(LogPath(), data, 0, 1, &parsed);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(NamesOffset(s.message(), at)) << s.message();
  // Zeros in the middle (a lost block) too.
  const std::string zeros = log.data.substr(0, at) + std::string(64, '\0') +
                            "\n" + log.data.substr(at);
  s = ParseLog(LogPath(), zeros, 0, 1, &parsed);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(NamesOffset(s.message(), at)) << s.message();
}

TEST_F(AuditLogTest, SeqGapIsCorruption) {
  // seq 1..3, then a writer that skips 4, then more good lines.
  std::unique_ptr<LogWriter> writer;
  ASSERT_TRUE(LogWriter::Open(env_, LogPath(), 0, 1, &writer).ok());
  for (int i = 0; i < 3; i++) StageEvent(writer.get(), 0, i);
  ASSERT_TRUE(writer->Commit().ok());
  const uint64_t gap_at = writer->end();
  writer->Reposition(gap_at, 5);
  for (int i = 0; i < 2; i++) StageEvent(writer.get(), 1, i);
  ASSERT_TRUE(writer->Commit().ok());
  for (int i = 0; i < 2; i++) StageEvent(writer.get(), 2, i);
  ASSERT_TRUE(writer->Commit().ok());
  const std::string data = ReadAll(LogPath());
  for (int64_t expected : {int64_t{1}, int64_t{0}}) {
    LogParseResult parsed;
    Status s = ParseLog(LogPath(), data, 0, expected, &parsed);
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), LogPath())) << s.message();
    EXPECT_TRUE(NamesOffset(s.message(), gap_at)) << s.message();
  }
  // A seq that goes back (a repeated batch) is corruption too.
  WriteAll(LogPath(), "");
  ASSERT_TRUE(LogWriter::Open(env_, LogPath(), 0, 1, &writer).ok());
  for (int i = 0; i < 3; i++) StageEvent(writer.get(), 0, i);
  ASSERT_TRUE(writer->Commit().ok());
  const uint64_t repeat_at = writer->end();
  writer->Reposition(repeat_at, 2);
  StageEvent(writer.get(), 1, 0);
  ASSERT_TRUE(writer->Commit().ok());
  StageEvent(writer.get(), 1, 1);
  ASSERT_TRUE(writer->Commit().ok());
  LogParseResult parsed;
  Status s = ParseLog(LogPath(), ReadAll(LogPath()), 0, 1, &parsed);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(NamesOffset(s.message(), repeat_at)) << s.message();
}

TEST_F(AuditLogTest, FirstSeqMustBeTheExpectedOne) {
  BuiltLog log = Build({2, 2});
  LogParseResult parsed;
  Status s = ParseLog(LogPath(), log.data, 0, 2, &parsed);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(NamesOffset(s.message(), 0)) << s.message();
  ASSERT_TRUE(ParseLog(LogPath(), log.data, 0, 0, &parsed).ok());
  EXPECT_EQ(parsed.records.size(), 4u);
}

TEST_F(AuditLogTest, ParsingFromAnOffsetReportsFileOffsets) {
  BuiltLog log = Build({1, 3, 2});
  const uint64_t base = log.batch_start[1];
  const std::string tail = log.data.substr(base);
  LogParseResult parsed;
  ASSERT_TRUE(ParseLog(LogPath(), tail, base, 2, &parsed).ok());
  ASSERT_EQ(parsed.records.size(), 5u);
  EXPECT_EQ(parsed.records[0].offset, base);
  EXPECT_EQ(parsed.records[0].seq, 2);
  EXPECT_EQ(parsed.records[4].offset, log.line_offsets[5]);
  EXPECT_EQ(parsed.committed_end, log.data.size());
  // A torn tail counts from the end of the file.
  ASSERT_TRUE(
      ParseLog(LogPath(), tail.substr(0, tail.size() - 5), base, 2, &parsed)
          .ok());
  EXPECT_EQ(parsed.records.size(), 3u);
  EXPECT_EQ(parsed.committed_end, log.batch_start[2]);
  EXPECT_EQ(parsed.torn_bytes, log.data.size() - 5 - log.batch_start[2]);
  // A torn tail right at the base: committed_end is the base.
  ASSERT_TRUE(ParseLog(LogPath(), "garb", base, 2, &parsed).ok());
  EXPECT_EQ(parsed.records.size(), 0u);
  EXPECT_EQ(parsed.committed_end, base);
  EXPECT_EQ(parsed.torn_bytes, 4u);
  // Corruption offsets are file offsets too.
  std::string damaged = tail;
  damaged[log.line_offsets[2] - base + 4] ^= 0x01;
  Status s = ParseLog(LogPath(), damaged, base, 2, &parsed);
  ASSERT_TRUE(s.IsCorruption());
  EXPECT_TRUE(NamesOffset(s.message(), log.line_offsets[2])) << s.message();
}

TEST_F(AuditLogTest, FailedCommitIsCutBackAndNamesTheFile) {
  for (auto kind : {FaultInjectionEnv::kWrite, FaultInjectionEnv::kSync}) {
    for (int err : {ENOSPC, EIO}) {
      SCOPED_TRACE("kind " + std::to_string(kind) + " err " +
                   std::to_string(err));
      WriteAll(LogPath(), "");
      FaultInjectionEnv env(Env::Posix());
      env.SetTornWrites(true);
      std::unique_ptr<LogWriter> writer;
      ASSERT_TRUE(LogWriter::Open(&env, LogPath(), 0, 1, &writer).ok());
      StageEvent(writer.get(), 0, 0);
      ASSERT_TRUE(writer->Commit().ok());
      const uint64_t end = writer->end();
      for (int i = 0; i < 3; i++) StageEvent(writer.get(), 1, i);
      env.FailOp(kind, 1, err, /*persistent=*/false);
      Status s = writer->Commit();
      ASSERT_TRUE(s.IsIOError()) << s.ToString();
      EXPECT_TRUE(Contains(s.message(), LogPath())) << s.message();
      EXPECT_EQ(writer->pending_events(), 0u);
      EXPECT_EQ(writer->end(), end);
      EXPECT_EQ(writer->next_seq(), 2);
      EXPECT_EQ(ReadAll(LogPath()).size(), end);
      // The next batch gets the seqs the failed one had.
      StageEvent(writer.get(), 2, 0);
      ASSERT_TRUE(writer->Commit().ok());
      LogParseResult parsed;
      ASSERT_TRUE(ParseLog(LogPath(), ReadAll(LogPath()), 0, 1, &parsed).ok());
      ASSERT_EQ(parsed.records.size(), 2u);
      EXPECT_EQ(parsed.records[1].seq, 2);
      EXPECT_EQ(parsed.torn_bytes, 0u);
    }
  }
}
}  // namespace
}  // namespace wizq::audit_log_test
