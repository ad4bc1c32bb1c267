// The app's remote engine (issue 14 §7, Settings › Engine): replies come from an
// OpenAI-compatible server instead of the local engine. Here the server is `specchat-cli serve`
// on loopback with the bundled models, so a greedy reply must be the local engine's, token for
// token (compared as text: a server returns no ids). A server that cannot be reached gives an
// inline error naming it, and switching back to the local engine works again.
#include <catch2/catch.hpp>

#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include "test_paths.h"
#include "tests/ui/gui_test_util.h"
#include "ui/chat_controller.h"
#include "ui/engine_worker.h"

using namespace specchat::ui;
using specchat::test::wait_until;

namespace {

constexpr int kReplyTimeoutMs = 60000;

// `specchat-cli serve --port 0` (the kernel picks a free port; the start-up line names it).
struct Server {
  QProcess proc;
  int port = 0;
  QString log;
  Server() {
    proc.setProgram(QStringLiteral(SPECCHAT_CLI_PATH));
    proc.setArguments({QStringLiteral("serve"), QStringLiteral("--port"), QStringLiteral("0")});
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove(QStringLiteral("SPECCHAT_API_KEY"));
    proc.setProcessEnvironment(env);
    proc.start();
    const QRegularExpression re(QStringLiteral("listening on http://[^ ]+:(\\d+)"));
    wait_until(
        [&] {
          log += QString::fromUtf8(proc.readAllStandardError());
          const auto m = re.match(log);
          if (m.hasMatch()) port = m.captured(1).toInt();
          return port > 0 || proc.state() == QProcess::NotRunning;
        },
        120000);
  }
  ~Server() {
    proc.terminate();
    if (!proc.waitForFinished(10000)) proc.kill();
  }
  QString url() const { return QStringLiteral("http://127.0.0.1:%1/v1").arg(port); }
};

}  // namespace

TEST_CASE("gui remote engine: replies from an OpenAI-compatible server equal the local engine's (greedy)", "[gui][model]") {
  REQUIRE(QFileInfo::exists(QString::fromStdString(specchat::test::target_model())));
  Server server;
  INFO(server.log.toStdString());
  REQUIRE(server.port > 0);

  QTemporaryDir dir;
  EngineHost engine;
  engine.loadModels(QString::fromStdString(specchat::test::target_model()),
                    QString::fromStdString(specchat::test::draft_model()));
  ChatController c(engine.worker(), dir.filePath(QStringLiteral("chat.sqlite")));
  GenerationSettings s;
  s.max_tokens = 24;
  s.sampling.temperature = 0;
  c.setSettings(s);
  auto idle = [&] { return wait_until([&] { return !c.isBusy(); }, kReplyTimeoutMs); };

  c.send(QStringLiteral("Tell me a story about a kind dragon."));
  REQUIRE(idle());
  REQUIRE(c.model()->rowCount() == 2);
  const QString local = c.model()->item(1).text;
  REQUIRE_FALSE(local.isEmpty());

  RemoteEngine r;
  r.url = server.url();
  c.setRemote(r);
  CHECK(c.statusText().contains(server.url()));
  c.regenerate();  // the same conversation, now through the server
  REQUIRE(idle());
  REQUIRE(c.model()->rowCount() == 2);
  const ChatItem remote = c.model()->item(1);
  CHECK(remote.role == QStringLiteral("assistant"));
  CHECK(remote.text == local);
  CHECK(remote.token_ids.empty());  // a server sends text, not ids: the next context uses the text
  CHECK(remote.has_stats);

  // A server cannot resume a reply: Continue explains that instead of starting a wrong reply.
  GenerationSettings short_reply = s;
  short_reply.max_tokens = 4;
  c.setSettings(short_reply);
  c.regenerate();
  REQUIRE(idle());
  REQUIRE(c.model()->item(1).finish == QStringLiteral("length"));
  CHECK_FALSE(c.model()->item(1).text.isEmpty());  // kept although a server sends no ids
  c.continueReply();
  CHECK_FALSE(c.isBusy());
  CHECK(c.statusIsError());
  CHECK(c.statusText().contains(QStringLiteral("Continue")));
  c.setSettings(s);

  // A follow-up turn through the server (its context carries the earlier reply as text).
  c.send(QStringLiteral("What did the dragon do next?"));
  REQUIRE(idle());
  REQUIRE(c.model()->rowCount() == 4);
  CHECK(c.model()->item(3).role == QStringLiteral("assistant"));
  CHECK_FALSE(c.model()->item(3).text.isEmpty());

  // Nothing listens there: an inline error that names the server, no crash.
  r.url = QStringLiteral("http://127.0.0.1:1/v1");
  c.setRemote(r);
  c.send(QStringLiteral("Hello?"));
  REQUIRE(idle());
  const int last = c.model()->rowCount() - 1;
  CHECK(c.model()->item(last).role == QStringLiteral("error"));
  CHECK(c.model()->item(last).text.contains(QStringLiteral("127.0.0.1:1")));

  // Back to the local engine.
  c.setRemote(RemoteEngine{});
  c.regenerate();
  REQUIRE(idle());
  CHECK(c.model()->item(c.model()->rowCount() - 1).role == QStringLiteral("assistant"));
}
