// Tests of the audit log (audit/log.h, audit/log_format.h): what LogWriter
// writes, and how ParseLog tells committed records from a torn tail (a
// crash mid-append: set aside, recovery goes on) and from corruption (an
// error naming the file and the byte offset).
#include <errno.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "audit/log.h"
#include "audit/log_format.h"
#include "fs/fault_env.h"
#include "queue/dir/queue.h"
#include "tests/queue_test_util.h"
#include "tests/test_util.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

using test::MakeTask;
using test::NoSyncEnv;
using test::ReadAll;
using test::ScratchDir;
using test::WithoutFreeSpace;
using test::WriteAll;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// True if `message` names byte offset `offset` (and not a longer number
// that starts with the same digits).
bool NamesOffset(const std::string& message, uint64_t offset) {
  const std::string needle = "byte offset " + std::to_string(offset);
  size_t pos = message.find(needle);
  while (pos != std::string::npos) {
    const size_t end = pos + needle.size();
    if (end == message.size() ||
        !isdigit(static_cast<unsigned char>(message[end]))) {
      return true;
    }
    pos = message.find(needle, end);
  }
  return false;
}

// A log written through LogWriter, and where everything in it is.
struct BuiltLog {
  std::string data;                    // the whole file
  std::vector<std::string> lines;      // without newlines
  std::vector<uint64_t> line_offsets;  // start of each line
  std::vector<size_t> batch_first;     // index of each batch's first line
  std::vector<uint64_t> batch_start;   // byte offset of each batch
  std::vector<uint64_t> batch_end;     // byte offset just past each batch

  // Lines that belong to batches wholly inside the first `bytes` bytes.
  size_t CommittedLines(uint64_t bytes) const {
    size_t n = 0;
    for (size_t b = 0; b < batch_end.size(); b++) {
      if (batch_end[b] <= bytes) {
        n = b + 1 < batch_first.size() ? batch_first[b + 1] : lines.size();
      }
    }
    return n;
  }
  uint64_t CommittedEnd(uint64_t bytes) const {
    uint64_t end = 0;
    for (uint64_t e : batch_end) {
      if (e <= bytes) end = e;
    }
    return end;
  }
};

// Appends one event with a few fields (including text that needs escaping)
// to the writer's pending batch.
void StageEvent(LogWriter* writer, int batch, int index) {
  JsonWriter& w = writer->BeginEvent("test_event", 1763776000000 + index);
  w.Key("batch").Int(batch);
  w.Key("index").Int(index);
  w.Field("text", "quote \" backslash \\ newline \n caf\xC3\xA9 tab \t");
  w.Key("list").BeginArray().Int(1).Null().Bool(true).EndArray();
  writer->EndEvent();
}

class AuditLogTest : public ::testing::Test {
 protected:
  std::string LogPath() const { return dir_.Join("audit.jsonl"); }

  // Writes batches of the given sizes to a new log and describes it.
  BuiltLog Build(const std::vector<int>& batch_sizes) {
    BuiltLog log;
    std::unique_ptr<LogWriter> writer;
    EXPECT_TRUE(LogWriter::Open(env_, LogPath(), 0, 1, &writer).ok());
    int index = 0;
    for (size_t b = 0; b < batch_sizes.size(); b++) {
      log.batch_first.push_back(log.lines.size());
      log.batch_start.push_back(writer->end());
      for (int i = 0; i < batch_sizes[b]; i++) {
        StageEvent(writer.get(), static_cast<int>(b), index++);
      }
      std::vector<std::string> committed;
      Status s = writer->Commit(&committed);
      EXPECT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(committed.size(), static_cast<size_t>(batch_sizes[b]));
      for (const std::string& line : committed) {
        log.line_offsets.push_back(0);  // set below
        log.lines.push_back(line);
      }
      log.batch_end.push_back(writer->end());
    }
    // A live log is preallocated: free space (padding) follows the lines
    // until a worker comes to rest and trims it.
    const std::string live = ReadAll(LogPath());
    EXPECT_GT(live.size(), writer->end());
    EXPECT_EQ(live.find_first_not_of('\n', writer->end()), std::string::npos);
    EXPECT_TRUE(writer->TrimFreeSpace().ok());
    log.data = ReadAll(LogPath());
    EXPECT_EQ(log.data, live.substr(0, writer->end()));
    uint64_t offset = 0;
    for (size_t i = 0; i < log.lines.size(); i++) {
      log.line_offsets[i] = offset;
      offset += log.lines[i].size() + 1;
    }
    EXPECT_EQ(offset, log.data.size());
    return log;
  }

