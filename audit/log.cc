#include "audit/log.h"

#include <zlib.h>

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

Status ParseLog(const std::string& path, std::string_view data,
                uint64_t base_offset, int64_t expected_seq,
                LogParseResult* result) {
  result->records.clear();
  size_t committed_records = 0;
  uint64_t committed_end = 0;
  // First bad position not yet followed by a good line.
  bool have_bad = false;
  uint64_t bad_offset = 0;
  std::string bad_what;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    if (nl == std::string_view::npos) break;  // no newline: torn
    std::string_view line = data.substr(pos, nl - pos);
    uint64_t offset = base_offset + pos;
    int64_t seq = 0;
    bool good = LineChecksumOk(line) && LineSeq(line, &seq);
    if (good && have_bad) {
      return Status::Corruption(OffsetMessage(path, bad_offset, bad_what));
    }
    if (good && expected_seq != 0 && seq != expected_seq) {
      return Status::Corruption(
          OffsetMessage(path, offset,
                        "seq " + std::to_string(seq) + " where " +
                            std::to_string(expected_seq) + " was expected"));
    }
    if (!good) {
      if (!have_bad) {
        have_bad = true;
        bad_offset = offset;
        bad_what =
            "a line that is not a valid audit record (bad checksum "
            "or format)";
      }
    } else {
      result->records.push_back({seq, offset, line});
      expected_seq = seq + 1;
      if (IsCommitLine(line)) {
        committed_records = result->records.size();
        committed_end = offset + line.size() + 1;
      }
    }
    pos = nl + 1;
  }
  result->records.resize(committed_records);
  if (committed_records == 0) committed_end = base_offset;
  result->committed_end = committed_end;
  result->torn_bytes = base_offset + data.size() - committed_end;
  return Status::OK();
}

Status SetAsideTornTail(Env* env, const std::string& log_path,
                        uint64_t committed_end, std::string* aside_path) {
  std::string tail;
  WIZQ_RETURN_IF_ERROR(env->ReadFileFrom(log_path, committed_end, &tail));
  if (tail.empty()) return Status::OK();
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
      env->NewAppendableFile(path, &w->file_).Annotate("opening " + path));
  *writer = std::move(w);
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
  CrashPoint("log.before_write");
  Status s = file_->Append(batch);
  CrashPoint("log.after_write");
  if (s.ok()) s = file_->Sync();
  if (s.ok()) CrashPoint("log.after_sync");
  if (!s.ok()) {
    // Undo what may have reached the file so that the failed batch cannot
    // be mistaken for a committed one later; if even that fails, the
    // missing newline/commit keeps a partial batch a torn tail.
    file_->Truncate(end_);
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
