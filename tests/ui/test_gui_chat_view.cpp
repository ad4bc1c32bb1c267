// Issue 12 in the chat view: following the bottom while the user is there and a "Jump to
// latest" button otherwise (bug 3), finish reasons and failed writes shown on their message
// (bugs 6 and 1), and the search highlight (bug 7).
#include <catch2/catch.hpp>

#include <QApplication>
#include <QClipboard>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QTest>
#include <QToolButton>

#include "tests/ui/gui_test_util.h"
#include "ui/chat_model.h"
#include "ui/chat_view.h"

using namespace specchat::ui;
using specchat::test::wait_until;

namespace {

ChatItem item(const char* role, const QString& text) {
  ChatItem it;
  it.role = QString::fromLatin1(role);
  it.text = text;
  return it;
}

QString paragraph(int i) {
  return QStringLiteral("message %1: ").arg(i) + QStringLiteral("words that wrap over a few lines of the view. ").repeated(6);
}

}  // namespace

TEST_CASE("gui chat view: new messages and the streaming reply stay in view at the bottom", "[gui][unit]") {
  ChatModel m;
  ChatView v;
  v.resize(420, 240);
  v.setModel(&m);
  v.show();
  REQUIRE(QTest::qWaitForWindowExposed(&v));
  QScrollBar* bar = v.verticalScrollBar();
  auto at_bottom = [&] { return bar->maximum() > 0 && bar->value() == bar->maximum(); };
  for (int i = 0; i < 30; ++i) m.append(item(i % 2 ? "assistant" : "user", paragraph(i)));
  REQUIRE(wait_until(at_bottom, 2000));

  // A new user message and its streaming reply, as the controller adds them.
  m.append(item("user", QStringLiteral("the newest question")));
  ChatItem reply = item("assistant", QString());
  reply.streaming = true;
  const int row = m.append(reply);
  for (int t = 0; t < 200; ++t) m.appendToken(row, QStringLiteral(" token%1").arg(t), t % 3 == 0, t / 3);
  QTest::qWait(20);
  CHECK(wait_until(at_bottom, 2000));
  CHECK(v.followsBottom());
  auto* jump = v.findChild<QToolButton*>(QStringLiteral("jumpToLatestButton"));
  REQUIRE(jump != nullptr);
  CHECK_FALSE(jump->isVisible());

  // The user scrolls up to read: new text no longer moves the view, a jump button appears.
  bar->setValue(bar->maximum() / 3);
  const int held = bar->value();
  CHECK_FALSE(v.followsBottom());
  for (int t = 0; t < 100; ++t) m.appendToken(row, QStringLiteral(" more%1").arg(t), false, 100 + t);
  m.append(item("user", QStringLiteral("yet another message")));
  QTest::qWait(20);
  CHECK(bar->value() == held);
  CHECK(jump->isVisible());
  QTest::mouseClick(jump, Qt::LeftButton);
  CHECK(wait_until(at_bottom, 2000));
  CHECK(v.followsBottom());
  CHECK_FALSE(jump->isVisible());
  // Following again: the next tokens keep the end in view.
  for (int t = 0; t < 100; ++t) m.appendToken(row, QStringLiteral(" last%1").arg(t), false, 200 + t);
  CHECK(wait_until(at_bottom, 2000));
}

TEST_CASE("gui chat view: every finish reason is shown under its reply, a failed write on its message", "[gui][unit]") {
  ChatModel m;
  ChatView v;
  v.setModel(&m);
  const std::pair<const char*, const char*> reasons[] = {
      {"length", "max tokens per reply reached"}, {"context_full", "context window is full"}, {"stop", "stop string"},
      {"cancelled", "stopped by you"}};
  for (const auto& [finish, words] : reasons) {
    ChatItem r = item("assistant", QStringLiteral("reply"));
    r.finish = QString::fromLatin1(finish);
    const int row = m.append(r);
    INFO(finish);
    // The reason ends the reply's note; a reply that stopped short offers Continue after it.
    const bool continues = r.finish == QLatin1String("length") || r.finish == QLatin1String("cancelled");
    CHECK(v.toPlainText().endsWith(QString::fromLatin1(words) + (continues ? QStringLiteral(" \u00b7 Continue") : QString())));
    CHECK(finish_reason_text(r.finish).contains(QString::fromLatin1(words)));
    m.removeAt(row);
  }
  ChatItem eos = item("assistant", QStringLiteral("a complete answer"));
  eos.finish = QStringLiteral("eos");
  m.append(eos);
  CHECK(v.toPlainText().endsWith(QStringLiteral("a complete answer")));  // a normal end needs no note
  const int user = m.append(item("user", QStringLiteral("typed")));
  m.setSaveError(user, QStringLiteral("disk full"));
  CHECK(v.toPlainText().endsWith(QStringLiteral("typed\n\u26a0 Not saved: disk full")));
}

TEST_CASE("gui chat view: the search text is highlighted wherever it occurs", "[gui][unit]") {
  ChatModel m;
  ChatView v;
  v.setModel(&m);
  m.append(item("user", QStringLiteral("pack the Tent and the stove")));
  m.append(item("assistant", QStringLiteral("a tent, a stove, another tent")));
  v.setHighlight(QStringLiteral("tent"));
  CHECK(v.highlightCount() == 3);
  // Rows added later are searched too; clearing removes every mark.
  m.append(item("user", QStringLiteral("which tent?")));
  CHECK(v.highlightCount() == 4);
  v.setHighlight(QString());
  CHECK(v.highlightCount() == 0);
}