  ScratchDir dir_;
  Env* env_ = Env::Posix();
};

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

// --- preallocation, in-place writes and holes
// ---------------------------------

// Commits overwrite the free space in place: the file size stays put from
// one commit to the next (so fdatasync has no inode to write), and grows in
// chunks only when a batch does not fit.
TEST_F(AuditLogTest, CommitsOverwriteFreeSpaceAndGrowTheFileInChunks) {
  std::unique_ptr<LogWriter> writer;
  ASSERT_TRUE(LogWriter::Open(env_, LogPath(), 0, 1, &writer).ok());
  std::vector<uint64_t> sizes;
  int index = 0;
  for (int b = 0; b < 2000; b++) {
    StageEvent(writer.get(), b, index++);
    ASSERT_TRUE(writer->Commit().ok());
    const uint64_t size = std::filesystem::file_size(LogPath());
    ASSERT_GE(size, writer->end());
    ASSERT_EQ(size % 4096, 0u);
    if (sizes.empty() || sizes.back() != size) sizes.push_back(size);
  }
  // 2000 commits of ~150 bytes (~300 KB) in a handful of extensions.
  EXPECT_GE(sizes.size(), 2u);
  EXPECT_LE(sizes.size(), 8u);
  const std::string data = ReadAll(LogPath());
  EXPECT_EQ(data.find_first_not_of('\n', writer->end()), std::string::npos);
  LogParseResult parsed;
  ASSERT_TRUE(ParseLog(LogPath(), data, 0, 1, &parsed).ok());
  EXPECT_EQ(parsed.records.size(), 2000u);
  EXPECT_EQ(parsed.committed_end, writer->end());
  EXPECT_EQ(parsed.torn_bytes, 0u);
  ASSERT_TRUE(writer->TrimFreeSpace().ok());
  EXPECT_EQ(ReadAll(LogPath()), data.substr(0, writer->end()));
}

// Two writers on one log (two processes, taking turns under the lock): each
// reads what the other committed through its own descriptor.
TEST_F(AuditLogTest, ReadFromSeesWhatAnotherWriterCommitted) {
  std::unique_ptr<LogWriter> a, b;
  ASSERT_TRUE(LogWriter::Open(env_, LogPath(), 0, 1, &a).ok());
  ASSERT_TRUE(LogWriter::Open(env_, LogPath(), 0, 1, &b).ok());
  std::string data;
  ASSERT_TRUE(b->ReadFrom(0, &data).ok());
  EXPECT_EQ(data, "");  // an empty log
  int index = 0;
  for (int round = 0; round < 50; round++) {
    LogWriter* w = round % 2 == 0 ? a.get() : b.get();
    LogWriter* r = round % 2 == 0 ? b.get() : a.get();
    // The reader is behind by one batch of 1..400 lines (the later ones
    // cross the 4 KiB first read and a file extension).
    const int lines = 1 + (round * 37) % 400;
    for (int i = 0; i < lines; i++) StageEvent(w, round, index++);
    const uint64_t start = w->end();
    ASSERT_TRUE(w->Commit().ok());
    ASSERT_TRUE(r->ReadFrom(start, &data).ok());
    LogParseResult parsed;
    ASSERT_TRUE(ParseLog(LogPath(), data, start, r->next_seq(), &parsed).ok());
    ASSERT_EQ(parsed.records.size(), static_cast<size_t>(lines));
    ASSERT_EQ(parsed.committed_end, w->end());
    ASSERT_EQ(parsed.torn_bytes, 0u);
    r->Reposition(parsed.committed_end, w->next_seq());
    // Nothing new after that.
    ASSERT_TRUE(r->ReadFrom(r->end(), &data).ok());
    ASSERT_EQ(data, "");
  }
  // After one writer trims the free space, the other still writes in the
  // right place (growing the file), and reads see it.
  ASSERT_TRUE(a->TrimFreeSpace().ok());
  StageEvent(b.get(), 99, index++);
  const uint64_t start = b->end();
  ASSERT_TRUE(b->Commit().ok());
  ASSERT_TRUE(a->ReadFrom(start, &data).ok());
  LogParseResult parsed;
  ASSERT_TRUE(ParseLog(LogPath(), data, start, a->next_seq(), &parsed).ok());
  EXPECT_EQ(parsed.records.size(), 1u);
  ASSERT_TRUE(ParseLog(LogPath(), ReadAll(LogPath()), 0, 1, &parsed).ok());
  EXPECT_EQ(parsed.records.size(), static_cast<size_t>(index));
}

