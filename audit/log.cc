#include "audit/log.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>

#include "audit/log_format.h"
#include "util/crash_point.h"
#include "util/json_writer.h"

namespace wizq {
namespace {

uint32_t Crc32(std::string_view data) {
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(data.data()),
            static_cast<uInt>(data.size())));
}

void AppendCrcSuffix(std::string* line) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", Crc32(*line));
  line->append(log_format::kCrcPrefix);
  line->append(buf, 8);
  line->append("\"}");
}

}  // namespace

bool FrameCommittedLine(std::string* line) {
  if (line->empty() || line->back() != '}') return false;
  line->pop_back();
  line->append(log_format::kCommitField);
  AppendCrcSuffix(line);
  line->push_back('\n');
  return true;
}

namespace {

// Reads the seq of a line whose checksum is good: `{"seq":N,`. Seqs count
// from 1; the largest int64 is refused too, so that seq + 1 cannot overflow.
bool LineSeq(std::string_view line, int64_t* seq) {
  constexpr std::string_view kPrefix = "{\"seq\":";
  if (line.substr(0, kPrefix.size()) != kPrefix) return false;
  const char* begin = line.data() + kPrefix.size();
  auto r = std::from_chars(begin, line.data() + line.size(), *seq);
  return r.ec == std::errc() && r.ptr < line.data() + line.size() &&
         *r.ptr == ',' && *seq >= 1 &&
         *seq < std::numeric_limits<int64_t>::max();
}

bool IsCommitLine(std::string_view line) {
  std::string_view body =
      line.substr(0, line.size() - log_format::kCrcSuffixLength);
  return body.size() >= log_format::kCommitField.size() &&
         body.substr(body.size() - log_format::kCommitField.size()) ==
             log_format::kCommitField;
}

std::string OffsetMessage(const std::string& path, uint64_t offset,
                          std::string_view what) {
  return path + ": " + std::string(what) + " at byte offset " +
         std::to_string(offset) +
         "; the log cannot be trusted past this point. Move the .wizard "
         "directory aside (it is kept, not deleted) and start again, or "
         "repair the line by hand";
}

}  // namespace

bool LineChecksumOk(std::string_view line) {
  if (line.size() < log_format::kCrcSuffixLength + 2) return false;
  std::string_view suffix =
      line.substr(line.size() - log_format::kCrcSuffixLength);
  if (suffix.substr(0, log_format::kCrcPrefix.size()) !=
          log_format::kCrcPrefix ||
      suffix.substr(suffix.size() - 2) != "\"}") {
    return false;
  }
  uint32_t stored = 0;
  std::string_view hex = suffix.substr(log_format::kCrcPrefix.size(), 8);
  auto r = std::from_chars(hex.data(), hex.data() + hex.size(), stored, 16);
  if (r.ec != std::errc() || r.ptr != hex.data() + hex.size()) return false;
  return stored ==
         Crc32(line.substr(0, line.size() - log_format::kCrcSuffixLength));
}

namespace {

// The bad lines after the committed prefix, and the good ones after them.
struct Hole {
  bool seen = false;
  uint64_t offset = 0;  // the first bad line
  bool starts_with_padding = false;
  int64_t expected_seq = 0;  // the seq the first bad line should have had
  bool has_padding = false;  // a blank line or a NUL among the bad ones
  size_t good_after = 0;     // good lines after it
  int64_t first_seq_after = 0, last_seq_after = 0;
  bool seqs_in_order = true;  // each good line after: a higher seq
  size_t commits_after = 0;   // commit lines among them
  bool last_is_commit = false;

  // Bad bytes at `at` (a run of padding, or a bad line).
  void AddBad(uint64_t at, int64_t expected, bool padding) {
    if (!seen) {
      seen = true;
      offset = at;
      expected_seq = expected;
      starts_with_padding = padding;
    }
    has_padding = has_padding || padding;
  }
  void AddGood(int64_t seq, bool commit) {
    if (good_after++ == 0) {
      first_seq_after = seq;
    } else if (seq <= last_seq_after) {
      seqs_in_order = false;
    }
    last_seq_after = seq;
    last_is_commit = commit;
    if (commit) commits_after++;
  }
};

// A good line after bad ones is corruption, except in the one batch that
// was being written when the power failed: the disk kept some of its
// sectors and not others, so padding replaced some of the batch's bytes in
// place. Then at least one line is missing where the padding is (or where
// each of several holes is), the lines after it have rising seqs, and at
// most the last of them is a commit line.
bool IsTornBatch(const Hole& hole) {
  return hole.has_padding && hole.seqs_in_order &&
         (hole.expected_seq == 0 || hole.first_seq_after > hole.expected_seq) &&
         (hole.commits_after == 0 ||
          (hole.commits_after == 1 && hole.last_is_commit));
}

// The end of what is not free space in `data`: just past its last byte
// that is not padding, and the newline after that byte if there is one.
size_t DataEnd(std::string_view data) {
  size_t last = data.find_last_not_of(log_format::kPadBytes);
  if (last == std::string_view::npos) return 0;
  return last + 1 < data.size() && data[last + 1] == '\n' ? last + 2 : last + 1;
}

}  // namespace

