// Replies rendered as Markdown in the chat view (issue 12, feature 1), with Qt's own Markdown
// support (QTextCursor::insertMarkdown, CommonMark + GitHub tables): headings, lists, emphasis,
// tables and code. Fenced code blocks are set in the system's fixed-pitch font under a label
// line "<language> · Copy" whose Copy link (href "specchat-copy:<n>") puts the block's exact
// code on the clipboard. The draft-token tint is laid over the rendered text by matching the
// reply's token pieces to the rendered characters in order (markup characters such as "**" or
// "#" have no rendered counterpart and are skipped).
#pragma once

#include <QColor>
#include <QList>
#include <QString>
#include <QStringList>

#include "ui/chat_model.h"

class QTextCursor;
class QTextDocument;

namespace specchat::ui {

// URL scheme of the Copy links; the path is the code block's index in the view.
inline constexpr const char* kCopyScheme = "specchat-copy";

struct MarkdownReply {
  QString markdown;         // the reply with a label line above each fenced code block
  QStringList code_blocks;  // [n] exact code of each fenced block (no fences, no final newline)
  QStringList languages;    // [n] the fence's info word ("" when none)
};

// Finds the fenced code blocks of `text` (``` or ~~~, up to three spaces of indent; an unclosed
// fence runs to the end, as in CommonMark §4.5) and adds the label line above each; Copy links
// are numbered from `first_index`. Never throws; text without fences comes back unchanged.
MarkdownReply prepare_markdown(const QString& text, int first_index);

// Inserts `md` at `cursor` as Markdown and sets the code blocks in the fixed-pitch font with a
// faint background. Returns the document position where the rendered text ends.
int insert_markdown(QTextCursor& cursor, const MarkdownReply& md, const QColor& code_background);

// Lays the token pieces over the rendered text in [from, to) of `doc`: each matched character
// gets the StepProperty / DraftedProperty user properties and the "step N · drafted|target"
// tooltip, and drafted ones the `tint` background when `show_tint`. `step_property` and
// `drafted_property` are ChatView's TokenProperty values.
void annotate_pieces(QTextDocument* doc, int from, int to, const QList<TokenPiece>& pieces, const QColor& tint,
                     bool show_tint, int step_property, int drafted_property);

}  // namespace specchat::ui
