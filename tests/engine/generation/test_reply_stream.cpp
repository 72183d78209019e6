// ReplyStream, the stop rules every door shares, on the demo model's real byte-level BPE tokenizer,
// fed rows of logits that make each next token certain: the text streamed is the decoded reply, the
// EOS token's text never appears, a stop string is held back while it may still be forming and cut
// when it is complete, and each limit ends the reply with its own StopReason (checked in the
// documented order) with the held-back text flushed.
#include <QtTest>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "generation/reply_stream.h"
#include "test_support.h"
#include "zipmoe/generation/conversation.h"
#include "zipmoe/base/error.h"
#include "zipmoe/text/tokenizer.h"

using namespace zipmoe;

namespace {

std::filesystem::path demoModel() { return std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/demo-model"; }

constexpr int32_t kEos = 1023;  // the demo's <|endoftext|>

// A row of logits whose argmax is `id`.
std::vector<float> certain(int32_t id, int32_t vocab) {
  std::vector<float> row(static_cast<size_t>(vocab), 0.0F);
  row[static_cast<size_t>(id)] = 10.0F;
  return row;
}

SamplingParams greedy(int maxTokens, std::vector<std::string> stops = {}) {
  SamplingParams p;
  p.temperature = 0;
  p.maxTokens = maxTokens;
  p.stopStrings = std::move(stops);
  return p;
}

struct Run {
  std::string text;
  std::vector<std::string> pieces;
  StopReason end = StopReason::None;
  int tokens = 0;
};

// Feeds `ids` one by one (then EOS forever) until the stream ends; `stopAt`: the token index at
// which the caller asks it to stop.
Run feed(ReplyStream& s, const std::vector<int32_t>& ids, int32_t vocab, int stopAt = -1) {
  Run r;
  for (size_t i = 0; !s.ended(); ++i) {
    const int32_t id = i < ids.size() ? ids[i] : kEos;
    const ReplyStream::Token t = s.next(certain(id, vocab), static_cast<int>(i) == stopAt);
    if (t.id != id) qFatal("sampled %d, expected %d", t.id, id);
    r.text += t.text;
    r.pieces.push_back(t.text);
    r.end = t.end;
    ++r.tokens;
  }
  return r;
}

}  // namespace

class TestReplyStream : public QObject {
  Q_OBJECT

  std::unique_ptr<Tokenizer> tok_;
  int32_t vocab_ = 0;
  std::vector<int32_t> eos_{kEos};

 private Q_SLOTS:
  void initTestCase() {
    tok_ = Tokenizer::fromFile(demoModel() / "tokenizer.json");
    vocab_ = tok_->vocabSize();
    QCOMPARE(tok_->idToToken(kEos), std::string("<|endoftext|>"));
  }

  void aReplyEndsAtEosWithItsTextDecodedAndTheEosUnseen() {
    const std::vector<int32_t> ids = tok_->encode("But soft, what light through yonder window breaks?");
    ReplyStream s(*tok_, greedy(100), {1, 2, 3}, eos_, 0);
    const Run r = feed(s, ids, vocab_);
    QCOMPARE(r.end, StopReason::Eos);
    QCOMPARE(r.text, tok_->decode(ids, true));
    QCOMPARE(r.tokens, static_cast<int>(ids.size()) + 1);
    std::vector<int32_t> expected = ids;
    expected.push_back(kEos);
    QCOMPARE(s.tokens(), expected);
    // The history grows by every token but the final one (the EOS the model never sees).
    std::vector<int32_t> history{1, 2, 3};
    history.insert(history.end(), ids.begin(), ids.end());
    QCOMPARE(s.history(), history);
  }

  void aCharacterSplitAcrossTokensComesOutWhole() {
    // "é" is two bytes, and in this byte-level vocabulary two tokens: no piece may hold half of it.
    // Byte-level BPE names the bytes 0x21-0x7E and 0xA1-0xFF by the code point of the same number.
    std::vector<int32_t> ids;
    for (const unsigned char b : std::string("caf\xC3\xA9!")) {
      const std::string name = b < 0x80 ? std::string(1, static_cast<char>(b))
                                        : std::string{static_cast<char>(0xC0 | (b >> 6)), static_cast<char>(0x80 | (b & 0x3F))};
      const auto id = tok_->tokenToId(name);
      QVERIFY2(id.has_value(), qPrintable(QString("no token for byte %1").arg(b)));
      ids.push_back(*id);
    }
    ReplyStream s(*tok_, greedy(100), {1}, eos_, 0);
    const Run r = feed(s, ids, vocab_);
    QCOMPARE(r.text, std::string("caf\xC3\xA9!"));
    for (const std::string& piece : r.pieces) QVERIFY(piece != "\xC3" && piece != "\xA9");
  }

