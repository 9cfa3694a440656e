// Reading and appending the audit log (format: audit/log_format.h).
//
// LogWriter batches events and makes each batch durable with one write and
// one fdatasync (group commit), overwriting the preallocated free space at
// the log's logical end. ParseLog parses a byte range of the log and tells
// committed lines from free space, a torn tail and corruption.
//
// REQUIRES: the caller holds the queue directory's lock whenever it appends
// or repairs; readers that do not hold it must never repair.
#ifndef WIZQ_AUDIT_LOG_H_
#define WIZQ_AUDIT_LOG_H_

// Private to the directory store, as queue/dir/dir_private.h says (spelled
// out here: audit/ sits below queue/ in the layers).
#ifndef WIZQ_DIR_STORE_INTERNAL
#error \
    "a header private to the directory store (queue/dir/, audit/): use queue/store.h (Store::Open) instead"
#endif

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fs/env.h"
#include "util/status.h"

namespace wizq {

class JsonWriter;

// One committed line of the log.
struct LogRecord {
  int64_t seq = 0;
  uint64_t offset = 0;    // byte offset of the line in the file
  std::string_view line;  // without the trailing newline; points into the
                          // buffer given to ParseLog
};

struct LogParseResult {
  std::vector<LogRecord> records;  // committed lines, in order
  uint64_t committed_end = 0;      // file offset just past the last commit
  // Bytes after committed_end up to the last one that is not padding (the
  // torn tail); 0 when only free space follows the committed prefix.
  uint64_t torn_bytes = 0;
};

// Parses `data`, which holds the log from file offset `base_offset` on.
// `expected_seq` is the seq the first line must have (0: any). On
// corruption returns Corruption naming `path` and the byte offset.
Status ParseLog(const std::string& path, std::string_view data,
                uint64_t base_offset, int64_t expected_seq,
                LogParseResult* result);

// Checks one line's crc; returns false for a bad or missing checksum.
bool LineChecksumOk(std::string_view line);

// An event line (`{"seq":..,"ts":..,"event":..,...}`, queue/events.h) as a
// line of the log that commits alone: the commit field, its checksum and
// '\n' appended. False (and *line unchanged) if it is no JSON object.
bool FrameCommittedLine(std::string* line);

// Copies the bytes from `committed_end` to the end of the log, without the
// padding before and after them, into `<dir>/audit.torn-<offset>.<ms>.jsonl`
// (synced), then truncates the log to `committed_end` (synced). `aside_path`
// receives the copy's path. REQUIRES: lock held.
Status SetAsideTornTail(Env* env, const std::string& log_path,
                        uint64_t committed_end, std::string* aside_path);

class LogWriter {
 public:
  // Opens `path` for writing. `end` is the logical end of the log (just
  // past the last committed line, which the caller has read) and
  // `next_seq` the seq the next line gets.
  static Status Open(Env* env, const std::string& path, uint64_t end,
                     int64_t next_seq, std::unique_ptr<LogWriter>* writer);

  // Starts a new line for `event`; the caller adds the event's fields with
  // the returned writer (already inside the object), then calls EndEvent.
  JsonWriter& BeginEvent(std::string_view event, int64_t ts_ms);
  // Closes the line and returns it as a complete JSON object (without its
  // commit and crc fields, which Commit adds) so that the caller can apply
  // it to its state exactly as a reader of the log would.
  const std::string& EndEvent();
  size_t pending_events() const { return pending_.size(); }
  // Writes the pending lines at end() with one write and one fdatasync
  // (first growing the free space by one more write and fdatasync when the
  // batch does not fit in it). On failure the log is cut back to end()
  // (best effort) and the error names the file; the pending lines are
  // dropped either way.
  Status Commit(std::vector<std::string>* committed_lines = nullptr);
  // Drops the pending lines and their seqs.
  void Abandon();

  // Reads the log from `offset` (the end of a committed line) up to the
  // free space after the last line or the end of the file, through the
  // writer's descriptor: a cheap probe when nothing was written since.
  // Checks that the byte before `offset` is the newline ending that line
  // (Corruption if the log was cut or replaced under the run).
  Status ReadFrom(uint64_t offset, std::string* data);
  // After other processes appended: the new end and next seq.
  void Reposition(uint64_t end, int64_t next_seq);
  // Cuts the free space off (synced), leaving plain JSON Lines; called when
  // a worker comes to rest. REQUIRES: lock held, nothing pending.
  Status TrimFreeSpace();
  uint64_t end() const { return end_; }
  int64_t next_seq() const { return next_seq_; }
  const std::string& path() const { return path_; }

 private:
  LogWriter() = default;
  // Makes [end_, end_ + n) free space inside the file, growing it if needed.
  Status Reserve(uint64_t n);

  Env* env_ = nullptr;
  std::string path_;
  std::unique_ptr<RandomRWFile> file_;
  uint64_t end_ = 0;
  // The file size as last seen; [end_, alloc_) is free space. Too large
  // after someone else cut the file: writes then grow it, which is correct,
  // and ReadFrom corrects it when it meets the end of the file.
  uint64_t alloc_ = 0;
  int64_t next_seq_ = 1;
  std::vector<std::string> pending_;  // lines without commit/crc/newline
  std::unique_ptr<JsonWriter> json_;
};

}  // namespace wizq

#endif  // WIZQ_AUDIT_LOG_H_
