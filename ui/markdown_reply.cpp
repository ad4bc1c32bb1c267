#include "ui/markdown_reply.h"

#include <QFontDatabase>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>

namespace specchat::ui {

namespace {

// A fence line: up to three spaces, then at least three ` or ~. Sets the fence's character and
// length and the info word after it.
bool fence_of(const QString& line, QChar* ch, int* len, QString* info) {
  int i = 0;
  while (i < line.size() && i < 4 && line[i] == QLatin1Char(' ')) ++i;
  if (i > 3 || i >= line.size()) return false;
  const QChar c = line[i];
  if (c != QLatin1Char('`') && c != QLatin1Char('~')) return false;
  int n = 0;
  while (i + n < line.size() && line[i + n] == c) ++n;
  if (n < 3) return false;
  *ch = c;
  *len = n;
  *info = line.mid(i + n).trimmed().section(QLatin1Char(' '), 0, 0);
  return true;
}

}  // namespace

MarkdownReply prepare_markdown(const QString& text, int first_index) {
  MarkdownReply out;
  const QStringList lines = text.split(QLatin1Char('\n'));
  QStringList md;
  QStringList code;
  bool in_code = false;
  QChar open_ch;
  int open_len = 0;
  for (const QString& line : lines) {
    QChar ch;
    int len = 0;
    QString info;
    const bool fence = fence_of(line, &ch, &len, &info);
    if (!in_code && fence) {
      const int index = first_index + static_cast<int>(out.code_blocks.size());
      const QString label = info.isEmpty() ? QStringLiteral("code") : info;
      // A paragraph of its own above the block: "*python* · [Copy](specchat-copy:3)".
      md << QString() << QStringLiteral("*%1* \u00b7 [Copy](%2:%3)").arg(label, QLatin1String(kCopyScheme)).arg(index)
         << QString();
      out.languages << info;
      in_code = true;
      open_ch = ch;
      open_len = len;
      code.clear();
    } else if (in_code && fence && ch == open_ch && len >= open_len && info.isEmpty()) {
      out.code_blocks << code.join(QLatin1Char('\n'));
      in_code = false;
    } else if (in_code) {
      code << line;
    }
    md << line;
  }
  if (in_code) out.code_blocks << code.join(QLatin1Char('\n'));
  out.markdown = out.code_blocks.isEmpty() ? text : md.join(QLatin1Char('\n'));
  return out;
}

int insert_markdown(QTextCursor& cursor, const MarkdownReply& md, const QColor& code_background) {
  const int from = cursor.position();
  cursor.insertMarkdown(md.markdown, QTextDocument::MarkdownDialectGitHub);
  const int to = cursor.position();
  const QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  QTextDocument* doc = cursor.document();
  for (QTextBlock b = doc->findBlock(from); b.isValid() && b.position() < to; b = b.next()) {
    if (!b.blockFormat().hasProperty(QTextFormat::BlockCodeFence)) continue;
    QTextCursor c(b);
    c.movePosition(QTextCursor::EndOfBlock, QTextCursor::KeepAnchor);
    QTextCharFormat f;
    f.setFontFamilies({mono.family()});
    f.setFontFixedPitch(true);
    c.mergeCharFormat(f);
    QTextBlockFormat bf;
    bf.setBackground(code_background);
    c.mergeBlockFormat(bf);
  }
  return to;
}

void annotate_pieces(QTextDocument* doc, int from, int to, const QList<TokenPiece>& pieces, const QColor& tint,
                     bool show_tint, int step_property, int drafted_property) {
  // Rendered characters [from, to) as one string (paragraph breaks read as U+2029).
  QTextCursor all(doc);
  all.setPosition(from);
  all.setPosition(to, QTextCursor::KeepAnchor);
  const QString rendered = all.selectedText();
  constexpr int kLookAhead = 64;  // how far a piece character may be from the last match
  int r = 0;
  for (const TokenPiece& p : pieces) {
    QTextCharFormat f;
    f.setProperty(step_property, p.step);
    f.setProperty(drafted_property, p.drafted);
    f.setToolTip(p.drafted ? QObject::tr("step %1 \u00b7 drafted").arg(p.step) : QObject::tr("step %1 \u00b7 target").arg(p.step));
    if (p.drafted && show_tint) f.setBackground(tint);
    for (const QChar ch : p.text) {
      if (ch.isSpace()) continue;  // spacing is reflowed by the layout: nothing to match
      const int at = static_cast<int>(rendered.indexOf(ch, r));
      if (at < 0 || at - r > kLookAhead) continue;  // markup ("**", "#", "|"): not rendered
      QTextCursor c(doc);
      c.setPosition(from + at);
      c.setPosition(from + at + 1, QTextCursor::KeepAnchor);
      c.mergeCharFormat(f);
      r = at + 1;
    }
  }
}

}  // namespace specchat::ui