// A log cut or replaced under a live writer: the byte before the applied
// end is no longer the newline that ended the last line.
TEST_F(AuditLogTest, ReadFromNoticesALogCutUnderTheWriter) {
  BuiltLog log = Build({2, 2});
  std::unique_ptr<LogWriter> writer;
  const uint64_t end = log.data.size();
  ASSERT_TRUE(LogWriter::Open(env_, LogPath(), end, 5, &writer).ok());
  std::string data;
  ASSERT_TRUE(writer->ReadFrom(end, &data).ok());
  EXPECT_EQ(data, "");
  for (uint64_t cut : {end - 1, end - 5, uint64_t{0}}) {
    WriteAll(LogPath(), log.data.substr(0, cut));
    Status s = writer->ReadFrom(end, &data);
    ASSERT_TRUE(s.IsCorruption()) << cut << ": " << s.ToString();
    EXPECT_TRUE(Contains(s.message(), LogPath())) << s.message();
    EXPECT_TRUE(NamesOffset(s.message(), end - 1)) << s.message();
  }
}

// A power loss while the last batch was being written can keep some of its
// sectors and not others: padding (the old content) then sits in place of
// some of its bytes. Every such mix is a torn tail, never corruption, and
// only a fully written batch counts.
TEST_F(AuditLogTest, LastBatchWithSectorsLostIsTorn) {
  // A last batch of ~3.5 KB: 8 sectors of 512 bytes.
  BuiltLog log = Build({3, 2, 24});
  const uint64_t start = log.batch_start.back();
  const uint64_t end = log.data.size();
  const uint64_t first_sector = start / 512, last_sector = (end - 1) / 512;
  const int sectors = static_cast<int>(last_sector - first_sector + 1);
  ASSERT_GE(sectors, 6);
  ASSERT_LE(sectors, 10);
  const std::string free_space(8192, '\n');
  for (char pad : {'\n', '\0'}) {
    for (int mask = 0; mask < (1 << sectors); mask++) {
      SCOPED_TRACE("pad " + std::to_string(pad) + " lost sectors mask " +
                   std::to_string(mask));
      std::string data = log.data + free_space;
      for (int k = 0; k < sectors; k++) {
        if ((mask & (1 << k)) == 0) continue;
        const uint64_t from = std::max(start, (first_sector + k) * 512);
        const uint64_t to = std::min(end, (first_sector + k + 1) * 512);
        std::fill(data.begin() + from, data.begin() + to, pad);
      }
      LogParseResult parsed;
      Status s = ParseLog(LogPath(), data, 0, 1, &parsed);
      ASSERT_TRUE(s.ok()) << s.ToString();
      const bool intact = data.compare(0, end, log.data) == 0;
      ASSERT_EQ(parsed.records.size(),
                intact ? log.lines.size() : log.batch_first.back());
      ASSERT_EQ(parsed.committed_end, intact ? end : start);
      const bool all_padding =
          data.substr(start, end - start)
              .find_first_not_of(log_format::kPadBytes) == std::string::npos;
      ASSERT_EQ(parsed.torn_bytes > 0, !intact && !all_padding);
    }
  }
}

