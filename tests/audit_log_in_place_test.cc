// Tests of the audit log (audit/log.h, audit/log_format.h): its
// preallocated free space overwritten in place, two writers on one log,
// and holes (sectors lost in a power loss): torn when only the last batch
// lost them, corruption otherwise. The fixture is in audit_log_fixture.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "audit/log.h"
#include "audit/log_format.h"
#include "tests/audit_log_fixture.h"
#include "tests/test_util.h"

namespace wizq::audit_log_test {
namespace {

using test::WriteAll;

// --- preallocation, in-place writes and holes --------------------------------

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

}  // namespace
}  // namespace wizq::audit_log_test