  void aStopStringIsHeldBackThenCut() {
    const std::vector<int32_t> ids = tok_->encode("O Romeo, Romeo! wherefore art thou Romeo?");
    ReplyStream s(*tok_, greedy(100, {"wherefore"}), {1}, eos_, 0);
    const Run r = feed(s, ids, vocab_);
    QCOMPARE(r.end, StopReason::StopString);
    QCOMPARE(r.text, std::string("O Romeo, Romeo! "));
    // The tokens of the stop string are generated (they are what showed it), nothing after them.
    QVERIFY(s.tokens().size() < ids.size());
    // A tail that only looked like the start of a stop string is released when the reply ends.
    ReplyStream t(*tok_, greedy(100, {"Romeo!!"}), {1}, eos_, 0);
    const std::vector<int32_t> two = tok_->encode("O Romeo!");
    const Run u = feed(t, two, vocab_);
    QCOMPARE(u.end, StopReason::Eos);
    QCOMPARE(u.text, std::string("O Romeo!"));
  }

  void eachLimitEndsTheReplyWithItsReason() {
    const std::vector<int32_t> ids = tok_->encode("Good night, good night! Parting is such sweet sorrow.");
    QVERIFY(ids.size() > 8);
    {  // the token limit
      ReplyStream s(*tok_, greedy(5), {1}, eos_, 0);
      const Run r = feed(s, ids, vocab_);
      QCOMPARE(r.end, StopReason::MaxTokens);
      QCOMPARE(r.tokens, 5);
      QCOMPARE(r.text, tok_->decode(std::vector<int32_t>(ids.begin(), ids.begin() + 5), true));
    }
    {  // the context window: a 3-token prompt in a 7-token window leaves room for 4 generated tokens
      ReplyStream s(*tok_, greedy(100), {1, 2, 3}, eos_, 7);
      const Run r = feed(s, ids, vocab_);
      QCOMPARE(r.end, StopReason::ContextWindow);
      QCOMPARE(r.tokens, 5);
    }
    {  // the caller's stop request, checked after the limits; the text so far is flushed
      ReplyStream s(*tok_, greedy(100), {1}, eos_, 0);
      const Run r = feed(s, ids, vocab_, 3);
      QCOMPARE(r.end, StopReason::Stopped);
      QCOMPARE(r.tokens, 4);
      QCOMPARE(r.text, tok_->decode(std::vector<int32_t>(ids.begin(), ids.begin() + 4), true));
    }
    {  // a limit reached on the same token as a stop request names the limit
      ReplyStream s(*tok_, greedy(2), {1}, eos_, 0);
      const Run r = feed(s, ids, vocab_, 1);
      QCOMPARE(r.end, StopReason::MaxTokens);
    }
  }

  void theNamesOfTheEnumsAreStable() {
    for (const StopReason r : {StopReason::Eos, StopReason::StopString, StopReason::MaxTokens, StopReason::ContextWindow,
                               StopReason::Stopped})
      QCOMPARE(parseStopReason(stopReasonName(r)), r);
    QCOMPARE(std::string(stopReasonName(StopReason::StopString)), std::string("stop_string"));
    QCOMPARE(parseStopReason("from a newer version"), StopReason::None);
    QCOMPARE(std::string(openAiFinishReason(StopReason::Eos)), std::string("stop"));
    QCOMPARE(std::string(openAiFinishReason(StopReason::StopString)), std::string("stop"));
    QCOMPARE(std::string(openAiFinishReason(StopReason::MaxTokens)), std::string("length"));
    QCOMPARE(std::string(openAiFinishReason(StopReason::ContextWindow)), std::string("length"));
    QCOMPARE(parseContextOverflow("drop-oldest"), ContextOverflow::DropOldest);
    QCOMPARE(parseContextOverflow(contextOverflowName(ContextOverflow::Error)), ContextOverflow::Error);
    ZIPMOE_EXPECT_ERROR(parseContextOverflow("truncate"), "'truncate'", "drop-oldest or error");
  }

  void badParamsAreRefused() {
    SamplingParams p = greedy(0);
    ZIPMOE_EXPECT_ERROR((void)ReplyStream(*tok_, p, {1}, eos_, 0), "max");
  }
};

QTEST_APPLESS_MAIN(TestReplyStream)
#include "test_reply_stream.moc"