Status ParseLog(const std::string& path, std::string_view data,
                uint64_t base_offset, int64_t expected_seq,
                LogParseResult* result) {
  result->records.clear();
  size_t committed_records = 0;
  uint64_t committed_end = base_offset;
  Hole hole;
  size_t pos = 0;
  while (pos < data.size()) {
    if (log_format::kPadBytes.find(data[pos]) != std::string_view::npos) {
      // Free space, or a hole in a torn batch: skip the run at once.
      size_t next = data.find_first_not_of(log_format::kPadBytes, pos);
      if (next == std::string_view::npos) break;
      hole.AddBad(base_offset + pos, expected_seq, /*padding=*/true);
      pos = next;
      continue;
    }
    size_t nl = data.find('\n', pos);
    if (nl == std::string_view::npos) break;  // no newline: torn
    std::string_view line = data.substr(pos, nl - pos);
    const uint64_t offset = base_offset + pos;
    pos = nl + 1;
    int64_t seq = 0;
    if (!LineChecksumOk(line) || !LineSeq(line, &seq)) {
      hole.AddBad(offset, expected_seq,
                  line.find('\0') != std::string_view::npos);
      continue;
    }
    if (hole.seen) {
      hole.AddGood(seq, IsCommitLine(line));
      continue;
    }
    if (expected_seq != 0 && seq != expected_seq) {
      return Status::Corruption(
          OffsetMessage(path, offset,
                        "seq " + std::to_string(seq) + " where " +
                            std::to_string(expected_seq) + " was expected"));
    }
    result->records.push_back({seq, offset, line});
    expected_seq = seq + 1;
    if (IsCommitLine(line)) {
      committed_records = result->records.size();
      committed_end = offset + line.size() + 1;
    }
  }
  if (hole.good_after > 0 && !IsTornBatch(hole)) {
    return Status::Corruption(OffsetMessage(
        path, hole.offset,
        hole.starts_with_padding
            ? "blank lines or zero bytes between audit records"
            : "a line that is not a valid audit record (bad checksum or "
              "format)"));
  }
  result->records.resize(committed_records);
  result->committed_end = committed_end;
  const uint64_t torn_end = base_offset + DataEnd(data);
  result->torn_bytes = torn_end > committed_end ? torn_end - committed_end : 0;
  return Status::OK();
}

Status SetAsideTornTail(Env* env, const std::string& log_path,
                        uint64_t committed_end, std::string* aside_path) {
  std::string tail;
  WIZQ_RETURN_IF_ERROR(env->ReadFileFrom(log_path, committed_end, &tail));
  tail.resize(DataEnd(tail));
  if (tail.empty()) return Status::OK();  // free space only
  tail.erase(0, tail.find_first_not_of(log_format::kPadBytes));
  const std::string base = DirName(log_path) + "/audit.torn-" +
                           std::to_string(committed_end) + "." +
                           std::to_string(env->NowMicros() / 1000);
  *aside_path = base + ".jsonl";
  for (int n = 2; env->FileExists(*aside_path); n++) {  // never overwrite one
    *aside_path = base + "-" + std::to_string(n) + ".jsonl";
  }
  WIZQ_RETURN_IF_ERROR(env->WriteFileAtomic(*aside_path, tail));
  CrashPoint("torn.after_copy");
  return env->TruncateFile(log_path, committed_end);
}

Status LogWriter::Open(Env* env, const std::string& path, uint64_t end,
                       int64_t next_seq, std::unique_ptr<LogWriter>* writer) {
  std::unique_ptr<LogWriter> w(new LogWriter());
  w->env_ = env;
  w->path_ = path;
  w->end_ = end;
  w->next_seq_ = next_seq;
  // Creating the log also syncs its directory: name the log either way.
  WIZQ_RETURN_IF_ERROR(
      env->NewRandomRWFile(path, &w->file_).Annotate("opening " + path));
  WIZQ_RETURN_IF_ERROR(w->file_->Size(&w->alloc_));
  *writer = std::move(w);
  return Status::OK();
}

