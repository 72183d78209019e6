// renderConversation, the context policy every door shares, on the demo model's tokenizer and chat
// template: the ids are the template's rendering (or the plain join without one); drop-oldest leaves
// out whole turns — never the system message nor the last turn — until the reply's reserve fits,
// and says how many messages it left out; error changes nothing and refuses only a conversation
// that leaves no room for one token, naming the limit.
#include <QtTest>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "test_support.h"
#include "zipmoe/text/chat_template.h"
#include "zipmoe/generation/conversation.h"
#include "zipmoe/base/error.h"
#include "zipmoe/text/tokenizer.h"

using namespace zipmoe;

namespace {

std::filesystem::path demoModel() { return std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/demo-model"; }

std::string words(int n, const std::string& word) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? " " : "") + word;
  return s;
}

}  // namespace

class TestConversation : public QObject {
  Q_OBJECT

  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<ChatTemplate> tpl_;
  std::vector<ChatMessage> chat_;  // system, then three turns (the last one a user message alone)

  std::vector<int32_t> templated(const std::vector<ChatMessage>& shown) const {
    return tok_->encode(tpl_->render(shown, true), false);
  }

 private Q_SLOTS:
  void initTestCase() {
    tok_ = Tokenizer::fromFile(demoModel() / "tokenizer.json");
    tpl_ = std::make_unique<ChatTemplate>(ChatTemplate::fromTokenizerConfig(demoModel() / "tokenizer_config.json"));
    chat_ = {{"system", "You are a herald of Verona."},
             {"user", words(20, "Mantua")},
             {"assistant", words(20, "Verona")},
             {"user", words(20, "Padua")},
             {"assistant", words(10, "Verona")},
             {"assistant", words(10, "Padua")},  // two replies in one turn: they leave together
             {"user", "And what of Juliet?"}};
  }

  void itRendersWithTheTemplateOrJoinsThePlainTexts() {
    const RenderedConversation r = renderConversation(*tok_, tpl_.get(), chat_, ContextFit{0, 10, ContextOverflow::DropOldest});
    QCOMPARE(r.ids, templated(chat_));
    QCOMPARE(r.droppedMessages, 0);
    const RenderedConversation plain = renderConversation(*tok_, nullptr, {{"user", "a"}, {"user", "b"}}, ContextFit{});
    QCOMPARE(plain.ids, tok_->encode("a\nb", true));
  }

