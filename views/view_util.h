// Small formatting helpers shared by the read-only views (`wizq status`,
// `wizq log`, `wizq report`, `wizq prune`).
#ifndef WIZQ_CLI_VIEW_UTIL_H_
#define WIZQ_CLI_VIEW_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "util/shell_quote.h"  // ShellQuote, for the commands shown

namespace wizq {

struct Task;

// Local time "YYYY-MM-DD HH:MM:SS.mmm" of a wall-clock ms.
std::string FormatTime(int64_t ms);
// "1.5s", "2m03s", "1h02m": a duration for people.
std::string FormatDuration(int64_t ms);
// "512 B", "12.3 KiB", "4.0 MiB".
std::string FormatBytes(uint64_t bytes);
// `text` cut to at most `max` bytes (on a UTF-8 boundary) with "…" added
// when cut; newlines and tabs become spaces.
std::string Shorten(std::string_view text, size_t max);
// `text` in at most `max` columns (ASCII; on UTF-8 boundaries) with its
// middle cut out and "…" in its place, newlines and tabs as spaces: two
// long values that share a prefix (`{"file":"src/…/a.c"}`, `…/b.c"}`)
// stay apart. For values in tables and lists; max >= 3.
std::string ShortenMiddle(std::string_view text, size_t max);
// Wall clock now, in ms.
int64_t WallNowMs();
// How a task's line names a finally hook: " (finally)", " (finally, run N)"
// for the hook that re-runs it the N-th time (Task::generation), "" for a
// task that is no hook.
std::string HookLabel(const Task& t);

}  // namespace wizq

#endif  // WIZQ_CLI_VIEW_UTIL_H_
