// ChatSession on the trained demo model: the KV cache is kept between turns (a new turn prefills
// only its own tokens; regenerate and edit roll back to where the conversation changed), and every
// reply is the reply the same conversation gets when re-prefilled from scratch (greedy), in both
// compute types; the context window is kept by leaving out the oldest turns; several sessions share
// one engine.
#include <QtTest>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/greedy_sampling.h"
#include "test_support.h"
#include "zipmoe/chat_session.h"
#include "zipmoe/engine.h"
#include "zipmoe/base/error.h"

using namespace zipmoe;
using zipmoe::testing::greedy;

namespace {

// The reply a fresh session (nothing cached) gives to this conversation.
std::string fromScratch(Engine& engine, const std::string& system, const std::vector<ChatMessage>& messages, int tokens) {
  ChatSession fresh(engine);
  fresh.setSystemPrompt(system);
  fresh.setMessages(messages);
  const GenerationStats t = fresh.reply(greedy(tokens), {});
  if (t.reusedTokens != 0) qFatal("a fresh session reused %d tokens", t.reusedTokens);
  return t.text;
}

}  // namespace

class TestChatSession : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    if (!std::filesystem::exists(zipmoe::testing::demoModelDir() / "config.json")) QSKIP("resources/demo-model is absent");
  }

  void turnsReuseTheCacheAndMatchAFreshPrefill_data() {
    QTest::addColumn<int>("dtype");
    QTest::newRow("fp32") << static_cast<int>(ComputeDtype::Float32);
    QTest::newRow("bf16") << static_cast<int>(ComputeDtype::BFloat16);
  }
  void turnsReuseTheCacheAndMatchAFreshPrefill() {
    QFETCH(int, dtype);
    EngineOptions o;
    o.model.dtype = static_cast<ComputeDtype>(dtype);
    auto engine = Engine::open(zipmoe::testing::demoModelDir(), o);
    ChatSession chat(*engine);
    chat.setSystemPrompt("You are a herald of Verona.");
    const char* turns[] = {"ROMEO: what news from Mantua?", "And of my lady?", "Then I defy you, stars!"};
    size_t cachedBefore = 0;
    for (int i = 0; i < 3; ++i) {
      const std::vector<ChatMessage> before = chat.messages();
      const GenerationStats t = chat.send(turns[i], greedy(20), {});
      QCOMPARE(t.promptTokens, t.reusedTokens + t.prefilledTokens);
      QCOMPARE(t.droppedMessages, 0);
      if (i == 0) {
        QCOMPARE(t.reusedTokens, 0);
      } else {
        // Everything the last turn left in the cache is reused; what is prefilled is the new turn
        // (its text and the template's framing) and the last reply's final token, never fed back.
        QCOMPARE(static_cast<size_t>(t.reusedTokens), cachedBefore);
        QVERIFY2(t.prefilledTokens < 24, qPrintable(QString("turn %1 prefilled %2 tokens").arg(i + 1).arg(t.prefilledTokens)));
      }
      std::vector<ChatMessage> asked = before;
      asked.push_back({"user", turns[i]});
      QCOMPARE(t.text, fromScratch(*engine, chat.systemPrompt(), asked, 20));
      QCOMPARE(chat.messages().back().content, t.text);
      // The whole turn stays cached: its prompt and every reply token but the last, never fed back.
      cachedBefore = static_cast<size_t>(t.promptTokens + t.generatedTokens - 1);
    }

    // Regenerate: the last reply goes; the rest of the cache is reused and the reply is the same.
    const std::string last = chat.messages().back().content;
    chat.truncate(chat.messages().size() - 1);
    const GenerationStats again = chat.reply(greedy(20), {});
    QCOMPARE(again.text, last);
    QCOMPARE(again.reusedTokens, again.promptTokens - 1);  // the whole prompt but its last token

    // Edit the second question: the cache is rolled back to where it changed.
    std::vector<ChatMessage> edited(chat.messages().begin(), chat.messages().begin() + 2);
    edited.push_back({"user", "And of Juliet?"});
    chat.setMessages(edited);
    const GenerationStats edit = chat.reply(greedy(20), {});
    QVERIFY(edit.reusedTokens > 0);
    QVERIFY(edit.prefilledTokens < edit.promptTokens);
    QCOMPARE(edit.text, fromScratch(*engine, chat.systemPrompt(), edited, 20));
  }

  // A conversation longer than the context (the demo holds 256 tokens) leaves out its oldest turns,
  // says how many, and replies as a fresh session given the same turns does.
  void theOldestTurnsMakeRoomInTheContextWindow() {
    EngineOptions o;
    o.model.dtype = ComputeDtype::Float32;
    auto engine = Engine::open(zipmoe::testing::demoModelDir(), o);
    ChatSession chat(*engine);
    std::string long_;
    for (int i = 0; i < 4; ++i) long_ += "Now is the winter of our discontent made glorious summer. ";
    GenerationStats t;
    for (int i = 0; i < 4 && t.droppedMessages == 0; ++i) t = chat.send(long_ + std::to_string(i), greedy(40), {});
    QVERIFY(t.droppedMessages > 0);
    QVERIFY(t.promptTokens + 40 <= engine->model().config().maxPositionEmbeddings);
    std::vector<ChatMessage> shown(chat.messages().begin() + t.droppedMessages, chat.messages().end() - 1);
    QCOMPARE(t.text, fromScratch(*engine, "", shown, 40));
    ZIPMOE_EXPECT_ERROR(chat.send(std::string(4000, 'x'), greedy(8), {}), "too long for this model");
    QCOMPARE(chat.messages().back().role, std::string("assistant"));  // the refused message is not kept
  }

  // The stop and pause flags reach the engine's core: a reply held from its first visible text on
  // generates nothing more until it is stopped, and then ends as "stopped" with that text, the
  // start of what the lone run gives; a callback that refuses stops it the same way.
  void stopAndPauseReachTheCore() {
    auto engine = Engine::open(zipmoe::testing::demoModelDir(), EngineOptions{});
    const std::string question = "ROMEO: what news from Mantua?";
    ChatSession lone(*engine);
    const GenerationStats full = lone.send(question, greedy(40), {});
    QVERIFY(full.generatedTokens > 4);

    ChatSession held(*engine);
    std::atomic<bool> stop{false}, pause{true};
    int pieces = 0;
    const GenerationStats s = held.send(question, greedy(40), [&](std::string_view) {
      ++pieces;
      stop = true;  // while the core holds the reply: nothing more is generated before the stop lands
      return true;
    }, &stop, &pause);
    QCOMPARE(s.stopReason, StopReason::Stopped);
    QCOMPARE(pieces, 1);
    QVERIFY(s.generatedTokens < full.generatedTokens);
    QVERIFY(!s.text.empty());
    QCOMPARE(s.text, full.text.substr(0, s.text.size()));
    QCOMPARE(std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + s.generatedTokens), s.tokens);
    QCOMPARE(held.messages().back().content, s.text);  // a stopped reply is kept

    ChatSession refusing(*engine);
    const GenerationStats r = refusing.send(question, greedy(40), [](std::string_view) { return false; });
    QCOMPARE(r.stopReason, StopReason::Stopped);
    QCOMPARE(r.text, full.text.substr(0, r.text.size()));
    QVERIFY(r.text.size() < full.text.size());
  }

  // Sessions on one engine keep their own caches: interleaved, each replies as it would alone.
  void sessionsShareAnEngine() {
    auto engine = Engine::open(zipmoe::testing::demoModelDir(), EngineOptions{});
    ChatSession a(*engine), b(*engine);
    const std::string a1 = a.send("JULIET: O Romeo", greedy(12), {}).text;
    const std::string b1 = b.send("KING RICHARD: my kingdom", greedy(12), {}).text;
    const GenerationStats a2 = a.send("Wherefore?", greedy(12), {});
    QVERIFY(a2.reusedTokens > 0);
    ChatSession alone(*engine);
    QCOMPARE(alone.send("JULIET: O Romeo", greedy(12), {}).text, a1);
    QCOMPARE(alone.send("Wherefore?", greedy(12), {}).text, a2.text);
    QVERIFY(!b1.empty());
    ZIPMOE_EXPECT_ERROR(ChatSession(*engine).reply(greedy(4), {}), "must end with the user's message");
  }
};

QTEST_APPLESS_MAIN(TestChatSession)
#include "test_chat_session.moc"
