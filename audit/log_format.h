// The audit log, `.wizard/audit.jsonl`: the run's append-only history.
//
// One JSON object per line, '\n'-terminated, fields in this order:
//
//   {"seq":17,"ts":1763776000123,"event":"task_claimed",<event fields>
//    [,"commit":true],"crc":"1a2b3c4d"}
//
//   seq     rises by exactly 1 from line to line, starting at 1.
//   ts      milliseconds since the Unix epoch (UTC) when it was written.
//   event   the event name (SPEC §4); its own fields follow.
//   commit  present, and true, on the last line of each commit. Events are
//           written in batches (a task's completion together with the tasks
//           it spawns, several results at once): a batch is one write and
//           one fdatasync, and it counts only once its commit line is
//           complete. Lines after the last commit line are an unfinished
//           batch: they are part of the torn tail.
//   crc     CRC-32 (zlib polynomial) of every byte of the line before
//           `,"crc":`, as 8 lowercase hex digits; always the last field.
//
// Free space. While a run is live the file is preallocated: after the last
// line come padding bytes ('\n', so the file stays valid JSON Lines with
// blank lines at the end), and each commit overwrites padding in place. The
// file size then does not change on a commit, so fdatasync writes the data
// block only, not the inode. At rest (a worker closes the queue) the padding
// is cut off again. Readers treat any run of '\n' and NUL bytes after the
// last line as free space (NUL: an extension of the file that a power loss
// cut short).
//
// Reading (ParseLog) splits the file into:
//   - the committed prefix: every line up to the last commit line, each
//     with a good crc and seq = previous + 1;
//   - free space: the padding after it;
//   - a torn tail: whatever non-padding bytes follow the committed prefix
//     when nothing after them is a good line (a crash mid-write: a line
//     cut short, garbage, or an unfinished batch); also the one batch that
//     was being written when the power failed, if the disk kept only some
//     of its sectors: good lines after a hole of padding, with at most one
//     commit line among them, the last;
//   - or corruption: any other bad line (or seq gap) with a good line after
//     it — an error naming the file and byte offset.
// Before anyone writes again, a torn tail is copied aside to
// `.wizard/audit.torn-<offset>.<ms>.jsonl` and cut off (see audit/log.h).
#ifndef WIZQ_AUDIT_LOG_FORMAT_H_
#define WIZQ_AUDIT_LOG_FORMAT_H_

#include <cstddef>
#include <string_view>

namespace wizq::log_format {

inline constexpr std::string_view kCrcPrefix = ",\"crc\":\"";
// `,"crc":"` + 8 hex digits + `"}`
inline constexpr size_t kCrcSuffixLength = 8 + 8 + 2;
inline constexpr std::string_view kCommitField = ",\"commit\":true";
// What the writer fills free space with, and what readers take for it.
inline constexpr char kPadByte = '\n';
inline constexpr std::string_view kPadBytes{"\n\0", 2};

}  // namespace wizq::log_format

#endif  // WIZQ_AUDIT_LOG_FORMAT_H_
