// Internal to `wizq report` (cli/report_html.cc, cli/report_timeline.cc).
#ifndef WIZQ_CLI_REPORT_INTERNAL_H_
#define WIZQ_CLI_REPORT_INTERNAL_H_

#include <string>
#include <string_view>

namespace wizq {

struct RunHistory;

// `text` with & < > " ' escaped, for HTML text and attribute values.
std::string HtmlEscape(std::string_view text);
// The timeline: one <svg> element (see cli/report_html.h for its classes).
std::string RenderTimelineSvg(const RunHistory& h);

}  // namespace wizq

#endif  // WIZQ_CLI_REPORT_INTERNAL_H_