// ... but a hole in an earlier batch, with more than one batch after it, is
// corruption (the disk lost committed data), and so are blank lines or
// zeros inserted between batches (no line is missing where they are).
TEST_F(AuditLogTest, HoleBeforeMoreThanTheLastBatchIsCorruption) {
  BuiltLog log = Build({2, 3, 2, 2});
  for (char pad : {'\n', '\0'}) {
    for (size_t b = 0; b + 2 < log.batch_start.size(); b++) {
      std::string data = log.data;
      const uint64_t at = log.batch_start[b] + 10;
      std::fill(data.begin() + at, data.begin() + at + 40, pad);
      LogParseResult parsed;
      Status s = ParseLog(LogPath(), data, 0, 1, &parsed);
      ASSERT_TRUE(s.IsCorruption()) << b << ": " << s.ToString();
      EXPECT_TRUE(NamesOffset(s.message(), log.batch_start[b])) << s.message();
    }
    const uint64_t at = log.batch_start.back();
    const std::string inserted = log.data.substr(0, at) + std::string(64, pad) +
                                 "\n" + log.data.substr(at);
    LogParseResult parsed;
    Status s = ParseLog(LogPath(), inserted, 0, 1, &parsed);
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(NamesOffset(s.message(), at)) << s.message();
  }
}

// A hole is taken for lost sectors of the last batch only when the lines
// after it are that batch's own, in order: lines out of order or repeated
// after a hole cannot come from a torn write, so they are corruption.
TEST_F(AuditLogTest, HoleFollowedByOutOfOrderSeqsIsCorruption) {
  BuiltLog log = Build({2, 4});
  const size_t f = log.batch_first.back();  // the last batch: lines f..f+3
  const uint64_t hole_at = log.batch_start.back();
  const std::string head = log.data.substr(0, hole_at);
  const std::string hole(log.lines[f].size() + 1, '\n');  // line f lost
  const std::string free_space(4096, '\n');
  auto line = [&](size_t i) { return log.lines[i] + "\n"; };
  // In order, the shape is a torn last batch...
  {
    LogParseResult parsed;
    Status s = ParseLog(
        LogPath(),
        head + hole + line(f + 1) + line(f + 2) + line(f + 3) + free_space, 0,
        1, &parsed);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(parsed.records.size(), f);
    EXPECT_EQ(parsed.committed_end, hole_at);
    EXPECT_GT(parsed.torn_bytes, 0u);
  }
  // ... out of order or repeated, it is not.
  for (const std::string& after : {line(f + 2) + line(f + 1) + line(f + 3),
                                   line(f + 1) + line(f + 1) + line(f + 3)}) {
    LogParseResult parsed;
    Status s =
        ParseLog(LogPath(), head + hole + after + free_space, 0, 1, &parsed);
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(NamesOffset(s.message(), hole_at)) << s.message();
  }
}

// --- through the Queue -------------------------------------------------------

std::string DescribeTasks(const QueueState& state) {
  std::string out;
  for (const Task& t : state.tasks()) {
    out += std::to_string(t.id) + " " + t.type + " " + t.inputs + " " +
           TaskStateName(t.state) + " a=" + std::to_string(t.attempts) + "/" +
           std::to_string(t.max_attempts) +
           " p=" + std::to_string(t.parent_id) + " " + OriginName(t.origin) +
           " by=" + t.claimed_by + " err=" + t.error_reason + " children=";
    for (int64_t c : t.children) out += std::to_string(c) + ",";
    out += "\n";
  }
  return out;
}

QueueOptions RunOptions(const std::string& dir) {
  QueueOptions o;
  o.install_dir = std::filesystem::canonical(dir).string();
  o.run_id = "run-torn";
  o.workflow_json = "{\"steps\":[]}";
  o.initial_tasks.push_back(
      MakeTask("Root", "{\"n\":0}", 0, 3, Origin::kInitial));
  return o;
}