Status LogWriter::Reserve(uint64_t n) {
  if (end_ + n <= alloc_) return Status::OK();
  uint64_t size = 0;  // Another process may have grown the file.
  WIZQ_RETURN_IF_ERROR(file_->Size(&size));
  alloc_ = std::max(size, end_);
  if (end_ + n <= alloc_) return Status::OK();
  // Grow by about the log's size, between 64 KiB and 1 MiB, in whole pages:
  // one extra write and fdatasync per megabyte of log.
  constexpr uint64_t kMinGrow = 64 << 10, kMaxGrow = 1 << 20, kPage = 4096;
  const uint64_t grow = std::clamp(end_, kMinGrow, kMaxGrow);
  const uint64_t target = (end_ + n + grow + kPage - 1) / kPage * kPage;
  WIZQ_RETURN_IF_ERROR(
      file_->Write(alloc_, std::string(target - alloc_, log_format::kPadByte)));
  WIZQ_RETURN_IF_ERROR(file_->Sync());
  alloc_ = target;
  return Status::OK();
}

Status LogWriter::ReadFrom(uint64_t offset, std::string* data) {
  data->clear();
  // Start one byte early to check the newline that ends the applied log.
  const uint64_t start = offset > 0 ? offset - 1 : 0;
  size_t chunk = 4096;  // Usually enough: nothing or one batch is new.
  std::string buf;
  for (uint64_t at = start;; at += buf.size(), chunk = 64 << 10) {
    WIZQ_RETURN_IF_ERROR(file_->Read(at, chunk, &buf));
    std::string_view got = buf;
    if (at == start && offset > 0) {
      if (got.empty() || got[0] != '\n') {
        return Status::Corruption(
            path_ + " was cut or changed under the run: byte offset " +
            std::to_string(start) +
            " should end a committed line. The files were left untouched; "
            "restore the full audit.jsonl, or move the .wizard directory "
            "aside to start over");
      }
      got.remove_prefix(1);
    }
    if (data->empty() && !got.empty() &&
        log_format::kPadBytes.find(got[0]) != std::string_view::npos) {
      return Status::OK();  // free space: nothing new
    }
    data->append(got);
    if (buf.size() < chunk) {  // the end of the file
      alloc_ = std::min(alloc_, at + buf.size());
      return Status::OK();
    }
    if (got.find("\n\n") != std::string_view::npos ||
        got.find('\0') != std::string_view::npos) {
      return Status::OK();  // reached the free space
    }
  }
}

Status LogWriter::TrimFreeSpace() {
  uint64_t size = 0;
  WIZQ_RETURN_IF_ERROR(file_->Size(&size));
  if (size > end_) {
    WIZQ_RETURN_IF_ERROR(file_->Truncate(end_));
    WIZQ_RETURN_IF_ERROR(file_->Sync());
  }
  alloc_ = end_;
  return Status::OK();
}

JsonWriter& LogWriter::BeginEvent(std::string_view event, int64_t ts_ms) {
  pending_.emplace_back();
  json_ = std::make_unique<JsonWriter>(&pending_.back());
  json_->BeginObject();
  json_->Key("seq").Int(next_seq_ + static_cast<int64_t>(pending_.size()) - 1);
  json_->Key("ts").Int(ts_ms);
  json_->Key("event").String(event);
  return *json_;
}

const std::string& LogWriter::EndEvent() {
  json_->EndObject();
  json_.reset();
  return pending_.back();
}

void LogWriter::Abandon() {
  pending_.clear();
  json_.reset();
}

Status LogWriter::Commit(std::vector<std::string>* committed_lines) {
  if (pending_.empty()) return Status::OK();
  std::string batch;
  for (size_t i = 0; i < pending_.size(); i++) {
    std::string& line = pending_[i];
    line.pop_back();  // the closing brace
    if (i + 1 == pending_.size()) line.append(log_format::kCommitField);
    AppendCrcSuffix(&line);
    batch += line;
    batch.push_back('\n');
  }
  Status s = Reserve(batch.size());
  CrashPoint("log.before_write", batch);
  if (s.ok()) s = file_->Write(end_, batch);
  CrashPoint("log.after_write");
  if (s.ok()) s = file_->Sync();
  if (s.ok()) CrashPoint("log.after_sync", batch);
  if (!s.ok()) {
    // Undo what may have reached the file so that the failed batch cannot
    // be mistaken for a committed one later; if even that fails, the
    // missing newline/commit keeps a partial batch a torn tail.
    if (file_->Truncate(end_).ok()) alloc_ = end_;
    Abandon();
    return s;
  }
  end_ += batch.size();
  next_seq_ += static_cast<int64_t>(pending_.size());
  if (committed_lines) committed_lines->swap(pending_);
  pending_.clear();
  return Status::OK();
}

void LogWriter::Reposition(uint64_t end, int64_t next_seq) {
  end_ = end;
  next_seq_ = next_seq;
}

}  // namespace wizq
