// The app's file dialogs must not open the files they list: closing any descriptor of the
// SQLite database or its -wal/-shm files drops this process's POSIX locks on them, and another
// SQLite client may then delete the WAL under the app (lost commits). Regression test for a
// walkthrough finding: browsing to the database's folder in Import… made a later crash lose
// a saved message.
#include <catch2/catch.hpp>

#include <QFile>
#include <QFileDialog>
#include <QTemporaryDir>
#include <QTest>

#include <unistd.h>

#include "storage/conversation_store.h"
#include "ui/file_dialogs.h"

namespace {

// POSIX locks this process holds now (/proc/locks lines naming our pid).
int held_locks() {
  QFile f(QStringLiteral("/proc/locks"));
  if (!f.open(QIODevice::ReadOnly)) return -1;
  const QByteArray me = " " + QByteArray::number(static_cast<qint64>(getpid())) + " ";
  int n = 0;
  for (const QByteArray& line : f.readAll().split('\n')) n += line.contains(me) ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("gui: browsing the database folder in a file dialog keeps the database locks", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  specchat::ConversationStore store(dir.filePath(QStringLiteral("chat.sqlite")).toStdString());
  store.create_conversation("kept");
  REQUIRE(store.list_conversations().size() == 1);  // a read: the WAL/shm files exist and are locked
  REQUIRE(QFile::exists(dir.filePath(QStringLiteral("chat.sqlite-shm"))));
  const int before = held_locks();
  REQUIRE(before > 0);

  QFileDialog dialog(nullptr, QStringLiteral("Import conversation"), dir.path());
  specchat::ui::make_safe(dialog);
  dialog.show();
  QTest::qWait(1500);  // the listing and its icons load in the background
  dialog.hide();
  CHECK(held_locks() == before);
  CHECK(store.list_conversations().size() == 1);
}

TEST_CASE("gui: the name-only icon provider names types by suffix", "[gui][unit]") {
  specchat::ui::NameOnlyIconProvider p;
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  CHECK(p.type(QFileInfo(dir.path())) == QStringLiteral("Folder"));
  CHECK(p.type(QFileInfo(dir.filePath(QStringLiteral("chat.sqlite-wal")))) == QStringLiteral("SQLITE-WAL file"));
  CHECK(p.type(QFileInfo(dir.filePath(QStringLiteral("README")))) == QStringLiteral("File"));
}
