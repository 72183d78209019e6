// The app's list models under QAbstractItemModelTester (which checks every signal and index the
// views rely on), the markdown line-break rule, and the per-chat sampling settings' JSON, including
// stored settings that are broken or out of range.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QtTest>

#include "chat_list_model.h"
#include "chat_types.h"
#include "message_model.h"

using namespace zipmoe::app;

namespace {
MessageRow row(qint64 id, int position, const QString& role, const QString& content) {
  MessageRow r;
  r.id = id;
  r.position = position;
  r.role = role;
  r.content = content;
  r.state = QStringLiteral("complete");
  return r;
}
}  // namespace

class TestChatModels : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void messageModelStreamsIntoOneRow() {
    MessageModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.reset({row(1, 0, "user", "Hello"), row(2, 1, "assistant", "")});
    QCOMPARE(model.count(), 2);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.appendText(2, QStringLiteral("Good "));
    model.appendText(2, QStringLiteral("morrow"));
    model.appendText(99, QStringLiteral("nobody"));  // an id not shown: nothing happens
    QCOMPARE(changed.count(), 2);
    QCOMPARE(changed.at(0).at(0).toModelIndex().row(), 1);
    QCOMPARE(model.data(model.index(1), MessageModel::ContentRole).toString(), QStringLiteral("Good morrow"));
    QCOMPARE(model.data(model.index(0), MessageModel::ContentRole).toString(), QStringLiteral("Hello"));

    MessageRow finished = model.rows()[1];
    finished.ttftMs = 42;
    finished.state = QStringLiteral("complete");
    model.update(finished);
    QCOMPARE(model.data(model.index(1), MessageModel::TtftRole).toDouble(), 42.0);

    model.append(row(3, 2, "user", "Again"));
    model.append(row(4, 3, "assistant", "Aye"));
    model.removeFrom(2);
    QCOMPARE(model.count(), 2);
    model.removeFrom(7);  // past the end: nothing
    QCOMPARE(model.count(), 2);
    QVERIFY(model.roleNames().values().contains("markdown"));
    QVERIFY(!model.roleNames().values().contains("state"));  // would shadow Item.state in a delegate
  }

  void chatListModel() {
    ChatListModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.reset({{5, "Verona", {}}, {3, "Mantua", {}}});
    QCOMPARE(model.indexOf(3), 1);
    QCOMPARE(model.indexOf(4), -1);
    QCOMPARE(model.data(model.index(0), ChatListModel::TitleRole).toString(), QStringLiteral("Verona"));
    model.reset({});
    QCOMPARE(model.count(), 0);
  }

  void markdownKeepsLineBreaksOutsideCode() {
    QCOMPARE(withHardLineBreaks("ROMEO:\nBut soft!\n\nJULIET:\nAy me."), QStringLiteral("ROMEO:  \nBut soft!\n\nJULIET:  \nAy me."));
    const QString code = QStringLiteral("Run:\n```sh\nmake\nmake test\n```\nDone.");
    QCOMPARE(withHardLineBreaks(code), QStringLiteral("Run:  \n```sh\nmake\nmake test\n```  \nDone."));
    QCOMPARE(withHardLineBreaks(QString()), QString());
    QCOMPARE(withHardLineBreaks("one line"), QStringLiteral("one line"));
  }

  // Model output shown as markdown never loads anything: images become links, HTML tags text;
  // code keeps every character.
  void markdownOfModelOutputLoadsNothing() {
    QCOMPARE(withoutRemoteContent("See ![the logo](http://example.com/x.png) here"),
             QStringLiteral("See [the logo](http://example.com/x.png) here"));
    QCOMPARE(withoutRemoteContent("![a [nested] one][ref]\n\n[ref]: http://example.com/y.png"),
             QStringLiteral("[a [nested] one][ref]\n\n[ref]: http://example.com/y.png"));
    QCOMPARE(withoutRemoteContent("<img src=\"http://example.com/z.png\"> and <a href=x>y</a>"),
             QStringLiteral("&lt;img src=\"http://example.com/z.png\"> and &lt;a href=x>y&lt;/a>"));
    QCOMPARE(withoutRemoteContent("Hello! [not an image] 3 < 4, 5 > 2, \\![escaped](u)"),
             QStringLiteral("Hello! [not an image] 3 < 4, 5 > 2, \\![escaped](u)"));
    QCOMPARE(withoutRemoteContent("`![code](x)` and ``a ` <b>`` then ![i](u)"),
             QStringLiteral("`![code](x)` and ``a ` <b>`` then [i](u)"));
    const QString fenced = QStringLiteral("```html\n<img src=\"x\">\n![a](b)\n```\n![c](d)");
    QCOMPARE(withoutRemoteContent(fenced), QStringLiteral("```html\n<img src=\"x\">\n![a](b)\n```\n[c](d)"));
    QCOMPARE(withoutRemoteContent("unclosed ` tick <i>"), QStringLiteral("unclosed ` tick &lt;i>"));
  }

  void samplingSettingsRoundTrip() {
    SamplingSettings s;
    s.temperature = 0.35;
    s.topK = 7;
    s.topP = 0.9;
    s.minP = 0.05;
    s.repetitionPenalty = 1.2;
    s.maxTokens = 77;
    s.seed = 18446744073709551557ull;  // above 2^53: kept exactly (stored as text)
    QString problem;
    const SamplingSettings back = SamplingSettings::fromJson(s.toJson(), &problem);
    QCOMPARE(problem, QString());
    QCOMPARE(back.temperature, 0.35);
    QCOMPARE(back.topK, 7);
    QCOMPARE(back.topP, 0.9);
    QCOMPARE(back.minP, 0.05);
    QCOMPARE(back.repetitionPenalty, 1.2);
    QCOMPARE(back.maxTokens, 77);
    QCOMPARE(back.seed, s.seed);
  }

  void brokenSamplingSettingsFallBackAndSayWhy() {
    QString problem;
    SamplingSettings s = SamplingSettings::fromJson(QStringLiteral("{\"temperature\": 9, \"topK\": \"many\", \"maxTokens\": 12}"), &problem);
    QCOMPARE(s.temperature, SamplingSettings{}.temperature);
    QCOMPARE(s.topK, SamplingSettings{}.topK);
    QCOMPARE(s.maxTokens, 12);  // the valid field is kept
    QVERIFY2(problem.contains(QStringLiteral("temperature = 9")), qPrintable(problem));
    QVERIFY2(problem.contains(QStringLiteral("topK")), qPrintable(problem));
    s = SamplingSettings::fromJson(QStringLiteral("not json"), &problem);
    QVERIFY(problem.contains(QStringLiteral("not a JSON object")));
    QCOMPARE(s.maxTokens, SamplingSettings{}.maxTokens);
    s = SamplingSettings::fromJson(QStringLiteral("{\"seed\": \"12x\"}"), &problem);
    QVERIFY(problem.contains(QStringLiteral("seed")));
  }
};

QTEST_MAIN(TestChatModels)
#include "test_chat_models.moc"