  // Tools: a template that renders them gets them (and the calls and tool messages as transformers
  // passes them); the demo's template, which ignores them, gets the generic format's prompt.
  void toolsRenderNativelyOrInTheGenericFormat() {
    const std::vector<ToolSpec> tools = {
        {"get_weather", "Weather of a city", R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]})", false}};
    ChatMessage call("assistant", "");
    call.toolCalls = {ToolCall{"call_1", "get_weather", R"({"city":"Mantua"})"}};
    ChatMessage result("tool", "Rain.");
    result.toolCallId = "call_1";
    const std::vector<ChatMessage> conversation = {{"user", "Weather?"}, call, result};
    const ChatTemplate native(
        "{% if tools %}TOOLS:{% for t in tools %}{{ t.function.name }};{% endfor %}{% endif %}"
        "{% for m in messages %}[{{ m.role }}:{{ m.content }}{% if m.tool_calls %}{% for c in m.tool_calls %}"
        " CALL {{ c.function.name }} {{ c.function.arguments.city }}{% endfor %}{% endif %}"
        "{% if m.tool_call_id %} FOR {{ m.tool_call_id }}{% endif %}]{% endfor %}",
        "", "");
    const std::string text = tok_->decode(renderConversation(*tok_, &native, conversation, ContextFit{}, tools).ids);
    QCOMPARE(text, std::string("TOOLS:get_weather;[user:Weather?][assistant: CALL get_weather Mantua][tool:Rain. FOR call_1]"));
    // The demo's template: a system message with the tool's signature, the call and the result as text.
    const std::string generic = tok_->decode(renderConversation(*tok_, tpl_.get(), conversation, ContextFit{}, tools).ids);
    QVERIFY2(generic.find("get_weather({city: string, days?: integer}) - Weather of a city") != std::string::npos, generic.c_str());
    QVERIFY2(generic.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Mantua\"}}\n</tool_call>") !=
                 std::string::npos, generic.c_str());
    QVERIFY2(generic.find("<tool_response>\nRain.\n</tool_response>") != std::string::npos, generic.c_str());
    // Without tools or tool messages nothing changes.
    QCOMPARE(renderConversation(*tok_, tpl_.get(), chat_, ContextFit{}, {}).ids, templated(chat_));
  }

  void dropOldestLeavesOutWholeTurnsAndKeepsTheSystemMessage() {
    const int full = static_cast<int>(templated(chat_).size());
    const std::vector<ChatMessage> twoTurns = {chat_[0], chat_[3], chat_[4], chat_[5], chat_[6]};
    const std::vector<ChatMessage> lastTurn = {chat_[0], chat_[6]};
    const int withoutFirst = static_cast<int>(templated(twoTurns).size());
    const int alone = static_cast<int>(templated(lastTurn).size());
    QVERIFY(full > withoutFirst && withoutFirst > alone);

    // Fits: nothing dropped.
    RenderedConversation r = renderConversation(*tok_, tpl_.get(), chat_, ContextFit{full + 8, 8, ContextOverflow::DropOldest});
    QCOMPARE(r.droppedMessages, 0);
    // One token short: the first turn (user + assistant) goes.
    r = renderConversation(*tok_, tpl_.get(), chat_, ContextFit{full + 7, 8, ContextOverflow::DropOldest});
    QCOMPARE(r.droppedMessages, 2);
    QCOMPARE(r.ids, templated(twoTurns));
    // Less room: the second turn goes whole (its two replies with it), the last turn stays.
    r = renderConversation(*tok_, tpl_.get(), chat_, ContextFit{withoutFirst + 7, 8, ContextOverflow::DropOldest});
    QCOMPARE(r.droppedMessages, 5);
    QCOMPARE(r.ids, templated(lastTurn));
    // Never the last turn: with room for a token but not the reserve, it is kept as it is.
    r = renderConversation(*tok_, tpl_.get(), chat_, ContextFit{alone + 1, 100, ContextOverflow::DropOldest});
    QCOMPARE(r.droppedMessages, 5);
    QCOMPARE(r.ids, templated(lastTurn));
    // No room for a token even then: refused, naming both sizes.
    try {
      renderConversation(*tok_, tpl_.get(), chat_, ContextFit{alone, 8, ContextOverflow::DropOldest});
      QFAIL("expected ContextOverflowError");
    } catch (const ContextOverflowError& e) {
      QCOMPARE(e.promptTokens(), alone);
      QCOMPARE(e.context(), alone);
      const std::string m = e.what();
      QVERIFY2(m.find("too long for this model") != std::string::npos &&
                   m.find("context holds " + std::to_string(alone) + " tokens") != std::string::npos &&
                   m.find("oldest turns left out") != std::string::npos,
               m.c_str());
    }
  }

  void withoutASystemMessageTheFirstTurnGoesFirst() {
    const std::vector<ChatMessage> noSystem(chat_.begin() + 1, chat_.end());
    const int full = static_cast<int>(templated(noSystem).size());
    const RenderedConversation r =
        renderConversation(*tok_, tpl_.get(), noSystem, ContextFit{full + 3, 4, ContextOverflow::DropOldest});
    QCOMPARE(r.droppedMessages, 2);
    QCOMPARE(r.ids, templated(std::vector<ChatMessage>(noSystem.begin() + 2, noSystem.end())));
  }

  void errorChangesNothingAndRefusesOnlyWhatCannotFit() {
    const int full = static_cast<int>(templated(chat_).size());
    // Short of the reserve but with room for a token: rendered whole (the reply's limit shrinks).
    const RenderedConversation r = renderConversation(*tok_, tpl_.get(), chat_, ContextFit{full + 1, 100, ContextOverflow::Error});
    QCOMPARE(r.droppedMessages, 0);
    QCOMPARE(r.ids, templated(chat_));
    ZIPMOE_EXPECT_ERROR(renderConversation(*tok_, tpl_.get(), chat_, ContextFit{full, 1, ContextOverflow::Error}),
                        "too long for this model", std::to_string(full) + " tokens",
                        "context holds " + std::to_string(full) + " tokens", "'error'");
  }

  void theReserveIsHalfTheWindowAtMost() {
    QCOMPARE(replyReserve(256, 256), 128);
    QCOMPARE(replyReserve(40, 256), 40);
    QCOMPARE(replyReserve(4000, 0), 4000);
    ZIPMOE_EXPECT_ERROR(renderConversation(*tok_, tpl_.get(), {}, ContextFit{}), "no messages");
  }
};

QTEST_APPLESS_MAIN(TestConversation)
#include "test_conversation.moc"
