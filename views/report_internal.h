// Internal to `wizq report` (views/report_html.cc, views/report_timeline.cc).
#ifndef WIZQ_VIEWS_REPORT_INTERNAL_H_
#define WIZQ_VIEWS_REPORT_INTERNAL_H_

#include <string>
#include <string_view>

namespace wizq {

struct RunHistory;

// `text` with & < > " ' escaped, for HTML text and attribute values.
std::string HtmlEscape(std::string_view text);
// The timeline: one <svg> element (see views/report_html.h for its classes).
std::string RenderTimelineSvg(const RunHistory& h);

}  // namespace wizq

#endif  // WIZQ_VIEWS_REPORT_INTERNAL_H_