TEST(AuditLogQueueTest, TornLastRecordOfARealRunIsSetAsideOnOpen) {
  ScratchDir dir;
  NoSyncEnv env;
  QueueOptions options = RunOptions(dir.path());
  options.env = &env;
  const std::string log_path = dir.path() + "/.wizard/audit.jsonl";
  std::string before_last;  // tasks before the last commit
  std::string log_before;   // the log before the last commit
  std::string full_log;
  {
    std::unique_ptr<Queue> q;
    OpenReport report;
    ASSERT_TRUE(Queue::Open(options, &q, &report).ok());
    int64_t id = 0;
    ASSERT_TRUE(q->Transact([&](Txn& txn) {
                   return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
                 }).ok());
    ASSERT_TRUE(q->Transact([&](Txn& txn) {
                   return txn.Complete(id,
                                       {MakeTask("Child", "{\"x\":1}", id, 2),
                                        MakeTask("Child", "{\"x\":2}", id, 2)},
                                       nullptr);
                 }).ok());
    before_last = DescribeTasks(q->state());
    log_before = WithoutFreeSpace(ReadAll(log_path));
    // The last commit: a claim, a completion with two children, as one
    // batch of several lines.
    Status s = q->Transact([&](Txn& txn) {
      int64_t c = 0;
      WIZQ_RETURN_IF_ERROR(txn.ClaimNextOfSteps(nullptr, nullptr, &c));
      return txn.Complete(c,
                          {MakeTask("Leaf", "{\"y\":1}", c, 1),
                           MakeTask("Leaf", "{\"y\":2}", c, 1)},
                          nullptr);
    });
    ASSERT_TRUE(s.ok()) << s.ToString();
    full_log = WithoutFreeSpace(ReadAll(log_path));
    // Destroyed without Close: a crash.
  }
  ASSERT_GT(full_log.size(), log_before.size());
  ASSERT_EQ(full_log.substr(0, log_before.size()), log_before);
  // Let the snapshot cover no more than the log before the last commit.
  const std::string snapshot = ReadAll(dir.path() + "/.wizard/queue.json");
  ASSERT_TRUE(Contains(snapshot, "\"version\":1"));

  const uint64_t start = log_before.size();
  // Offsets inside the last batch: every third one, and every one within
  // a few bytes of a line boundary (the AuditLogTest cases above cover
  // every offset at the log level).
  std::vector<uint64_t> cuts;
  for (uint64_t cut = start; cut < full_log.size(); cut++) {
    bool near_boundary = false;
    for (uint64_t d = 0; d <= 3 && d <= cut; d++) {
      near_boundary = near_boundary || full_log[cut - d] == '\n' ||
                      (cut + d < full_log.size() && full_log[cut + d] == '\n');
    }
    if (near_boundary || (cut - start) % 3 == 0) cuts.push_back(cut);
  }
  for (uint64_t cut : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    // Put back the .wizard of the crashed run, cut at `cut`.
    WriteAll(log_path, full_log.substr(0, cut));
    WriteAll(dir.path() + "/.wizard/queue.json", snapshot);
    for (const auto& e :
         std::filesystem::directory_iterator(dir.path() + "/.wizard")) {
      if (e.path().filename().string().rfind("audit.torn-", 0) == 0) {
        std::filesystem::remove(e.path());
      }
    }
    std::unique_ptr<Queue> q;
    OpenReport report;
    Status s = Queue::Open(options, &q, &report);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(report.action, OpenAction::kResumed);
    if (cut == start) {
      EXPECT_EQ(report.torn_tail_path, "");
    } else {
      ASSERT_NE(report.torn_tail_path, "");
      EXPECT_TRUE(Contains(report.torn_tail_path, "/.wizard/audit.torn-"));
      EXPECT_EQ(ReadAll(report.torn_tail_path),
                full_log.substr(start, cut - start));
    }
    EXPECT_EQ(DescribeTasks(q->state()), before_last);
    // The log now continues on a clean line and parses completely.
    const std::string now = ReadAll(log_path);
    EXPECT_EQ(now.substr(0, start), log_before);
    LogParseResult parsed;
    s = ParseLog(log_path, now, 0, 1, &parsed);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(parsed.torn_bytes, 0u);
    EXPECT_EQ(parsed.committed_end, WithoutFreeSpace(now).size());
    // And the run goes on.
    int64_t id = 0;
    ASSERT_TRUE(q->Transact([&](Txn& txn) {
                   return txn.ClaimNextOfSteps(nullptr, nullptr, &id);
                 }).ok());
    EXPECT_EQ(id, 2);
  }
}

}  // namespace
}  // namespace wizq
