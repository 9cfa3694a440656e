// The fixture of the audit log's tests (audit_log_test.cc,
// audit_log_in_place_test.cc, audit_log_queue_test.cc): BuiltLog, a log
// written through LogWriter and where everything in it is, and helpers.
#ifndef WIZQ_TESTS_AUDIT_LOG_FIXTURE_H_
#define WIZQ_TESTS_AUDIT_LOG_FIXTURE_H_

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "audit/log.h"
#include "tests/test_util.h"
#include "util/json_writer.h"

namespace wizq::audit_log_test {

using test::ReadAll;
using test::ScratchDir;

inline bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// True if `message` names byte offset `offset` (and not a longer number
// that starts with the same digits).
inline bool NamesOffset(const std::string& message, uint64_t offset) {
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
inline void StageEvent(LogWriter* writer, int batch, int index) {
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

}  // namespace wizq::audit_log_test

#endif  // WIZQ_TESTS_AUDIT_LOG_FIXTURE_H_