TEST_CASE("gui chat view: a finished reply renders as Markdown, Copy puts a code block's exact code on the clipboard", "[gui][unit]") {
  ChatModel m;
  ChatView v;
  v.setModel(&m);
  const QString code = QStringLiteral("def add(a, b):\n    return a + b  # *not* emphasis\n\nprint(add(1, 2))");
  ChatItem r = item("assistant", QStringLiteral("# Result\n\nSome **bold** text and a list:\n\n- one\n- two\n\n```python\n") +
                                     code + QStringLiteral("\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"));
  const int row = m.append(r);
  const QString plain = v.toPlainText();
  INFO(plain.toStdString());
  CHECK_FALSE(plain.contains(QStringLiteral("**")));  // emphasis rendered, not shown as markup
  CHECK_FALSE(plain.contains(QStringLiteral("# Result")));
  CHECK(plain.contains(QStringLiteral("Some bold text")));
  CHECK(plain.contains(QStringLiteral("python \u00b7 Copy")));  // the language label and the Copy link
  CHECK(plain.contains(QStringLiteral("    return a + b  # *not* emphasis")));  // code stays verbatim
  // The heading is larger, the bold is bold, the code is fixed-pitch.
  QTextDocument* doc = v.document();
  QTextCursor bold = doc->find(QStringLiteral("bold"));
  CHECK(bold.charFormat().fontWeight() == QFont::Bold);
  QTextCursor code_at = doc->find(QStringLiteral("return a + b"));
  REQUIRE_FALSE(code_at.isNull());
  CHECK(code_at.charFormat().fontFixedPitch());
  CHECK(code_at.block().blockFormat().hasProperty(QTextFormat::BlockCodeFence));
  CHECK(doc->find(QStringLiteral("|---|")).isNull());  // the table is a table, not pipes

  // The Copy link: its anchor, clicked, copies the code exactly (no fences, no label).
  REQUIRE(v.codeBlockCount() == 1);
  CHECK(v.codeBlock(0) == code);
  QTextCursor link = doc->find(QStringLiteral("Copy"));
  REQUIRE_FALSE(link.isNull());
  const QString href = link.charFormat().anchorHref();
  CHECK(href == QStringLiteral("specchat-copy:0"));
  QApplication::clipboard()->clear();
  Q_EMIT v.anchorClicked(QUrl(href));
  CHECK(QApplication::clipboard()->text() == code);
  (void)row;
}

TEST_CASE("gui chat view: the draft tint still marks the tokens of a rendered reply", "[gui][unit]") {
  ChatModel m;
  ChatView v;
  v.setModel(&m);
  ChatItem r = item("assistant", QString());
  r.streaming = true;
  const int row = m.append(r);
  m.appendToken(row, QStringLiteral("**Bold"), true, 0);
  m.appendToken(row, QStringLiteral("** plain"), false, 0);
  specchat::MessageStats st;
  st.mode = "speculative";
  m.finishReply(row, QStringLiteral("**Bold** plain"), st, QStringLiteral("eos"));
  QTextDocument* doc = v.document();
  QTextCursor bold = doc->find(QStringLiteral("Bold"));
  REQUIRE_FALSE(bold.isNull());
  QTextCursor one(doc);
  one.setPosition(bold.selectionStart() + 1);
  CHECK(one.charFormat().fontWeight() == QFont::Bold);
  CHECK(one.charFormat().background().color() == v.draftBackground());
  CHECK(v.tokenToolTipAt(bold.selectionStart()) == QStringLiteral("step 0 \u00b7 drafted"));
  QTextCursor plain = doc->find(QStringLiteral("plain"));
  CHECK(v.tokenToolTipAt(plain.selectionStart()) == QStringLiteral("step 0 \u00b7 target"));
  QTextCursor at_plain(doc);
  at_plain.setPosition(plain.selectionStart() + 1);
  CHECK(at_plain.charFormat().background().style() == Qt::NoBrush);
}

TEST_CASE("gui chat view: ‹ i/n › on any row with alternatives, its links name the row", "[gui][unit]") {
  ChatModel m;
  ChatView v;
  v.setModel(&m);
  m.append(item("user", QStringLiteral("question")));
  m.append(item("assistant", QStringLiteral("answer")));
  m.append(item("user", QStringLiteral("follow-up")));
  m.setAlternatives(0, 1, 2);  // an edited question
  m.setAlternatives(1, 0, 3);  // a regenerated reply
  const QString plain = v.toPlainText();
  CHECK(plain.count(QStringLiteral("\u2039 2/2 \u203a")) == 1);
  CHECK(plain.count(QStringLiteral("\u2039 1/3 \u203a")) == 1);
  QList<QPair<int, int>> clicked;
  QObject::connect(&v, &ChatView::alternativeRequested, [&](int row, int delta) { clicked.append({row, delta}); });
  QTextDocument* doc = v.document();
  for (const QString& arrow : {QStringLiteral("\u2039"), QStringLiteral("\u203a")}) {
    for (QTextCursor at = doc->find(arrow); !at.isNull(); at = doc->find(arrow, at))
      Q_EMIT v.anchorClicked(QUrl(at.charFormat().anchorHref()));
  }
  CHECK(clicked == QList<QPair<int, int>>({{0, -1}, {1, -1}, {0, 1}, {1, 1}}));
  Q_EMIT v.anchorClicked(QUrl(QStringLiteral("specchat-alt:x,1")));  // malformed: ignored
  Q_EMIT v.anchorClicked(QUrl(QStringLiteral("specchat-alt:1")));
  CHECK(clicked.size() == 4);
}
