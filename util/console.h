// Console: the terminal (stderr) shared by the progress output and the
// questions of Prompt steps (SPEC §10), so that a live progress line never
// garbles a question: while a question is open, the live line is not drawn
// and other lines are held back, then written when the question closes.
//
// Thread-safety: every function may be called from any thread.
#ifndef WIZQ_UTIL_CONSOLE_H_
#define WIZQ_UTIL_CONSOLE_H_

#include <string>

namespace wizq {
namespace console {

// Writes `line` and a newline to stderr (clearing a live line first), or
// holds it while a question is open.
void WriteLine(const std::string& line);
// Shows `text` as the live line (replacing the previous one, no newline);
// does nothing while a question is open.
void DrawLive(const std::string& text);
// Clears the live line, if one is shown.
void ClearLive();

// Opens a question: clears the live line; from now until EndQuestion, only
// Ask writes to stderr.
void BeginQuestion();
// Writes question text (no newline added) while a question is open.
void Ask(const std::string& text);
// Closes the question and writes the lines held back meanwhile.
void EndQuestion();

}  // namespace console
}  // namespace wizq

#endif  // WIZQ_UTIL_CONSOLE_H_
